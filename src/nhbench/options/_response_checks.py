"""Response checks (``--check [NAME=]EXPR``, docs/checks.md): the grammar, parsed and
validated here so that a bad check is refused by name before anything is sent; the C core
(csrc/client/check.c) gets the compiled table (`ResponseCheck.core`) and evaluates it as
each response arrives.

Grammar (one check per ``--check``; NAME is letters, digits, ``_`` and ``-``)::

    status in 200,204 | status in 200..299 | status == 200
    header:NAME exists | header:NAME absent | header:NAME ~ TEXT | header:NAME == TEXT
    header:NAME =~ /RE/FLAGS
    body ~ TEXT | body =~ /RE/FLAGS
    body.size in 100..2000 | body.size == 1024
    body.sha256 == HEX (64 hex digits)
    json:/pointer exists | json:/pointer == VALUE (a JSON number, string, true, false, null)

TEXT is a double-quoted string (JSON escapes) or one word without blanks. RE is a Vectorscan
pattern (PCRE syntax without backreferences or lookaround; at most 256 bytes), FLAGS any of
``i`` (caseless), ``s`` (dot matches newlines) and ``m`` (multi-line anchors); the core compiles
the patterns when the run is created and refuses by name what Vectorscan cannot match in
linear time.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from ._flags import Flag
from ._run_model import RunPart

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._request import RequestSpec
    from ._run import Options

__all__ = [
    "CHECK_KINDS",
    "ResponseChecks",
    "check_response_checks",
    "core_check_error",
    "JSON_PREFIX_BYTES",
    "MAX_CHECKS",
    "MAX_TEXT_BYTES",
    "ResponseCheck",
    "parse_check",
    "parse_checks",
    "refuse_check_protocol",
    "run_checks",
    "unknown_check_rule",
]

#: The core's limits (csrc/nhb.h: NHB_MAX_CHECKS, NHB_CHECK_TEXT_MAX,
#: NHB_CHECK_MAX_RANGES, NHB_CHECK_JSON_PREFIX). MAX_CHECKS counts the run's checks and its
#: request-set entries' own together (a bit each in the core's masks).
MAX_CHECKS = 32
MAX_TEXT_BYTES = 256
MAX_RANGES = 16
JSON_PREFIX_BYTES = 16384
MAX_NAME = 64

#: nhb_check_kind_t, in the core's order.
CHECK_KINDS: tuple[str, ...] = (
    "status", "header_exists", "header_has", "header_eq", "body_has", "body_size",
    "body_sha256", "json_exists", "json_eq", "header_absent", "body_re", "header_re",
)

#: The repeat counts of a regular expression, added up and multiplied through nested groups
#: (``a{10}(b{5}){20}`` counts 10 + 5 * 20): Vectorscan's compile time grows with them, to
#: minutes at run creation for a 40-byte pattern with ``.{30000}`` four times.
MAX_REGEX_REPEATS = 1000

_QUANT = re.compile(r"\{([0-9]+)(?:,([0-9]*))?\}")


def _repeat_total(pattern: str) -> int:
    """The sum of the pattern's ``{n}``, ``{n,}`` and ``{n,m}`` counts (the larger bound),
    a quantified group's count multiplying its contents'."""
    frames = [0]
    i, n = 0, len(pattern)

    def quantifier(at: int) -> tuple[int, int]:
        m = _QUANT.match(pattern, at)
        if m is None:
            return 0, at
        return max(int(m[1]), int(m[2]) if m[2] else 0), m.end()

    while i < n:
        ch = pattern[i]
        if ch == "\\":
            # \x{..}, \p{..}, \o{..} and \N{..} hold braces that are no quantifier.
            i += 2
            if i < n and pattern[i - 1] in "xpPoN" and pattern[i] == "{":
                end = pattern.find("}", i)
                i = n if end < 0 else end + 1
            count, i = quantifier(i)
            frames[-1] += count
        elif ch == "[":
            i += 1
            if i < n and pattern[i] == "^":
                i += 1
            if i < n and pattern[i] == "]":
                i += 1
            while i < n and pattern[i] != "]":
                i += 2 if pattern[i] == "\\" else 1
            count, i = quantifier(i + 1)
            frames[-1] += count
        elif ch == "(":
            frames.append(0)
            i += 1
        elif ch == ")" and len(frames) > 1:
            inner = frames.pop()
            count, i = quantifier(i + 1)
            frames[-1] += count * max(inner, 1) if count else inner
        else:
            count, i = quantifier(i + 1)
            frames[-1] += count
    return sum(frames)


#: A regular expression's flags (Vectorscan's HS_FLAG_CASELESS, _DOTALL, _MULTILINE).
REGEX_FLAGS = {"i": "caseless", "s": "dot matches newlines", "m": "multi-line ^ and $"}

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_PREFIX_NAME = re.compile(r"^\s*(?P<name>[A-Za-z0-9_-]+)\s*=(?![=~])\s*(?P<rest>.*)$", re.S)
_SUBJECT = re.compile(
    r"^\s*(?P<subject>status|body\.size|body\.sha256|body|header:[^\s~=]+|json:\S*)"
    r"\s*(?P<op>=~|==|~|in\b|exists\b|absent\b)?\s*(?P<arg>.*?)\s*$",
    re.S,
)
_GRAMMAR = ("expected 'status in 200,204', 'status in 200..299', 'status == 200', "
            "'header:NAME exists|absent|~ TEXT|== TEXT|=~ /RE/', 'body ~ TEXT|=~ /RE/', "
            "'body.size in 100..2000', "
            "'body.sha256 == HEX' or 'json:/pointer exists|== VALUE', with an optional NAME= "
            "before it")


@dataclass(frozen=True)
class ResponseCheck:
    """One parsed check: its name (the counters are ``check.NAME.pass`` and
    ``check.NAME.fail``), the expression as written and the core's table entry."""

    name: str
    expression: str
    kind: str
    header: bytes = b""
    text: bytes = b""
    value: bytes = b""
    ranges: tuple[tuple[int, int], ...] = field(default_factory=tuple)
    #: 0: it judges every response; k: only those to request-set entry k - 1 (an entry's own).
    entry: int = 0

    def core(self) -> dict[str, Any]:
        """The binding's dict for this check (csrc/binding/register_client.cpp)."""
        return {"name": self.name, "kind": CHECK_KINDS.index(self.kind), "header": self.header,
                "text": self.text, "value": self.value, "ranges": list(self.ranges),
                "entry": self.entry}

    def __str__(self) -> str:
        return f"{self.name}={self.expression}"


