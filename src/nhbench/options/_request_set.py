"""The run's request set (issue 13): which requests the workers cycle through.

`request_specs(options)` is the one place that decides it, in this order: a request source
(Nighthawk's options-list plugins, a HAR file or an access log; `_sources`), else several
targets in round robin (`_targets`), else the options' single request. Payloads, templating
and rendering to bytes happen after, in `_core._requests_config`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._request import RequestSpec

if TYPE_CHECKING:
    from ._run import Options

__all__ = ["request_specs"]


def source_specs(options: Options) -> list[RequestSpec] | None:
    """The requests of a request source, or None when the options name none."""
    return None


def multi_target_specs(options: Options) -> list[RequestSpec] | None:
    """One request per target, in round robin, or None with a single target.

    Nighthawk's --multi-target-endpoint: every endpoint gets --multi-target-path with its
    own Host (host, plus :port unless the scheme's default); workers cycle through the list
    from the first, so consecutive requests of a worker alternate over the endpoints.
    """
    if not options.multi_target_endpoint:
        return None
    return [
        RequestSpec(target=i, authority=t.authority, path=t.path)
        for i, t in enumerate(options.targets)
    ]


def request_specs(options: Options) -> list[RequestSpec]:
    """The request set, never empty."""
    specs = source_specs(options)
    if specs is None:
        specs = multi_target_specs(options)
    if specs is None:
        specs = [RequestSpec()]
    return specs
