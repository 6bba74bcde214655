"""The value grammar every option shares: durations, sizes, CPU lists, headers, addresses,
the run's URI and its schedules (stages, a start time, offsets).

Each parser takes what a user may write (from Python, a config or scenario file, or the
command line, where every value is a string) and returns the value in the unit the models
keep: seconds as floats, bytes as ints, CPU ids as a list, numeric IP addresses. Each raises
ValueError with a message written to follow "<option>: " directly, so it reads the same from
Python (``OptionsError``) and from the command line (``nhbench: error: --flag: ...``); the
models turn it into that line (`format_validation_error`).

This is the only module that knows these syntaxes: the run options, the server options, the
sweep's stop rules and the machine facts all parse through it.
"""

from __future__ import annotations

import functools
import ipaddress
import math
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal
from urllib.parse import quote, urlsplit

from .._exceptions import ResolveError
from ._targets import UNIX_HOST, check_unix_path, parse_unix_url

__all__ = [
    "ADDRESS_HELP",
    "DEFAULT_PORTS",
    "ECHO_SCHEMES",
    "HOSTNAME_RE",
    "LATENCY_UNITS",
    "MAX_CPU_LIST_LENGTH",
    "MAX_DURATION",
    "MAX_SCHEDULED_START_AHEAD",
    "MAX_SCHEDULE_OFFSETS",
    "MAX_STAGES",
    "REQUEST_FRAMING_HEADERS",
    "RESPONSE_FRAMING_HEADERS",
    "SCHEDULED_START_SLACK",
    "SCHEMES_TEXT",
    "UNIT_SECONDS",
    "CpuCheck",
    "Target",
    "affinity_cpus",
    "as_tuple",
    "check_header_name",
    "check_header_value",
    "echo_scheme",
    "format_address",
    "format_cpu_list",
    "format_json_duration",
    "machine_cpus",
    "parse_address",
    "parse_cpu_list",
    "parse_duration",
    "parse_go_duration",
    "parse_header",
    "parse_json_duration",
    "parse_schedule_offsets",
    "parse_scheduled_start",
    "parse_server_duration",
    "parse_size",
    "parse_stages",
    "parse_worker_count",
    "parse_uri",
    "resolve",
    "resolve_all",
    "split_header",
    "uri_scheme",
]


# --------------------------------------------------------------------------------------------
# Durations: ours ("5s", "500ms", "2m", plain seconds), Go's ("1m30s", Fortio's delay=) and
# protobuf's (the JSON string "0.002s", the object {"seconds": 1, "nanos": 5}).
# --------------------------------------------------------------------------------------------

#: Seconds per duration unit, for every spelling any option accepts. Go (and so Fortio)
#: also writes the micro sign as the Greek letter mu, "μs"; both are listed.
UNIT_SECONDS: dict[str, float] = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0,
}
#: The units a latency is written in (the sweep's stop rules): nanoseconds to seconds.
LATENCY_UNITS: dict[str, float] = {u: s for u, s in UNIT_SECONDS.items() if s <= 1.0}
#: The longest --duration (365 days), in seconds.
MAX_DURATION = 365 * 86400.0

# Our own syntax: one number, optionally with one unit ("5", "2.5s", "500ms", "2m").
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ns|us|µs|ms|s|m|h)?\s*$")
# Go's syntax, which Fortio's delay= takes: several parts, "1m30s", "1.5h", "300ms".
_GO_DURATION = re.compile(r"^(?:(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$")
_GO_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_DURATION_EXAMPLE = "must be a duration such as 5, 5s, 500ms or 2m"


def parse_duration(value: object) -> float:
    """Return a duration in seconds from ``5``, ``2.5``, ``"5s"``, ``"500ms"``, ``"2m"``…

    A bare number is seconds (Nighthawk's ``--duration 5``). Negative values are returned
    as they are, so that the range check of the option reports them with its own bounds.
    """
    if isinstance(value, bool):
        # bool is an int subclass; True seconds is never what anyone meant.
        raise ValueError(f"{_DURATION_EXAMPLE} (got {value!r})")
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, (int, float)):
        if math.isnan(value) or math.isinf(value):
            raise ValueError(f"must be a finite duration (got {value!r})")
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        negative = text.startswith("-")
        match = _DURATION_RE.match(text[1:] if negative else text)
        if match:
            seconds = float(match.group(1)) * UNIT_SECONDS[match.group(2) or "s"]
            return -seconds if negative else seconds
    raise ValueError(f"{_DURATION_EXAMPLE} (got {value!r})")