def _text(raw: str, what: str) -> bytes:
    """A TEXT argument: a JSON-quoted string or one bare word."""
    if not raw:
        raise ValueError(f"{what} needs a text: a word or a \"quoted string\"")
    if raw.startswith('"'):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            raise ValueError(f"{what}: {raw} is not one \"quoted string\" (JSON escapes)") \
                from None
        if not isinstance(value, str):
            raise ValueError(f"{what}: {raw} is not one \"quoted string\"")
    elif any(ch.isspace() for ch in raw):
        raise ValueError(f"{what}: {raw!r} has blanks: quote it (\"...\")")
    else:
        value = raw
    data = value.encode()
    if not data:
        raise ValueError(f"{what}: the text is empty")
    if len(data) > MAX_TEXT_BYTES:
        raise ValueError(f"{what}: the text is over {MAX_TEXT_BYTES} bytes ({len(data)})")
    return data


def _ranges(raw: str, what: str, low: int, high: int) -> tuple[tuple[int, int], ...]:
    """``200,204`` / ``200..299`` / ``100..2000,4096``: inclusive ranges."""
    out: list[tuple[int, int]] = []
    for part in raw.split(","):
        part = part.strip()
        m = re.fullmatch(r"([0-9]+)(?:\s*\.\.\s*([0-9]+))?", part)
        if m is None:
            raise ValueError(f"{what}: {part!r} is not a number or a range N..M")
        lo = int(m[1])
        hi = int(m[2]) if m[2] is not None else lo
        if lo > hi:
            raise ValueError(f"{what}: the range {part} is empty (its start is past its end)")
        if lo < low or hi > high:
            raise ValueError(f"{what}: {part} is outside {low}..{high}")
        out.append((lo, hi))
    if len(out) > MAX_RANGES:
        raise ValueError(f"{what}: more than {MAX_RANGES} values or ranges")
    return tuple(out)


