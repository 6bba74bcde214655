"""What every request source shares: the result type, the limits, file reading and the checks
that make a source's methods, paths and headers safe to render.

The renderer (`nhbench._request`) trusts what it is given: it writes header names and values
into the request as they are. Everything a file supplies is therefore checked here, with a
message that names the file, the entry and the problem (the options prefix the option).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote

from .._relaxed_json import read_text as _read_text
from .._request import METHODS, RequestSpec

__all__ = [
    "MAX_BODY_TOTAL",
    "MAX_ENTRIES",
    "MAX_ENTRY_CHECKS",
    "RequestSource",
    "entry_checks",
]

# Every entry of a request set is rendered before the run and copied into the core's memory,
# once per run (not per worker): 100 000 entries of a few hundred bytes stay in the tens of
# megabytes, and a log longer than that is better cut to the part worth replaying
# (``head -n``) than silently truncated.
MAX_ENTRIES = 100_000
# The bodies of all entries together: the same bound as one --request-body-size, for the same
# reason (the bytes are kept in memory for the whole run).
MAX_BODY_TOTAL = 64 * 1024 * 1024
# RFC 9110 section 5.6.2: a header name is a token.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# Non-ASCII characters in a path are percent-encoded (as the run's URI is); everything
# already valid in a request-target, including %XX escapes, is left alone.
_PATH_SAFE = "/%:@!$&'()*+,;=-._~?"


# An entry's own response checks: the run holds at most 32 checks in all (the core's
# NHB_MAX_CHECKS), its --check ones included; the grammar and the total are checked with the
# options (nhbench.options, "checks"), which know the run's.
MAX_ENTRY_CHECKS = 32


def entry_checks(value: object) -> tuple[str, ...]:
    """An entry's ``checks`` (nhbench's extension of a request source's entry,
    docs/checks.md): a list of check expressions as --check takes them, or ValueError."""
    if isinstance(value, str) or not isinstance(value, list):
        raise ValueError(f"checks must be a list of check expressions (got {value!r})")
    if len(value) > MAX_ENTRY_CHECKS:
        raise ValueError(f"checks: at most {MAX_ENTRY_CHECKS} (got {len(value)})")
    out = []
    for item in value:
        if not isinstance(item, str) or not item.strip():
            raise ValueError(f"checks: {item!r} is not a check expression (a string such as "
                             "'status in 200..299')")
        out.append(item.strip())
    return tuple(out)


@dataclass(frozen=True)
class RequestSource:
    """A request source read and checked: the entries the workers cycle through.

    ``num_requests`` (Nighthawk's options-list plugins): requests per worker before the
    source is exhausted, None for no limit. ``offsets`` (a replay at the original pace): the
    seconds from the first request to each entry's, non-decreasing, one per entry.
    """

    specs: tuple[RequestSpec, ...]
    num_requests: int | None = None
    offsets: tuple[float, ...] | None = None


def read_text(path: str, what: str, kind: str, limit: int | None = None) -> str:
    """The file's text (UTF-8) through the one reader (a regular file within `kind`'s size
    limit, or `limit` if lower), or a ValueError naming the file and the reason."""
    return _read_text(path, f"{what} {path}", kind, limit)


def check_method(value: str) -> str:
    """An upper-case method nhbench sends, or ValueError."""
    method = value.strip().upper()
    if method not in METHODS:
        raise ValueError(f"method {value!r} is not one of {', '.join(METHODS)}")
    return method


def check_path(value: str) -> str:
    """A request-target (origin form: /path?query), non-ASCII percent-encoded, or ValueError."""
    if not value.startswith("/"):
        raise ValueError(f"path {value!r} must start with /")
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        raise ValueError(f"path {value!r} must not contain spaces or control characters")
    return quote(value, safe=_PATH_SAFE)


def check_header(name: str, value: str) -> tuple[str, str]:
    """A header safe to write into a request (a token name, a Latin-1 value without CR, LF or
    NUL, as RFC 9110 allows), or ValueError."""
    if not _TOKEN.fullmatch(name):
        raise ValueError(f"header name {name!r} is not a valid HTTP token")
    value = value.strip(" \t")
    if any(ch in value for ch in "\r\n\0"):
        raise ValueError(f"header {name!r}: value must not contain CR, LF or NUL")
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        raise ValueError(f"header {name!r}: value {value!r} is not Latin-1 text") from None
    return name, value


def body_total(specs: list[RequestSpec], what: str) -> None:
    """Refuse a set whose bodies together are over MAX_BODY_TOTAL, or over MAX_ENTRIES."""
    if len(specs) > MAX_ENTRIES:
        raise ValueError(f"{what}: {len(specs)} requests, more than the {MAX_ENTRIES} a "
                          "request set may hold (cut it to the part worth replaying)")
    total = sum(len(s.body) if s.body is not None else (s.body_size or 0) for s in specs)
    if total > MAX_BODY_TOTAL:
        raise ValueError(f"{what}: the request bodies add up to {total} bytes, over the "
                          f"limit of {MAX_BODY_TOTAL}")
