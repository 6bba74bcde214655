"""Request sources (issue 13): readers that turn files into a run's request set.

Nighthawk's options-list request-source plugins (in-line and file-based, JSON with its
relaxed syntax or YAML), HAR files and nginx/Envoy access logs become lists of
`nhbench._request.RequestSpec` (plus, for a replay at the original pace, each request's
offset from the first). The options (`nhbench.options`) call these to validate a source
before any load is sent.
"""

from __future__ import annotations

__all__: list[str] = []