def _regex(raw: str, what: str) -> tuple[bytes, bytes]:
    """``/RE/FLAGS``: the pattern (between the first and the last ``/``) and its flags. The
    core compiles it (Vectorscan's syntax is not Python's); here only its form is checked."""
    m = re.fullmatch(r"/(?P<re>.*)/(?P<flags>[^/]*)", raw, re.S)
    if m is None:
        raise ValueError(f"{what}: a regular expression is written /RE/ with optional flags "
                         f"(/RE/i)")
    pattern, flags = m["re"].encode(), m["flags"]
    for flag in flags:
        if flag not in REGEX_FLAGS:
            raise ValueError(f"{what}: {flag!r} is not a flag: "
                             + ", ".join(f"{k} ({v})" for k, v in REGEX_FLAGS.items()))
    if len(set(flags)) != len(flags):
        raise ValueError(f"{what}: a flag is given twice ({flags})")
    if not pattern:
        raise ValueError(f"{what}: the regular expression is empty")
    if len(pattern) > MAX_TEXT_BYTES:
        raise ValueError(f"{what}: the regular expression is over {MAX_TEXT_BYTES} bytes "
                         f"({len(pattern)})")
    if b"\0" in pattern:
        raise ValueError(f"{what}: the regular expression holds a NUL byte: write it \\x00")
    repeats = _repeat_total(m["re"])
    if repeats > MAX_REGEX_REPEATS:
        raise ValueError(f"{what}: the repeat counts add up to {repeats} (a group's count "
                         f"multiplies its contents'), over {MAX_REGEX_REPEATS}: compiling it "
                         f"would take Vectorscan too long")
    return pattern, flags.encode()


def _json_pointer(raw: str) -> bytes:
    if raw and not raw.startswith("/"):
        raise ValueError(f"json:{raw}: a JSON pointer is empty or starts with '/' (RFC 6901)")
    if re.search(r"~(?![01])", raw):
        raise ValueError(f"json:{raw}: '~' in a pointer is ~0 ('~') or ~1 ('/') (RFC 6901)")
    data = raw.encode()
    if len(data) > MAX_TEXT_BYTES:
        raise ValueError(f"json:{raw}: a pointer over {MAX_TEXT_BYTES} bytes")
    return data


def _json_value(raw: str, subject: str) -> bytes:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        raise ValueError(f"{subject} == {raw}: not a JSON value (a number, \"string\", true, "
                         f"false or null)") from None
    if isinstance(value, (dict, list)):
        raise ValueError(f"{subject} ==: only a number, string, true, false or null is "
                         f"compared, not an object or array")
    # Compared as written in the response, so a string keeps its escapes as the user wrote
    # them; a number is compared as the user wrote it too (42 does not equal 42.0).
    data = raw.encode()
    if len(data) > MAX_TEXT_BYTES:
        raise ValueError(f"{subject} ==: the value is over {MAX_TEXT_BYTES} bytes")
    return data


def _default_name(subject: str) -> str:
    base = re.sub(r"[^a-z0-9_-]+", "_", subject.lower().replace(".", "_")).strip("_")
    return (base or "json")[:MAX_NAME]