def parse_go_duration(value: object) -> float | None:
    """Seconds from a Go duration with several parts ("1m30s"), else None."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    negative = text.startswith("-")
    if negative:
        text = text[1:]
    if not _GO_DURATION.match(text):
        return None
    seconds = sum(float(n) * UNIT_SECONDS[u] for n, u in _GO_PART.findall(text))
    return -seconds if negative else seconds


def parse_server_duration(value: object) -> float:
    """What the test server's durations accept: `parse_duration`, Go's "1m30s" (Fortio's
    options take Go durations) and protobuf's JSON Duration object ``{"seconds": 1, "nanos":
    5}`` (Nighthawk's config files); rounded to the nanosecond, the server's resolution."""
    if isinstance(value, Mapping) and set(value) <= {"seconds", "nanos"} and value:
        try:
            return round(float(value.get("seconds", 0)) + float(value.get("nanos", 0)) / 1e9, 9)
        except (TypeError, ValueError):
            pass
        raise ValueError(f"{_DURATION_EXAMPLE} (got {value!r})")
    # Rounded so that "100us" is 0.0001, not 9.999999999999999e-05.
    try:
        return round(parse_duration(value), 9)
    except ValueError:
        seconds = parse_go_duration(value)
        if seconds is None:
            raise
        return round(seconds, 9)


_NS = 1_000_000_000


def format_json_duration(seconds: float) -> str:
    """Seconds as a protobuf JSON Duration string: ``"0.000195004s"``, ``"5s"``, ``"1.5s"``.

    Like protobuf, the fraction has 0, 3, 6 or 9 digits, whichever is exact at 1 ns.
    """
    ns = round(seconds * _NS)
    sign = "-" if ns < 0 else ""
    whole, frac = divmod(abs(ns), _NS)
    if frac == 0:
        return f"{sign}{whole}s"
    if frac % 1_000_000 == 0:
        return f"{sign}{whole}.{frac // 1_000_000:03d}s"
    if frac % 1_000 == 0:
        return f"{sign}{whole}.{frac // 1_000:06d}s"
    return f"{sign}{whole}.{frac:09d}s"


def parse_json_duration(value: object) -> object:
    """Inverse of `format_json_duration`; anything else is passed through for pydantic."""
    if isinstance(value, str) and value.endswith("s"):
        try:
            return float(value[:-1])
        except ValueError:
            return value
    return value


# --------------------------------------------------------------------------------------------
# Sizes
# --------------------------------------------------------------------------------------------

_SIZE_RE = re.compile(r"\s*(\d+)\s*([kKmMgG]i?[bB]?)?\s*")
_SIZE_SCALE = {"k": 1024, "m": 1024**2, "g": 1024**3}


def parse_size(value: object) -> object:
    """Bytes from ``"64KiB"``, ``"1MiB"``, ``"4k"`` (binary multiples, as people mean them
    for buffer limits); anything else, a plain number included, is passed on for the model's
    integer check and range to judge and report."""
    if isinstance(value, str):
        match = _SIZE_RE.fullmatch(value)
        if match and match.group(2):
            return int(match.group(1)) * _SIZE_SCALE[match.group(2)[0].lower()]
    return value


# --------------------------------------------------------------------------------------------
# Worker counts and CPU lists
# --------------------------------------------------------------------------------------------

def parse_worker_count(value: Any, maximum: int) -> int | str:
    """'auto', or a whole number of workers from 1 to `maximum` (client and server alike)."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    try:
        if isinstance(value, bool) or isinstance(value, float) and not value.is_integer():
            raise ValueError
        number = int(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise ValueError(f"must be 'auto' or an integer >= 1 (got {value!r})") from None
    if not 1 <= number <= maximum:
        raise ValueError(f"must be >= 1 and <= {maximum}, or 'auto' (got {value!r})")
    return number


def affinity_cpus() -> list[int]:
    """The CPUs this process may run on (its affinity mask), sorted."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux: no affinity API, assume all CPUs
        return list(range(os.cpu_count() or 1))


def _sysfs_cpus(name: str) -> list[int] | None:
    try:
        with open(f"/sys/devices/system/cpu/{name}", encoding="ascii") as handle:
            return sorted(parse_cpu_list(handle.read().strip()))
    except (OSError, ValueError):
        return None


def machine_cpus() -> list[int]:
    """The CPUs this machine has online, sorted: what a CPU list is checked against.

    Read from /sys/devices/system/cpu/online (ids can have holes when CPUs are offline);
    without sysfs, 0 .. os.cpu_count() - 1. The affinity mask is added in case sysfs and the
    scheduler disagree: a CPU the process may run on certainly exists.
    """
    online = _sysfs_cpus("online")
    if online is None:
        online = list(range(os.cpu_count() or 1))
    return sorted(set(online) | set(affinity_cpus()))


def format_cpu_list(cpus: object) -> str:
    """Format CPU ids compactly as a cpu list string: ``[0, 1, 2, 5]`` -> ``"0-2,5"``."""
    ids = sorted(set(cpus))  # type: ignore[call-overload]
    parts: list[str] = []
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(parts)


#: How many CPUs a list may name when it cannot be checked against the CPUs that exist (a
#: remote host's CPUs, the echo of a run made elsewhere). Linux supports at most 8192 CPUs
#: today; the bound is what keeps ``0-999999999`` from expanding into gigabytes of list.
MAX_CPU_LIST_LENGTH = 65536

_CPU_LIST_EXAMPLE = "must be a CPU list such as 0,2-3"
CpuCheck = Literal["affinity", "machine"]


def _missing(first: int, last: int, have: list[int]) -> list[tuple[int, int]]:
    """The stretches of first..last that are not in `have` (sorted), without expanding."""
    gaps: list[tuple[int, int]] = []
    at = first
    for cpu in have:
        if cpu > last:
            break
        if cpu >= at:
            if cpu > at:
                gaps.append((at, cpu - 1))
            at = cpu + 1
    if at <= last:
        gaps.append((at, last))
    return gaps


def _format_ranges(ranges: list[tuple[int, int]]) -> tuple[str, bool]:
    """``"2-999999999,7"`` and whether it names more than one CPU."""
    text = ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)
    return text, len(ranges) > 1 or ranges[0][0] != ranges[0][1]


def _check_ranges(ranges: list[tuple[int, int]], within: CpuCheck | None) -> None:
    # Every check looks at the ranges as written, before any is expanded: a list naming CPUs
    # that do not exist is refused in microseconds, whatever its size.
    if within is None:
        named = sum(last - first + 1 for first, last in ranges)
        if named > MAX_CPU_LIST_LENGTH:
            raise ValueError(f"names {named} CPUs, more than any machine has "
                             f"(at most {MAX_CPU_LIST_LENGTH} are accepted)")
        return
    machine = machine_cpus()
    absent = [gap for first, last in ranges for gap in _missing(first, last, machine)]
    if absent:
        text, plural = _format_ranges(absent)
        offline = _sysfs_cpus("present") or []
        verb = "do not exist" if plural else "does not exist"
        if offline and all(not _missing(a, b, offline) for a, b in absent):
            verb = "are offline" if plural else "is offline"
        raise ValueError(
            f"CPU{'s' if plural else ''} {text} {verb} "
            f"(this machine has CPU{'s' if len(machine) > 1 else ''} {format_cpu_list(machine)})"
        )
    if within == "affinity":
        allowed = affinity_cpus()
        outside = [gap for first, last in ranges for gap in _missing(first, last, allowed)]
        if outside:
            text, plural = _format_ranges(outside)
            raise ValueError(
                f"CPU{'s' if plural else ''} {text} {'are' if plural else 'is'} not in this "
                f"process's CPU affinity ({format_cpu_list(allowed)}; see taskset or the "
                f"cgroup's cpuset)"
            )


def parse_cpu_list(value: object, within: CpuCheck | None = None) -> list[int]:
    """Parse a cpu list (``"2,4-7"``, the taskset/cpuset syntax) or a list of ints.

    This is the only CPU-list parser of the package; every option that takes CPUs uses it.
    Order is kept and duplicates are dropped: the order decides which worker runs where.

    `within` says what the CPUs must be, checked before any range is expanded:

    * ``"affinity"``: CPUs this process may run on (for pinning threads). A CPU that exists
      but is outside the affinity mask is an error, not a silent widening: under a cgroup
      cpuset the kernel would refuse the pinning anyway (later, as a failed worker start),
      and under taskset someone deliberately kept nhbench off those CPUs, usually to leave
      them to the server under test.
    * ``"machine"``: CPUs this machine has online (for watching them).
    * None: any CPUs, at most `MAX_CPU_LIST_LENGTH` of them (another machine's CPUs).
    """
    if isinstance(value, bool):
        raise ValueError(f"{_CPU_LIST_EXAMPLE} (got {value!r})")
    if isinstance(value, int):
        value = [value]
    ranges: list[tuple[int, int]] = []
    if isinstance(value, str):
        if not value.strip():
            raise ValueError(f"{_CPU_LIST_EXAMPLE} (got an empty string)")
        for part in value.split(","):
            part = part.strip()
            match = re.fullmatch(r"(\d{1,20})(?:\s*-\s*(\d{1,20}))?", part)
            if not match:
                raise ValueError(f"{_CPU_LIST_EXAMPLE} (got {value!r})")
            first = int(match.group(1))
            last = int(match.group(2)) if match.group(2) is not None else first
            if last < first:
                raise ValueError(f"range {part!r} goes backwards (got {value!r})")
            ranges.append((first, last))
    else:
        try:
            items = list(value)  # type: ignore[call-overload]
        except TypeError:
            raise ValueError(f"{_CPU_LIST_EXAMPLE} (got {value!r})") from None
        for item in items:
            if isinstance(item, bool) or not isinstance(item, int) or item < 0:
                raise ValueError(f"CPU ids must be integers >= 0 (got {value!r})")
            ranges.append((item, item))
    if not ranges:
        raise ValueError("must name at least one CPU")
    _check_ranges(ranges, within)
    cpus = (cpu for first, last in ranges for cpu in range(first, last + 1))
    return list(dict.fromkeys(cpus))


# --------------------------------------------------------------------------------------------
# Header fields
# --------------------------------------------------------------------------------------------

# RFC 9110 token characters: what a header name may consist of.
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
#: Request headers nhbench owns because they decide the message framing: a user value that
#: disagreed with the body actually sent would desynchronise the connection.
REQUEST_FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding"})
#: Response headers the test server owns, for the same reason (and ``connection``, which it
#: sets from the request and its close= parameter).
RESPONSE_FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding", "connection"})


def split_header(text: str) -> tuple[str, str]:
    """``"name: value"`` -> ``(name, value)``, stripped; no CR, LF or NUL anywhere."""
    # CR, LF and NUL would let a header value end the header block early and smuggle a
    # second message (or garbage) onto the connection, so they are refused anywhere.
    if any(ch in text for ch in "\r\n\0"):
        raise ValueError(f"must not contain CR, LF or NUL characters (got {text!r})")
    name, sep, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not sep or not name:
        raise ValueError(f"must be 'name: value' (got {text!r})")
    return name, value


def check_header_name(
    name: str,
    original: object,
    *,
    framing: frozenset[str] = RESPONSE_FRAMING_HEADERS,
    set_by: str = "the server from the body it sends",
    echo_bad_name: bool = True,
) -> str:
    """`name` if it is a token that is not one of the `framing` headers, which are ``set by``
    someone else. `original` is what the user wrote, shown in the message (left out of the
    bad-name message with `echo_bad_name` False, as the run's --request-header always did)."""
    if not name or not _TOKEN.match(name):
        got = f" (got {original!r})" if echo_bad_name else ""
        raise ValueError(f"header name {name!r} has characters not allowed in a header "
                         f"name{got}")
    if name.lower() in framing:
        raise ValueError(f"{name} is set by {set_by} and cannot be given (got {original!r})")
    return name


def check_header_value(value: str, original: object) -> str:
    """`value` if it can go on the wire as it is: no CR/LF/NUL or other controls but tab,
    and Latin-1 (RFC 9110 section 5.5: field values are octets, read as Latin-1)."""
    if any(ch in value for ch in "\r\n\0"):
        raise ValueError(f"must not contain CR, LF or NUL characters (got {original!r})")
    if any(ord(ch) < 0x20 and ch != "\t" or ord(ch) == 0x7F for ch in value):
        raise ValueError(f"header value has control characters (got {original!r})")
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        raise ValueError(f"header value must be Latin-1 text (got {original!r})") from None
    return value


def parse_header(text: str) -> tuple[str, str]:
    """A request header: split ``"name: value"`` into ``(name, value)`` and check that it is
    safe to send (``--request-header``)."""
    if not isinstance(text, str):
        raise ValueError(f"must be a 'name: value' string (got {text!r})")
    name, value = split_header(text)
    check_header_name(name, text, framing=REQUEST_FRAMING_HEADERS,
                      set_by="nhbench from the body size", echo_bad_name=False)
    return name, check_header_value(value, text)


# --------------------------------------------------------------------------------------------
# Addresses
# --------------------------------------------------------------------------------------------

_FAMILIES = {"auto": socket.AF_UNSPEC, "v4": socket.AF_INET, "v6": socket.AF_INET6}


def resolve(host: str, port: int, address_family: str = "auto") -> str:
    """Resolve `host` to one numeric IP address of the wanted family (a literal is returned
    normalised); raises ResolveError.

    'auto' prefers IPv4 and falls back to IPv6 (Envoy's V4_PREFERRED). Preferring IPv4 avoids
    the classic trap of ``localhost`` resolving to ``::1`` first while the server listens on
    127.0.0.1 only; the client connects to one address and does not try the others, and the
    server binds numeric addresses only.
    """
    family = _FAMILIES[address_family]
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        if address_family == "v4" and literal.version != 4 or (
            address_family == "v6" and literal.version != 6
        ):
            raise ResolveError(
                f"address {host} is IPv{literal.version} but address_family is {address_family}"
            )
        return str(literal)
    try:
        infos = socket.getaddrinfo(host, port, family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        wanted = "" if address_family == "auto" else f" to an IP{address_family} address"
        raise ResolveError(f"cannot resolve host {host!r}{wanted}: {exc.strerror}") from None
    except UnicodeError:
        raise ResolveError(f"cannot resolve host {host!r}: not a valid host name") from None
    if not infos:
        raise ResolveError(f"cannot resolve host {host!r}: no addresses")
    if address_family == "auto":
        infos.sort(key=lambda info: 0 if info[0] == socket.AF_INET else 1)
    return str(infos[0][4][0])


def resolve_all(host: str, port: int, address_family: str = "auto") -> list[str]:
    """Every numeric address `host` has in the wanted family, in the resolver's order with
    IPv4 first under 'auto' (as `resolve`), duplicates dropped; raises ResolveError. A
    literal is its own single address."""
    first = resolve(host, port, address_family)
    try:
        ipaddress.ip_address(host)
        return [first]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port, _FAMILIES[address_family], socket.SOCK_STREAM,
                                   socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError):
        return [first]
    if address_family == "auto":
        infos.sort(key=lambda info: 0 if info[0] == socket.AF_INET else 1)
    addresses = [first]
    for info in infos:
        address = str(info[4][0])
        if address not in addresses:
            addresses.append(address)
    return addresses


ADDRESS_HELP = "must be HOST:PORT such as 127.0.0.1:8080, [::1]:0 or :8080"


def parse_address(value: object) -> tuple[str, int]:
    """``"127.0.0.1:8080"``, ``"[::1]:0"``, ``":8080"`` (0.0.0.0) or ``("host", port)``.

    Host names are resolved here, once (IPv4 preferred): the C server binds numeric
    addresses only. Returns ``(numeric_host, port)``.
    """
    if isinstance(value, (tuple, list)) and len(value) == 2:
        host, port = value
        if not isinstance(host, str):
            raise ValueError(f"{ADDRESS_HELP} (got {value!r})")
        host = host.strip().strip("[]")
    elif isinstance(value, Mapping) and {"host", "port"} <= set(value):
        return parse_address((value["host"], value["port"]))
    elif isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            host, sep, port = text[1:].partition("]:")
        else:
            host, sep, port = text.rpartition(":")
            if ":" in host:
                raise ValueError(
                    f"an IPv6 address needs brackets, as in [::1]:8080 (got {value!r})"
                )
        if not sep:
            hint = f"; did you mean :{text}?" if text.isdigit() else ""
            raise ValueError(f"{ADDRESS_HELP}{hint} (got {value!r})")
        host = host or "0.0.0.0"
    else:
        raise ValueError(f"{ADDRESS_HELP} (got {value!r})")
    if isinstance(port, bool):
        raise ValueError(f"port must be an integer in 0..65535 (got {value!r})")
    try:
        port_number = int(str(port).strip()) if isinstance(port, str) else int(port)
        if isinstance(port, float) and not port.is_integer():
            raise ValueError
    except (TypeError, ValueError):
        raise ValueError(f"port must be an integer in 0..65535 (got {value!r})") from None
    if not 0 <= port_number <= 65535:
        raise ValueError(f"port must be in 0..65535 (got {value!r})")
    if not host:
        raise ValueError(f"{ADDRESS_HELP} (got {value!r})")
    try:
        return resolve(host, port_number), port_number
    except ResolveError as exc:
        raise ValueError(f"{exc} (got {value!r})") from None


def format_address(host: str, port: int) -> str:
    """``127.0.0.1:8080`` or ``[::1]:8080``."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# --------------------------------------------------------------------------------------------
# The run's URI: http(s)://, grpc(s)://, the echo targets tcp:// and udp://, and Unix sockets
# written http://unix:/path.sock:/request-path.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """The parts of the URI the run needs."""

    scheme: str
    host: str  # host name or IP literal, without brackets
    port: int
    path: str  # request-target: path plus ?query, never empty
    authority: str  # the Host header value: host, plus :port when not the default
    # http://unix:/path.sock:/request-path: the Unix socket to connect to.
    unix_socket: str | None = None

    @property
    def url(self) -> str:
        if self.unix_socket is not None:
            return f"{self.scheme}://unix:{self.unix_socket}:{self.path}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.path}"


#: A DNS host name (also the syntax --sni takes).
HOSTNAME_RE = re.compile(
    r"^(?=.{1,253}\.?$)[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
    r"(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*\.?$"
)

#: The port a URI of each HTTP-speaking scheme means when it names none.
DEFAULT_PORTS = {"http": 80, "https": 443, "grpc": 80, "grpcs": 443}
# Echo targets have no standard port, so the URI must name one (docs/protocols.md).
ECHO_SCHEMES = ("tcp", "udp")


def echo_scheme(uri: object) -> str | None:
    """``tcp`` or ``udp`` for an echo URI, else None (also for no URI)."""
    if not isinstance(uri, str):
        return None
    scheme = uri.strip().split("://", 1)[0].lower() if "://" in uri else ""
    return scheme if scheme in ECHO_SCHEMES else None


def uri_scheme(uri: str) -> str | None:
    """The scheme of a URI that may be malformed (`parse_uri` says how), or None."""
    try:
        return urlsplit(uri.strip()).scheme.lower()
    except ValueError:
        return None


SCHEMES_TEXT = "http://, https://, grpc://, grpcs://, tcp:// and udp://"


def parse_uri(uri: object) -> Target:
    """Check the URI and split it into what the run needs.

    ``http://`` and ``https://``, ``grpc://`` (gRPC over h2c), ``grpcs://`` (gRPC over
    TLS), and the echo targets ``tcp://host:port`` and ``udp://host:port``.
    """
    # Remembered per text: the checks of one set of options ask for the target about ten
    # times, and the result browser validates the options of thousands of files. The
    # answer depends on the text alone and a Target is frozen; a refusal is not remembered.
    if type(uri) is str:
        return _parse_uri_text(uri)
    return _parse_uri(uri)


def _parse_uri(uri: object) -> Target:
    if not isinstance(uri, str) or not uri.strip():
        raise ValueError("must be a URL such as http://127.0.0.1:8080/")
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in uri):
        raise ValueError(f"must not contain spaces or control characters (got {uri!r})")
    lowered = uri.lower()
    unix = parse_unix_url(uri)
    if unix is not None:
        scheme, socket_path, request_path = unix
        check_unix_path(socket_path)
        safe = "/%:@!$&'()*+,;=-._~?"
        return Target(
            scheme=scheme, host=UNIX_HOST, port=DEFAULT_PORTS[scheme],
            path=quote(request_path, safe=safe), authority=UNIX_HOST, unix_socket=socket_path,
        )
    if lowered.startswith(("unix:", "http+unix:", "https+unix:", "/")) or re.match(
        r"^https?://unix:[^0-9]", lowered
    ):
        # The test server listens on unix:PATH, so people try the same spelling here.
        raise ValueError(
            "Unix domain sockets are written http://unix:/path/to.sock:/request-path, or "
            f"--unix-socket PATH with an http:// or https:// URL (got {uri!r})"
        )
    if "://" not in uri:
        # Suggest the fix only when the text looks like a host[:port][/path] that just lacks
        # the scheme; for anything else (such as "http//x") the suggestion would be nonsense.
        if "//" not in uri and re.match(
            r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(:\d+)?(/|$)", uri
        ):
            raise ValueError(f"must start with http://, e.g. http://{uri} (got {uri!r})")
        raise ValueError(f"must start with http:// or https:// (got {uri!r})")
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"malformed URL ({exc}) (got {uri!r})") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS and scheme not in ECHO_SCHEMES:
        raise ValueError(
            f"unsupported scheme {scheme + '://'!r}, only {SCHEMES_TEXT} are supported"
        )
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"user information in the URL is not supported (got {uri!r})")
    host = parts.hostname
    if not host:
        raise ValueError(f"malformed URL: no host (got {uri!r})")
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"malformed URL: bad IPv6 address {host!r} (got {uri!r})") from None
    elif not HOSTNAME_RE.match(host):
        raise ValueError(f"malformed URL: bad host name {host!r} (got {uri!r})")
    if port == 0:
        raise ValueError(f"port must be in 1..65535 (got {uri!r})")
    if scheme in ECHO_SCHEMES:
        # An echo target is an address: no path, no query, and a port it must name.
        if port is None:
            raise ValueError(f"{scheme}:// needs a port, e.g. {scheme}://127.0.0.1:8078 "
                             f"(got {uri!r})")
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ValueError(f"{scheme}:// takes no path or query (got {uri!r})")
        bracketed = f"[{host}]" if ":" in host else host
        return Target(scheme=scheme, host=host, port=port, path="/",
                      authority=f"{bracketed}:{port}")
    # Non-ASCII characters in the path are percent-encoded (as a browser would); everything
    # already valid in a request-target, including existing %XX escapes, is left alone.
    safe = "/%:@!$&'()*+,;=-._~"
    path = quote(parts.path, safe=safe) or "/"
    if parts.query:
        path += "?" + quote(parts.query, safe=safe + "?")
    bracketed = f"[{host}]" if ":" in host else host
    default_port = DEFAULT_PORTS[scheme]
    authority = bracketed if port in (None, default_port) else f"{bracketed}:{port}"
    return Target(
        scheme=scheme, host=host, port=port or default_port, path=path, authority=authority
    )


@functools.lru_cache(maxsize=1024)
def _parse_uri_text(uri: str) -> Target:
    return _parse_uri(uri)


# --------------------------------------------------------------------------------------------
# Schedules: linear stages (TIME:RPS), a wall-clock start, an explicit list of offsets.
# --------------------------------------------------------------------------------------------

# 100 stages cover any test plan; an explicit schedule of 10 million entries is 80 MB per
# run in the core.
MAX_STAGES = 100
MAX_SCHEDULE_OFFSETS = 10_000_000
# --scheduled-start: a start this far in the past is a moment of slack (the time the options
# take to validate and the run to set up); more than 24 h ahead is almost surely a typo.
SCHEDULED_START_SLACK = 1.0
MAX_SCHEDULED_START_AHEAD = 86400.0


def as_tuple(value: object) -> object:
    """A single string given where a list is expected is one item, not a list of characters."""
    return (value,) if isinstance(value, str) else value


def parse_stages(value: object) -> tuple[tuple[float, float], ...]:
    """``["30s:1000", "2m:0"]`` (or pairs) -> ((30.0, 1000.0), (120.0, 0.0))."""
    items = as_tuple(value)
    if not isinstance(items, (list, tuple)):
        raise ValueError(f"must be TIME:RPS such as 30s:1000 (got {value!r})")
    out = []
    for item in items:
        if isinstance(item, str):
            time_text, sep, rate_text = item.strip().rpartition(":")
            if not sep or not time_text:
                raise ValueError(f"must be TIME:RPS such as 30s:1000 (got {item!r})")
        elif isinstance(item, (list, tuple)) and len(item) == 2:
            time_text, rate_text = item
        else:
            raise ValueError(f"must be TIME:RPS such as 30s:1000 (got {item!r})")
        seconds = parse_duration(time_text)
        if not 0 < seconds <= MAX_DURATION:
            raise ValueError(f"a stage lasts more than 0 s and at most {MAX_DURATION:g} s "
                             f"(got {item!r})")
        try:
            rate = float(rate_text)
        except (TypeError, ValueError):
            raise ValueError(f"RPS must be a number, e.g. 30s:1000 (got {item!r})") from None
        if not 0 <= rate <= 1_000_000 or math.isnan(rate):
            raise ValueError(f"RPS must be 0-1000000 per worker (got {item!r})")
        out.append((seconds, rate))
    if len(out) > MAX_STAGES:
        raise ValueError(f"at most {MAX_STAGES} stages (got {len(out)})")
    return tuple(out)


def parse_scheduled_start(value: object, *, check_now: bool = True) -> float:
    """RFC 3339 text or epoch seconds -> epoch seconds; with `check_now`, refused when in
    the past (beyond a moment) or more than 24 h ahead."""
    import time
    from datetime import datetime, timezone

    if isinstance(value, bool):
        raise ValueError(f"must be RFC 3339 or epoch seconds (got {value!r})")
    epoch: float
    if isinstance(value, (int, float)):
        epoch = float(value)
    elif isinstance(value, datetime):
        epoch = value.timestamp() if value.tzinfo else value.replace(
            tzinfo=timezone.utc).timestamp()
    elif isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"[0-9]+(\.[0-9]*)?", text):
            epoch = float(text)
        else:
            try:
                when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
            except ValueError:
                raise ValueError(
                    f"must be RFC 3339 (2030-01-01T12:00:00Z) or epoch seconds (got {value!r})"
                ) from None
            if when.tzinfo is None:
                raise ValueError(f"must name its time zone, e.g. a trailing Z (got {value!r})")
            epoch = when.timestamp()
    else:
        raise ValueError(f"must be RFC 3339 or epoch seconds (got {value!r})")
    if not math.isfinite(epoch) or epoch <= 0:
        raise ValueError(f"must be RFC 3339 or epoch seconds (got {value!r})")
    if check_now:
        now = time.time()
        if epoch < now - SCHEDULED_START_SLACK:
            raise ValueError(f"is in the past by {now - epoch:.3g} s (got {value!r})")
        if epoch > now + MAX_SCHEDULED_START_AHEAD:
            raise ValueError(f"is more than 24 h ahead (got {value!r})")
    return epoch


def parse_schedule_offsets(value: object) -> tuple[float, ...] | None:
    """A non-decreasing list of seconds >= 0 (``schedule_offsets``)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = [item for item in value.replace(" ", "").split(",") if item]
    if not isinstance(value, (list, tuple)):
        raise ValueError("must be a list of seconds")
    try:
        offsets = tuple(float(item) for item in value)
    except (TypeError, ValueError):
        raise ValueError("must be a list of seconds") from None
    if not offsets:
        raise ValueError("must list at least one offset")
    if len(offsets) > MAX_SCHEDULE_OFFSETS:
        raise ValueError(f"at most {MAX_SCHEDULE_OFFSETS} entries (got {len(offsets)})")
    for i, seconds in enumerate(offsets):
        if not 0 <= seconds <= MAX_DURATION or math.isnan(seconds):
            raise ValueError(f"entry {i} must be 0-{MAX_DURATION:g} s (got {seconds!r})")
        if i and seconds < offsets[i - 1]:
            raise ValueError(f"must not decrease (entry {i}: {seconds!r} after "
                             f"{offsets[i - 1]!r})")
    return offsets
