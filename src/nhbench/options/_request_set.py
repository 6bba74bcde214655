"""The run's request set: which requests the workers cycle through.

`request_specs(options)` is the one place that decides it, in this order: a request source
(Nighthawk's options-list plugins, a HAR file or an access log; `_sources`), else several
targets in round robin (`_targets`), else the options' single request. Payloads, templating
and rendering to bytes happen after, in `_core._requests_config`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._request import RequestSpec
from ..sources import REPLAY_FORMATS, RequestSource, load_plugin_config, load_replay

if TYPE_CHECKING:
    from ._run import Options

__all__ = ["apply_source_schedule", "request_source", "request_specs"]


def request_source(options: Options) -> RequestSource | None:
    """The request source the options name, read and checked, or None. A bad source raises
    ValueError with one line naming the file, the entry and the problem."""
    if options.request_source_plugin_config is not None:
        return load_plugin_config(options.request_source_plugin_config)
    if options.replay is not None:
        return load_replay(options.replay, options.replay_format,
                           original_timing=options.replay_timing == "original")
    return None


def request_source_offsets(path: str, kind: str) -> tuple[float, ...]:
    """The original timing of a replay file, read before the options are validated."""
    if kind not in REPLAY_FORMATS:
        kind = "auto"  # the field's own validator refuses the value
    source = load_replay(path, kind, original_timing=True)
    assert source.offsets is not None
    return source.offsets


def source_specs(options: Options) -> list[RequestSpec] | None:
    """The requests of a request source, or None when the options name none."""
    source = request_source(options)
    return None if source is None else list(source.specs)


def _set_schedule_field(options: Options, name: str, value: Any, what: str) -> None:
    # `requests` and `schedule_offsets` are the schedule's fields (docs/engine.md "Shaping
    # the schedule"); a source only fills them in. A value the user gave that says something
    # else is a conflict, not something to pick a winner for.
    current = getattr(options, name)
    if current is not None and current != value:
        shown = f"{len(current)} offsets" if isinstance(current, tuple) else repr(current)
        raise ValueError(f"{what} conflicts with {name} = {shown}")
    # Not marked as set by the user: a copy of the options with another concurrency
    # (make_options) works it out again from the source.
    object.__setattr__(options, name, value)


def apply_source_schedule(options: Options, source: RequestSource) -> None:
    """What a source says about the schedule, written into the options: Nighthawk's
    num_requests (per worker) as the exact request count `requests` (in all), a replay's
    original timing as `schedule_offsets`."""
    if source.num_requests is not None:
        total = source.num_requests * options.workers
        workers = f"{options.workers} worker" + ("s" if options.workers != 1 else "")
        _set_schedule_field(options, "requests", total,
                            f"num_requests {source.num_requests} per worker ({total} in all "
                            f"with {workers})")
    if source.offsets is not None:
        _set_schedule_field(options, "schedule_offsets", source.offsets,
                            "replay_timing original")


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