def parse_check(text: object) -> ResponseCheck:
    """One ``[NAME=]EXPR``; ValueError ``'<text>': <what is wrong>`` otherwise."""
    if not isinstance(text, str):
        raise ValueError(f"{text!r}: a check is a string such as 'status in 200..299'")
    whole = text.strip()
    name = ""
    rest = whole
    m = _PREFIX_NAME.match(whole)
    if m is not None:
        name, rest = m["name"], m["rest"]
        if not _NAME.fullmatch(name):
            raise ValueError(f"{text!r}: the name {name!r} is over {MAX_NAME} characters")
    s = _SUBJECT.match(rest)
    if s is None:
        raise ValueError(f"{text!r}: {_GRAMMAR}")
    subject, op, arg = s["subject"], s["op"] or "", s["arg"]
    where = f"{text!r}"
    if op == "=~" and subject != "body" and not subject.startswith("header:"):
        raise ValueError(f"{where}: '=~ /RE/' applies to body or header:NAME")
    kind: str
    header = b""
    body = b""
    value = b""
    ranges: tuple[tuple[int, int], ...] = ()
    if subject == "status":
        if op == "==":
            ranges = _ranges(arg, where, 100, 599)
            if len(ranges) != 1 or ranges[0][0] != ranges[0][1]:
                raise ValueError(f"{where}: 'status ==' takes one code; use 'status in' for more")
        elif op == "in":
            ranges = _ranges(arg, where, 100, 599)
        else:
            raise ValueError(f"{where}: status takes 'in 200,204', 'in 200..299' or '== 200'")
        kind = "status"
    elif subject == "body.size":
        if op not in ("in", "=="):
            raise ValueError(f"{where}: body.size takes 'in 100..2000' or '== 1024'")
        ranges = _ranges(arg, where, 0, 2**63 - 1)
        if op == "==" and (len(ranges) != 1 or ranges[0][0] != ranges[0][1]):
            raise ValueError(f"{where}: 'body.size ==' takes one number")
        kind = "body_size"
    elif subject == "body.sha256":
        if op != "==" or not re.fullmatch(r"[0-9A-Fa-f]{64}", arg):
            raise ValueError(f"{where}: body.sha256 takes '== ' and 64 hex digits")
        kind, body = "body_sha256", bytes.fromhex(arg)
    elif subject == "body":
        if op == "=~":
            kind, (body, value) = "body_re", _regex(arg, where)
        elif op != "~":
            raise ValueError(f"{where}: body takes '~ TEXT' (contains) or '=~ /RE/'; a size is "
                             f"body.size, a digest body.sha256")
        else:
            kind, body = "body_has", _text(arg, where)
    elif subject.startswith("header:"):
        hname = subject[len("header:"):]
        if not _TOKEN.fullmatch(hname) or len(hname) > MAX_TEXT_BYTES:
            raise ValueError(f"{where}: {hname!r} is not a header name")
        header = hname.lower().encode()
        if op == "exists" and not arg:
            kind = "header_exists"
        elif op == "absent" and not arg:
            kind = "header_absent"
        elif op == "~":
            kind, body = "header_has", _text(arg, where)
        elif op == "==":
            kind, body = "header_eq", _text(arg, where)
        elif op == "=~":
            kind, (body, value) = "header_re", _regex(arg, where)
        else:
            raise ValueError(f"{where}: a header takes 'exists', 'absent', '~ TEXT', "
                             f"'== TEXT' or '=~ /RE/'")
    else:  # json:
        pointer = subject[len("json:"):]
        body = _json_pointer(pointer)
        if op == "exists" and not arg:
            kind = "json_exists"
        elif op == "==":
            kind, value = "json_eq", _json_value(arg, subject)
        else:
            raise ValueError(f"{where}: a JSON pointer takes 'exists' or '== VALUE'")
    if kind in ("status", "body_size") and op == "in" and not arg:
        raise ValueError(f"{where}: 'in' needs values")
    expression = rest.strip()
    return ResponseCheck(name or _default_name(subject), expression, kind, header, body, value,
                         ranges)


