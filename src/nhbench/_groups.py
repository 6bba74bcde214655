"""Statistics per group of requests (``--group-by``, docs/engine.md "Groups"): which group
each entry of the request set belongs to, planned here once before the run, and the spread
of a grouped result.

A run groups by one of:

* ``request``: the entry's ``name`` (request sources, docs/sources.md); an entry without a
  name by its method and route template (`route_template`: the path without its query, with
  every segment that is a number, a UUID or a long hex string written ``{id}``), so that a
  replayed access log of ``GET /users/123`` and ``GET /users/456`` is one kind;
* ``target``: the target (``--multi-target-endpoint``), as given;
* ``header:NAME``: the value of the response header NAME (the first field of that name in
  the response's head), found at run time by the core; a response without it is ``(none)``.

At most `MAX_GROUPS` groups: past that, entries (or, by a header, values) fall into
``(other)``. The core keeps a count per status class, the failures and a request_to_response
histogram per group (csrc/client/group.c); nothing is added per request to a run without
groups.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._exceptions import OptionsError
from ._request import RequestSpec

if TYPE_CHECKING:
    from .options import Options

__all__ = [
    "MAX_GROUPS",
    "MAX_VALUE_BYTES",
    "effective_group_by",
    "NONE_GROUP",
    "OTHER_GROUP",
    "GroupPlan",
    "group_plan",
    "route_template",
    "refuse_unknown_group_rules",
    "spread",
    "unknown_group_rule",
    "value_name",
    "core_group_name",
]

# The core's NHB_MAX_GROUPS and NHB_GROUP_VALUE_MAX (csrc/nhb.h).
MAX_GROUPS = 64
MAX_VALUE_BYTES = 128
NONE_GROUP = "(none)"
OTHER_GROUP = "(other)"

# A header value that reads as a reserved name, or as one already escaped, takes one more
# backslash in front: (none) is named \(none) and \(none) \\(none). The map is
# one to one and never gives "(none)" or "(other)", which only the core's own buckets are.
_RESERVED_LOOKALIKE = re.compile(r"\\*\((?:none|other)\)")

_NUMBER = re.compile(r"[0-9]+")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# A hex string of 8 or more characters with at least one digit: object ids, hashes. A word
# like "deadbeef" without digits stays (it is as likely a route as an id).
_HEX = re.compile(r"(?=[0-9a-fA-F]*[0-9])[0-9a-fA-F]{8,}")


def route_template(path: str) -> str:
    """The route of a request-target: the path without its query, each segment that is a
    number, a UUID or a hex string of 8 or more characters with a digit written ``{id}``."""
    route = path.split("?", 1)[0].split("#", 1)[0]
    parts = [
        "{id}" if _NUMBER.fullmatch(p) or _UUID.fullmatch(p) or _HEX.fullmatch(p) else p
        for p in route.split("/")
    ]
    return "/".join(parts) or "/"


@dataclass(frozen=True)
class GroupPlan:
    """What a run groups by, for the core and for naming the result's groups.

    ``by`` is ``request``, ``target`` or ``header:NAME``. By request or target, ``names``
    are the groups in the core's order (``(other)`` last when there were too many) and
    ``spec_group`` the group of each request-set entry; by a header both are empty (the core
    finds the values)."""

    by: str
    names: tuple[str, ...] = ()
    spec_group: tuple[int, ...] = ()

    @property
    def header(self) -> str | None:
        return self.by[len("header:"):].lower() if self.by.startswith("header:") else None

    def core_config(self) -> dict[str, Any]:
        """The core's keys (csrc/binding/register_client.cpp, parse_groups)."""
        if self.header is not None:
            return {"group_header": self.header}
        return {"spec_group": list(self.spec_group), "ngroups": len(self.names)}


def _kind(spec: RequestSpec, options: Options) -> str:
    if spec.name:
        return spec.name
    method = spec.method or options.request_method or "GET"
    path = spec.path if spec.path is not None else (options.target.path if options.uri else "/")
    return f"{method} {route_template(path)}"


def _indexed(keys: Sequence[str]) -> tuple[tuple[str, ...], tuple[int, ...]]:
    names: list[str] = []
    index: dict[str, int] = {}
    groups: list[int] = []
    overflow = False
    for key in keys:
        i = index.get(key)
        if i is None:
            if len(names) < MAX_GROUPS:
                i = index[key] = len(names)
                names.append(key)
            else:
                overflow = True
                i = MAX_GROUPS
        groups.append(i)
    if overflow:
        names.append(OTHER_GROUP)
    return tuple(names), tuple(groups)


