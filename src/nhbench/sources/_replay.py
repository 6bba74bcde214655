"""Replay: a HAR 1.2 file or an access log (nginx "combined" or "common", Envoy's default
format) as a request set, with each request's offset from the first for a replay at the
original pace.

What each format gives (docs/engine.md "Request sources and replay"):

* HAR: the method, the URL's path and query, the headers (without pseudo-headers, hop-by-hop
  headers, Host and Content-Length, which belong to the run and the renderer) and the body
  (``postData.text``, or its ``params`` form-encoded; else ``bodySize`` filler bytes);
  ``startedDateTime`` for the timing.
* nginx combined/common: the method and path of ``$request``, the Referer and User-Agent
  (combined); the time, to the second. The request body size is not in these formats.
* Envoy's default format: the method and path, the User-Agent, the request body size
  (``%BYTES_RECEIVED%``); ``%START_TIME%`` to the millisecond.

The protocol, the status, the response size and the entry's host are not replayed: the run's
URI is the target and its options choose the protocol.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import urlencode, urlsplit

from .._input import read_input
from .._request import RequestSpec
from ._common import (
    MAX_ENTRIES,
    RequestSource,
    body_total,
    check_header,
    check_method,
    check_path,
    entry_checks,
)

__all__ = ["REPLAY_FORMATS", "load_replay"]

REPLAY_FORMATS = ("auto", "har", "nginx", "envoy")

# Connection-specific headers (RFC 9110 section 7.6.1, RFC 9113 section 8.2.2) and the ones
# the run owns: a recorded request's framing and target are not the replay's.
_DROPPED_HEADERS = frozenset({
    "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
    "upgrade", "host", "content-length",
})

# nginx: $remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent
# then, for "combined", "$http_referer" "$http_user_agent". nginx escapes '"' and bytes
# outside printable ASCII as \xHH inside the quoted fields.
_QUOTED = r'"((?:[^"\\]|\\.)*)"'
_NGINX = re.compile(
    r'(\S+) \S+ (\S+) \[([^\]]+)\] ' + _QUOTED + r' (\d{3}|-) (\d+|-)'
    r'(?: ' + _QUOTED + r' ' + _QUOTED + r')?'
)
# Envoy: [%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%"
# %RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION%
# %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" ...
_ENVOY = re.compile(
    r'\[([^\]]+)\] ' + _QUOTED + r' (\d+|-) (\S+) (\d+|-) (\d+|-) (\d+|-) (\S+)'
    r'(?: ' + _QUOTED + r' ' + _QUOTED + r')?'
)


def _unescape_nginx(text: str) -> str:
    return re.sub(r"\\x([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)),
                  text).replace('\\"', '"').replace("\\\\", "\\")


def _har_time(value: object) -> float:
    if not isinstance(value, str):
        raise ValueError(f"startedDateTime {value!r} is not an ISO 8601 time")
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"startedDateTime {value!r} is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        raise ValueError(f"startedDateTime {value!r} has no time zone")
    return moment.timestamp()


def _har_entry(entry: object) -> tuple[RequestSpec, float | None]:
    if not isinstance(entry, Mapping):
        raise ValueError("must be an object")
    request = entry.get("request")
    if not isinstance(request, Mapping):
        raise ValueError("has no request object")
    method = check_method(str(request.get("method", "")))
    url = request.get("url")
    if not isinstance(url, str) or not url:
        raise ValueError("request has no url")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ValueError(f"url {url!r}: {exc}") from None
    path = check_path((parts.path or "/") + (f"?{parts.query}" if parts.query else ""))
    headers: list[tuple[str, str]] = []
    names: set[str] = set()
    raw_headers = request.get("headers") or []
    if not isinstance(raw_headers, list):
        raise ValueError("request.headers is not a list")
    for item in raw_headers:
        if not isinstance(item, Mapping):
            raise ValueError("a header is not an object")
        name, value = str(item.get("name", "")), str(item.get("value", ""))
        lower = name.lower()
        if lower.startswith(":") or lower in _DROPPED_HEADERS:
            continue
        headers.append(check_header(name, value))
        names.add(lower)
    body: bytes | None = None
    body_size: int | None = None
    post = request.get("postData")
    if isinstance(post, Mapping):
        text = post.get("text")
        params = post.get("params")
        if isinstance(text, str):
            if str(post.get("encoding", "")).lower() == "base64":
                try:
                    body = base64.b64decode(text, validate=True)
                except ValueError:
                    raise ValueError("postData.text is not valid base64") from None
            else:
                body = text.encode("utf-8")
        elif isinstance(params, list):
            body = urlencode([(str(p.get("name", "")), str(p.get("value", "")))
                              for p in params if isinstance(p, Mapping)]).encode("ascii")
        mime = post.get("mimeType")
        if body is not None and isinstance(mime, str) and mime and "content-type" not in names:
            headers.append(check_header("Content-Type", mime))
    if body is None:
        size = request.get("bodySize")
        if isinstance(size, int) and not isinstance(size, bool) and size > 0:
            body_size = size
    started = _har_time(entry["startedDateTime"]) if "startedDateTime" in entry else None
    # The entry's own response checks: HAR's custom-field convention (a leading underscore)
    # for nhbench's extension (docs/checks.md).
    checks = entry_checks(entry["_checks"]) if "_checks" in entry else ()
    return (RequestSpec(method=method, path=path, headers=tuple(headers), body=body,
                        body_size=body_size, checks=checks), started)


def _load_har(path: str, raw: bytes) -> list[tuple[RequestSpec, float | None]]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"HAR file {path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} "
                         f"at offset {exc.start})") from None
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"HAR file {path}: not valid JSON: {exc.msg} at line {exc.lineno} "
                          f"column {exc.colno}") from None
    except RecursionError:
        raise ValueError(f"HAR file {path}: nested too deeply") from None
    log = data.get("log") if isinstance(data, Mapping) else None
    entries = log.get("entries") if isinstance(log, Mapping) else None
    if not isinstance(entries, list):
        raise ValueError(f"HAR file {path}: no log.entries list (not a HAR file)")
    if len(entries) > MAX_ENTRIES:
        raise ValueError(f"HAR file {path}: {len(entries)} entries, more than the "
                          f"{MAX_ENTRIES} a request set may hold")
    out = []
    for i, entry in enumerate(entries):
        try:
            out.append(_har_entry(entry))
        except ValueError as exc:
            raise ValueError(f"HAR file {path}: entry {i}: {exc}") from None
    return out


def _log_request(request: str) -> tuple[str, str] | None:
    """Method and path of a logged request line; None for what was never a request."""
    parts = request.split(" ")
    if len(parts) not in (2, 3) or parts[0] == "-":
        return None
    target = parts[1]
    if target.lower().startswith(("http://", "https://")):
        # A forward proxy logs the absolute form; the host is the run's, the path is kept.
        split = urlsplit(target)
        target = (split.path or "/") + (f"?{split.query}" if split.query else "")
    if not target.startswith("/"):
        return None  # "*", an authority (CONNECT) or bytes that never were a request
    return parts[0], target


def _log_line(line: str, kind: str) -> tuple[RequestSpec | None, float]:
    """One log line as (spec, seconds), spec None for a logged non-request; ValueError if the
    line is not in the format."""
    headers: list[tuple[str, str]] = []
    body_size: int | None = None
    if kind == "nginx":
        match = _NGINX.match(line)
        if match is None:
            raise ValueError("not in nginx's combined or common format")
        try:
            seconds = datetime.strptime(match.group(3), "%d/%b/%Y:%H:%M:%S %z").timestamp()
        except ValueError:
            raise ValueError(f"time {match.group(3)!r} is not nginx's $time_local") from None
        request = _unescape_nginx(match.group(4))
        referer, agent = match.group(7), match.group(8)
        if referer not in (None, "", "-"):
            headers.append(check_header("Referer", _unescape_nginx(referer)))
    else:
        match = _ENVOY.match(line)
        if match is None:
            raise ValueError("not in Envoy's default access log format")
        try:
            seconds = datetime.fromisoformat(match.group(1).replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise ValueError(f"time {match.group(1)!r} is not Envoy's START_TIME") from None
        request = match.group(2)
        if match.group(5) not in ("-", "0"):
            body_size = int(match.group(5))
        agent = match.group(10)
    got = _log_request(request)
    if got is None:
        return None, seconds
    method, path = check_method(got[0]), check_path(got[1])
    if agent not in (None, "", "-"):
        headers.append(check_header("User-Agent", _unescape_nginx(agent)
                                    if kind == "nginx" else agent))
    return RequestSpec(method=method, path=path, headers=tuple(headers),
                       body_size=body_size), seconds


def _load_log(path: str, kind: str, data: bytes) -> list[tuple[RequestSpec, float | None]]:
    out: list[tuple[RequestSpec, float | None]] = []
    for number, raw in enumerate(data.decode("utf-8", "surrogateescape").splitlines(), 1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        this = kind
        if kind == "auto":
            this = "envoy" if line.startswith("[") else "nginx"
        try:
            if any("\udc80" <= ch <= "\udcff" for ch in line):
                raise ValueError("not UTF-8 text")
            spec, seconds = _log_line(line, this)
        except ValueError as exc:
            raise ValueError(f"access log {path}: line {number}: {exc}") from None
        if spec is not None:
            out.append((spec, seconds))
            if len(out) > MAX_ENTRIES:
                raise ValueError(f"access log {path}: more than the {MAX_ENTRIES} "
                                  "requests a request set may hold (cut it, e.g. "
                                  f"head -n {MAX_ENTRIES})")
    if not out:
        raise ValueError(f"access log {path}: no requests in it")
    return out


def _detect(path: str, data: bytes) -> str:
    """har for a .har name or a file starting with '{', else an access log (per line)."""
    if path.lower().endswith(".har"):
        return "har"
    return "har" if data[:64].lstrip().startswith(b"{") else "auto"


def load_replay(path: str, kind: str = "auto", original_timing: bool = False) -> RequestSource:
    """A HAR file or an access log as a request source, in the file's order; with
    `original_timing`, in the order of the recorded times, with each one's offset."""
    data = read_input(path, "replay", f"replay file {path}")
    if kind == "auto":
        kind = _detect(path, data)
    entries: Iterable[tuple[RequestSpec, float | None]]
    if kind == "har":
        entries = _load_har(path, data)
        what = f"HAR file {path}"
    else:
        entries = _load_log(path, kind, data)
        what = f"access log {path}"
    entries = list(entries)
    if not entries:
        raise ValueError(f"{what}: no requests in it")
    specs = [spec for spec, _ in entries]
    body_total(specs, what)
    offsets: tuple[float, ...] | None = None
    if original_timing:
        missing = [i for i, (_, t) in enumerate(entries) if t is None]
        if missing:
            raise ValueError(f"{what}: entry {missing[0]}: no startedDateTime, so no "
                              "original timing")
        # A replay at the original pace releases in time order; sorted() is stable, so
        # requests logged at the same moment keep the file's order.
        ordered = sorted(entries, key=lambda item: item[1] or 0.0)
        start = ordered[0][1] or 0.0
        specs = [spec for spec, _ in ordered]
        offsets = tuple(round((t or 0.0) - start, 6) for _, t in ordered)
    return RequestSource(specs=tuple(specs), offsets=offsets)
