"""Request sources: readers that turn files into a run's request set.

Nighthawk's options-list request-source plugins (in-line and file-based, JSON with its
relaxed syntax or YAML), HAR files and nginx/Envoy access logs become lists of
`nhbench._request.RequestSpec` (plus, for a replay at the original pace, each request's
offset from the first). The options (`nhbench.options`) call these to validate a source
before any load is sent. Every error is a ValueError with a one-line message naming the
file, the entry and the problem.
"""

from __future__ import annotations

from ._common import MAX_BODY_TOTAL, MAX_ENTRIES, RequestSource
from ._nighthawk import FILE_BASED_PLUGIN, IN_LINE_PLUGIN, load_options_list, load_plugin_config
from ._replay import REPLAY_FORMATS, load_replay

__all__ = [
    "FILE_BASED_PLUGIN",
    "IN_LINE_PLUGIN",
    "MAX_BODY_TOTAL",
    "MAX_ENTRIES",
    "REPLAY_FORMATS",
    "RequestSource",
    "load_options_list",
    "load_plugin_config",
    "load_replay",
]