def effective_group_by(options: Options, specs: Sequence[RequestSpec]) -> str:
    """``options.group_by``, or its default: ``request`` when an entry of the request set
    has a name, ``none`` otherwise."""
    if options.group_by is not None:
        return options.group_by
    return "request" if any(spec.name for spec in specs) else "none"


def group_plan(options: Options, specs: Sequence[RequestSpec]) -> GroupPlan | None:
    """The run's groups, or None for a run without."""
    by = effective_group_by(options, specs)
    if by == "none":
        return None
    if by.startswith("header:"):
        return GroupPlan(by=by)
    if by == "target":
        targets = list(options.multi_target_endpoint) or [options.uri or ""]
        keys = [targets[spec.target] if spec.target < len(targets) else f"target_{spec.target}"
                for spec in specs]
    else:
        keys = [_kind(spec, options) for spec in specs]
    names, spec_group = _indexed(keys)
    return GroupPlan(by=by, names=names, spec_group=spec_group)


def value_name(value: str) -> str:
    """The group name of a response header's value: the value itself, except that one that
    reads as a reserved name ``(none)``/``(other)`` (or as such a name escaped) gets a
    backslash in front, so that no server can merge its value into the reserved buckets by
    name, nor two values into one name."""
    return "\\" + value if _RESERVED_LOOKALIKE.fullmatch(value) else value


def core_group_name(entry: Mapping[str, Any], index: int, names: Sequence[str]) -> str | None:
    """The name of the core's group entry `index` (the result's and the live progress's
    alike): a header's value by `value_name`, the reserved buckets by theirs, a request kind
    or target by the plan's `names`; None for a reserved bucket that took no request (the
    core always has both)."""
    kind = entry.get("kind")
    if kind in ("none", "other") and not entry.get("requests"):
        return None
    if kind == "value":
        return value_name(bytes(entry.get("value", b"")).decode("latin-1"))
    if kind == "none":
        return NONE_GROUP
    if kind == "other":
        return OTHER_GROUP
    return names[index] if index < len(names) else f"group_{index}"


def unknown_group_rule(options: Options, specs: Sequence[RequestSpec],
                       rules: Sequence[str] | None = None) -> str | None:
    """The first ``group:NAME:RULE`` of `rules` (default: the run's ``--slo``) that can name
    no group of the run, in words; None when each can. By request kind or target the groups
    are known before the run; by a header the values are the server's (any name may come),
    and a run without groups has none."""
    from .options import StopRule

    texts = options.slo if rules is None else rules
    parsed = [StopRule.parse(text) for text in texts if str(text).lstrip().startswith("group:")]
    rules_on_groups = [rule for rule in parsed if rule.group is not None]
    if not rules_on_groups:
        return None
    plan = group_plan(options, specs)
    for rule in rules_on_groups:
        if plan is None:
            return (f"{rule.expression!r} names a group, but the run has no groups "
                    "(--group-by request, target or header:NAME)")
        if plan.header is None and rule.group not in plan.names:
            shown = ", ".join(repr(n) for n in plan.names[:8])
            more = f" and {len(plan.names) - 8} more" if len(plan.names) > 8 else ""
            return (f"{rule.expression!r} names no group of the run (by {plan.by}: "
                    f"{shown}{more})")
    return None


def refuse_unknown_group_rules(options: Options) -> None:
    """`unknown_group_rule` as bad input (OptionsError, exit 2), before anything is sent,
    rather than a rule that fails after the run for want of data."""
    if not any(rule.lstrip().startswith("group:") for rule in options.slo):
        return
    from .options import request_specs

    unknown = unknown_group_rule(options, request_specs(options))
    if unknown is not None:
        raise OptionsError(f"slo: {unknown}", "slo")


def spread(shares: Sequence[int]) -> float | None:
    """Max share / min share over the groups that took requests (the load balancer's
    unevenness: 1.0 is an even split); None with fewer than two such groups."""
    taken = [n for n in shares if n > 0]
    if len(taken) < 2:
        return None
    return max(taken) / min(taken)