def parse_checks(texts: object) -> tuple[ResponseCheck, ...]:
    """Every check, names made unique (a second unnamed ``status`` check is ``status_2``);
    ValueError naming the first problem. Two checks given the same name are refused."""
    if isinstance(texts, (str, ResponseCheck)):
        texts = [texts]
    if not isinstance(texts, (list, tuple)):
        raise ValueError(f"{texts!r}: expected a list of checks")
    if len(texts) > MAX_CHECKS:
        raise ValueError(f"at most {MAX_CHECKS} checks (got {len(texts)})")
    out: list[ResponseCheck] = []
    named: set[str] = set()
    for text in texts:
        check = text if isinstance(text, ResponseCheck) else parse_check(text)
        explicit = isinstance(text, str) and _PREFIX_NAME.match(text.strip()) is not None \
            and check.name == _PREFIX_NAME.match(text.strip())["name"]  # type: ignore[index]
        if check.name in named:
            if explicit:
                raise ValueError(f"{text!r}: the name {check.name!r} is taken by another check")
            n = 2
            while f"{check.name}_{n}" in named:
                n += 1
            check = ResponseCheck(f"{check.name}_{n}", check.expression, check.kind,
                                  check.header, check.text, check.value, check.ranges)
        named.add(check.name)
        out.append(check)
    return tuple(out)


def run_checks(checks: Sequence[str], specs: Sequence[RequestSpec] | None = None,
               ) -> tuple[ResponseCheck, ...]:
    """The checks of a run: its own (``--check``, judging every response), then each
    request-set entry's own (a request source's ``checks``, judging that entry's responses
    only). Names are unique in the run: an entry's unnamed check is named after its entry
    and subject (``e2_status`` for entry 2), and a name given twice is refused by name. At
    most `MAX_CHECKS` in all. ValueError naming the entry and the problem."""
    out = list(parse_checks(list(checks)))
    taken = {check.name: "--check" for check in out}
    for k, spec in enumerate(specs or ()):
        for text in spec.checks:
            try:
                check = parse_check(text)
            except ValueError as exc:
                raise ValueError(f"entry {k}: check {exc}") from None
            named = _PREFIX_NAME.match(text.strip()) is not None
            name = check.name if named else f"e{k}_{check.name}"[:MAX_NAME]
            if name in taken:
                raise ValueError(f"entry {k}: check {text!r}: the name {name!r} is taken by "
                                 f"{taken[name]}'s check (check names are unique in the run)")
            taken[name] = f"entry {k}"
            out.append(ResponseCheck(name, check.expression, check.kind, check.header,
                                     check.text, check.value, check.ranges, entry=k + 1))
    if len(out) > MAX_CHECKS:
        raise ValueError(f"{len(out)} checks in the run (--check and the entries' own "
                         f"together), more than {MAX_CHECKS}")
    return tuple(out)



class ResponseChecks(RunPart):
    """``--check``: what each response is judged by besides its status class."""

    check: Annotated[tuple[str, ...], Flag(metavar="[NAME=]EXPR", append=True)] = Field(
        default=(),
        description="A response check, repeatable (docs/checks.md): 'status in 200..299', "
        "'header:content-type ~ json', 'body ~ \"\\\"ok\\\":true\"', 'body.size in 100..2000', "
        "'body.sha256 == HEX', 'json:/data/id exists', with an optional NAME= before it. Each "
        "counts check.NAME.pass and check.NAME.fail; a 2xx response that fails one is an error "
        "(benchmark.check_failed) and its latency goes to latency_check_failed. HTTP/1.1, "
        "HTTP/2 and HTTP/3 (not gRPC, tcp:// or udp://).",
    )

    @field_validator("check", mode="before")
    @classmethod
    def _parse_check(cls, value: object) -> object:
        # Parsed here so that a malformed check is refused before any load is sent; kept as
        # NAME=EXPR with the names made unique, which the core config parses again.
        if value is None:
            return ()
        if isinstance(value, str):
            value = (value,)
        if isinstance(value, (list, tuple)):
            return tuple(str(check) for check in parse_checks(list(value)))
        return value


