"""The value grammar every option shares: durations, sizes, CPU lists, headers, addresses.

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

import ipaddress
import math
import os
import re
import socket
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Literal

from .._exceptions import ResolveError

__all__ = [
    "ADDRESS_HELP",
    "LATENCY_UNITS",
    "MAX_CPU_LIST_LENGTH",
    "MAX_DURATION",
    "REQUEST_FRAMING_HEADERS",
    "RESPONSE_FRAMING_HEADERS",
    "UNIT_SECONDS",
    "CpuCheck",
    "affinity_cpus",
    "check_header_name",
    "check_header_value",
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
    "parse_server_duration",
    "parse_size",
    "parse_worker_count",
    "resolve",
    "split_header",
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
