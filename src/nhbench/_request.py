"""Render the request that the C core sends: HTTP/1.1 bytes, and HTTP/2's header block.

The core sends one pre-rendered request over and over (no per-request work on the hot path),
so everything about the request is decided here, once, before the run: the request line, the
Host header, user headers, framing and the body. HTTP/2 gets the same request as separate
parts (`render_h2_request`): method, path, authority and lower-case header fields; the core
builds the header block from them once and sends the body from the tail of the HTTP/1.1
bytes.

The headers arrive checked: the options validate them (`nhbench.options.parse_header`), so
this module only renders.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ._version import __version__

__all__ = [
    "CONTENT_LENGTH_PLACEHOLDER",
    "MAX_TEMPLATED_REQUEST",
    "METHODS",
    "USER_AGENT",
    "H2Request",
    "RequestSpec",
    "render_h2_request",
    "render_request",
    "has_placeholder",
    "template_problem",
]

USER_AGENT = f"nhbench/{__version__}"

# Nighthawk's methods plus PATCH, which people load-test APIs with.
METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT")

# Methods whose requests have defined semantics for a body: they always carry a
# Content-Length (0 when there is no body), as RFC 9110 section 8.6 asks of user agents, so
# that servers that insist on one (411 Length Required) answer normally.
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})

# Connection-specific header fields: meaningful to HTTP/1.1 only, and forbidden in HTTP/2
# (RFC 9113 section 8.2.2), where a server would reset the stream. They are left out of the
# HTTP/2 request; HTTP/1.1 still sends them.
_H1_ONLY_HEADERS = frozenset({"connection", "keep-alive", "proxy-connection", "upgrade"})


# Templating (docs/engine.md, "What is sent: bodies and templating"). The core expands these
# in every request (csrc/client/request.c); {content-length} is its own, written by
# `render_request` into the Content-Length of a templated body, and refused from users.
CONTENT_LENGTH_PLACEHOLDER = "{content-length}"
# The core's NHB_MAX_TEMPLATED_REQUEST: the longest expansion of a templated request.
MAX_TEMPLATED_REQUEST = 65536
_RAND_MAX_BOUND = 10**18
# Words in braces that are, or look like, placeholders: a name alone ({seq}, {sequence}) or
# rand with an argument. JSON ({"a": 1}) and relaxed JSON ({a: 1}) do not match.
_PLACEHOLDER_RE = re.compile(r"\{(?:([a-z][a-z0-9_-]*)|rand:([^{}]*))\}")
_KNOWN_RE = re.compile(r"\{(?:seq|uuid|worker|rand:[0-9]+|content-length)\}")


def template_problem(text: str) -> str | None:
    """What is wrong with the placeholders of `text`, or None: an unknown name, or a
    {rand:N} whose N is not a whole number from 1 to 10^18."""
    for match in _PLACEHOLDER_RE.finditer(text):
        name, bound = match.group(1), match.group(2)
        if name in ("seq", "uuid", "worker"):
            continue
        if bound is not None:
            if bound.isascii() and bound.isdigit() and 1 <= int(bound) <= _RAND_MAX_BOUND:
                continue
            return f"{match.group(0)}: N must be a whole number from 1 to 10^18"
        return (f"unknown placeholder {match.group(0)} (known: {{seq}}, {{uuid}}, {{worker}}, "
                f"{{rand:N}})")
    return None


def has_placeholder(data: bytes) -> bool:
    """Whether the core would expand something in `data` (a templated body)."""
    return _KNOWN_RE.search(data.decode("latin-1")) is not None


def render_request(
    method: str,
    target: str,
    authority: str,
    headers: Iterable[tuple[str, str]] = (),
    body_size: int = 0,
    *,
    body: bytes | None = None,
    http10: bool = False,
    content_length: str | None = None,
) -> bytes:
    """Return the complete request (head and body) as bytes.

    `target` is the request-target (path and query, or ``host:port`` for CONNECT),
    `authority` the default Host header value. A user ``Host`` or ``User-Agent`` header
    replaces nhbench's own, because testing virtual hosts and user-agent routing is a normal
    thing to do with a load tester.

    `body` is the exact body (a payload); without it the body is `body_size` 'a' bytes.
    `http10` writes an HTTP/1.0 request as Fortio's ``-http1.0`` does: no Host header unless
    the user gives one, no keep-alive. `content_length` replaces the Content-Length value
    (templating writes its ``{content-length}`` placeholder there).
    """
    method = method.upper()
    if body is not None:
        body_size = len(body)
    user = [(name, value) for name, value in headers]
    lowered = {name.lower() for name, _ in user}
    lines = [f"{method} {target} HTTP/1.0" if http10 else f"{method} {target} HTTP/1.1"]
    if "host" not in lowered and not http10:
        lines.append(f"Host: {authority}")
    if "user-agent" not in lowered:
        lines.append(f"User-Agent: {USER_AGENT}")
    lines.extend(f"{name}: {value}" for name, value in user)
    if body_size > 0 or method in _BODY_METHODS:
        lines.append(f"Content-Length: {content_length or body_size}")
    # Header values are latin-1 on the wire (RFC 9110 section 5.5); encoding fails loudly for
    # anything outside it rather than sending bytes the server would misread.
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    if body is not None:
        return head + body
    # The body is consecutive 'a' bytes, exactly like Nighthawk's --request-body-size.
    return head + b"a" * body_size


@dataclass(frozen=True)
class RequestSpec:
    """One entry of a run's request set, before payloads, templating and rendering.

    A request source (Nighthawk's options-list plugins, a HAR file, an access log), several
    targets (round robin) or the options' single request produce a list of these
    (`nhbench.options.request_specs`); the workers cycle through the rendered list in order.
    None means "as the options say": the method, the URI's path, the Host of the target,
    the options' body.
    """

    method: str | None = None
    path: str | None = None  # request-target: path plus ?query
    authority: str | None = None  # the Host header value
    headers: tuple[tuple[str, str], ...] = ()  # added to the options' headers
    body: bytes | None = None  # the exact body
    body_size: int | None = None  # or this many bytes of the run's filler
    target: int = 0  # index into the run's targets (several targets: round robin)
    # The entry's own response checks, ``[NAME=]EXPR`` as --check takes them (docs/checks.md):
    # its responses are judged by the run's checks and these.
    checks: tuple[str, ...] = ()
    name: str | None = None  # the request kind it is counted under (--group-by request)


@dataclass(frozen=True)
class H2Request:
    """The request as HTTP/2 sends it. Values are Latin-1 bytes, as on the HTTP/1.1 wire."""

    method: str
    path: str
    authority: bytes
    headers: tuple[tuple[bytes, bytes], ...]  # lower-case names, pseudo-headers excluded
    body_size: int


def render_h2_request(
    method: str,
    target: str,
    authority: str,
    headers: Iterable[tuple[str, str]] = (),
    body_size: int = 0,
    *,
    content_length: str | None = None,
) -> H2Request:
    """The same request as `render_request`, in HTTP/2's terms.

    A user ``Host`` header becomes ``:authority`` (RFC 9113 section 8.3.1 prefers it over
    Host); field names are lower-cased; connection-specific fields are left out; ``TE`` is
    kept only as ``trailers``, the one value HTTP/2 allows. The body itself is the tail of
    `render_request`'s bytes; `content_length` is as there.
    """
    method = method.upper()
    fields: list[tuple[bytes, bytes]] = []
    user_agent = True
    for name, value in headers:
        lower = name.lower()
        if lower == "host":
            authority = value
            continue
        if lower in _H1_ONLY_HEADERS or (lower == "te" and value.strip().lower() != "trailers"):
            continue
        if lower == "user-agent":
            user_agent = False
        fields.append((lower.encode("latin-1"), value.encode("latin-1")))
    if user_agent:
        fields.insert(0, (b"user-agent", USER_AGENT.encode("latin-1")))
    if body_size > 0 or method in _BODY_METHODS:
        fields.append((b"content-length", (content_length or str(body_size)).encode("ascii")))
    return H2Request(
        method=method,
        path=target,
        authority=authority.encode("latin-1"),
        headers=tuple(fields),
        body_size=body_size,
    )