def core_check_error(message: str, checks: tuple[str, ...] | list[str]) -> str:
    """The core names a check by its index (``checks[2]: ...``, say a regular expression
    Vectorscan refused): named here as the user wrote it, ``check 'NAME=EXPR': ...``."""
    m = re.match(r"checks\[([0-9]+)\]: ", message)
    if m is None or int(m[1]) >= len(checks):
        return message
    return f"check '{checks[int(m[1])]}': {message[m.end():]}"


def check_response_checks(options: Options, info: ValidationInfo) -> None:
    """Checks are evaluated by the HTTP sessions (HTTP/1.1, HTTP/2, HTTP/3): refused by name
    for gRPC (whose grpc-status is the call's verdict) and tcp:// / udp:// (no HTTP response
    to judge) rather than silently never failing. ``--slo check:NAME`` and a predicate on
    ``check.NAME.pass|fail`` must name a check of the run (a request source's entries'
    own included, read again only when a name is not one of --check's)."""
    named = {check.partition("=")[0] for check in options.check}
    wanted = [(m[1], "slo", rule) for rule in options.slo
              if (m := re.match(r"\s*check:([A-Za-z0-9_-]+)", rule)) is not None]
    for counter in (*options.failure_predicates, *options.termination_predicate):
        if counter.startswith("check."):
            m = re.fullmatch(r"check\.([A-Za-z0-9_-]+)\.(?:pass|fail)", counter)
            which = ("failure_predicates" if counter in options.failure_predicates
                     else "termination_predicate")
            wanted.append((m[1] if m is not None else "", which, counter))
    if any(name not in named for name, _, _ in wanted) and not (info.context or {}).get("echo"):
        named |= {check.name for check in _entry_checks(options)}
    for name, which, text in wanted:
        if name not in named:
            what = "names no --check" if which == "slo" else "is no check's counter"
            raise PydanticCustomError("options_file", "{a}: {msg}", {
                "a": which, "msg": f"{text!r} {what} (checks: "
                f"{', '.join(sorted(named)) or 'none'})"})
    if options.check:
        refuse_check_protocol(options, "check")


def unknown_check_rule(rules: Sequence[str], options: Options) -> str | None:
    """The first ``check:NAME`` rule (a sweep's --stop-on-slo, adapt's --slo) that names no
    check of the run the options describe, in words; None when every one does."""
    named = {check.partition("=")[0] for check in options.check}
    for rule in rules:
        m = re.match(r"\s*check:([A-Za-z0-9_-]+)", str(rule))
        if m is None or m[1] in named:
            continue
        named |= {check.name for check in _entry_checks(options)}
        if m[1] not in named:
            return (f"{str(rule)!r} names no check of the run (checks: "
                    f"{', '.join(sorted(named)) or 'none'})")
    return None


def refuse_check_protocol(options: Options, option: str) -> None:
    """Checks on a run that has no HTTP response to judge, refused by name."""
    scheme = options.target.scheme if options.uri else "http"
    if options.is_grpc or scheme in ("tcp", "udp"):
        raise PydanticCustomError("options_file", "{a}: {msg}", {
            "a": option, "msg": f"response checks are not supported with {scheme}:// "
            "(HTTP/1.1, HTTP/2 and HTTP/3 only: a gRPC call's verdict is its grpc-status, "
            "tcp and udp have no HTTP response)"})


def _entry_checks(options: Options) -> tuple[ResponseCheck, ...]:
    """The request source's own checks (entry > 0), read again; () without a source or when
    it cannot be read (check_request_source has said so already)."""
    from ._request_set import source_specs

    try:
        specs = source_specs(options)
        return tuple(c for c in run_checks((), specs) if c.entry)
    except ValueError:
        return ()
