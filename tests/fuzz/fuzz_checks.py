"""Fuzz target for the --check grammar (docs/checks.md): what `nhbench run --check` and
`--slo check:NAME` do with any text.

Run by atheris from `nox -s fuzz` (`nox -s fuzz_python`), or by hand::

    PYTHONPATH=src python tests/fuzz/fuzz_checks.py -max_total_time=60

Each input is one to four checks (the bytes decoded as UTF-8 with surrogate escapes, split at
newlines), some of them built from a fuzzed subject, operator and argument so that the
fuzzer reaches past the first token quickly.

What must hold: `parse_checks` raises ValueError (a one-line message) or returns checks
within the core's limits (at most 16; names unique, 1-64 of [A-Za-z0-9_-]; texts at most 256
bytes; ranges non-empty, status ranges within 100..599; a digest of 32 bytes; a regular
expression non-empty, without NUL, with flags among i, s and m) whose
``NAME=EXPR`` form parses again to the same checks; an `--slo` rule naming a check parses or
raises ValueError. Anything else (a traceback) is a finding.
"""

from __future__ import annotations

import re
import sys

import atheris

with atheris.instrument_imports(include=["nhbench"]):
    from nhbench.options import StopRule, parse_checks

_SUBJECTS = ("status", "body", "body.size", "body.sha256", "header:x-a", "json:/a/0",
             "json:", "header:", "")
_OPS = ("in", "==", "~", "=~", "exists", "absent", "", "=")
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _texts(data: bytes) -> list[str]:
    fdp = atheris.FuzzedDataProvider(data)
    out: list[str] = []
    for _ in range(fdp.ConsumeIntInRange(1, 4)):
        if fdp.ConsumeBool():
            subject = _SUBJECTS[fdp.ConsumeIntInRange(0, len(_SUBJECTS) - 1)]
            op = _OPS[fdp.ConsumeIntInRange(0, len(_OPS) - 1)]
            out.append(f"{subject} {op} {fdp.ConsumeUnicodeNoSurrogates(40)}")
        else:
            out.append(fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 300)).decode(
                "utf-8", "surrogateescape"))
    return out


def TestOneInput(data: bytes) -> None:  # noqa: N802 - atheris's name
    texts = _texts(data)
    try:
        checks = parse_checks(texts)
    except ValueError as exc:
        assert "\n" not in str(exc).strip() or "\n" in "".join(texts), exc
        return
    assert 1 <= len(checks) <= 16
    names = [c.name for c in checks]
    assert len(set(names)) == len(names)
    for c in checks:
        assert _NAME.fullmatch(c.name), c
        assert len(c.text) <= 256 and len(c.value) <= 256 and len(c.header) <= 256
        assert all(lo <= hi for lo, hi in c.ranges) and len(c.ranges) <= 16
        if c.kind == "status":
            assert all(100 <= lo and hi <= 599 for lo, hi in c.ranges)
        if c.kind == "body_sha256":
            assert len(c.text) == 32
        if c.kind in ("body_re", "header_re"):
            # The core compiles the pattern: never empty, no NUL, flags only i, s and m.
            assert c.text and b"\0" not in c.text and set(c.value.decode()) <= set("ism"), c
        core = c.core()
        assert isinstance(core["kind"], int)
    again = parse_checks([str(c) for c in checks])
    assert [x.core() for x in again] == [c.core() for c in checks], (checks, again)
    for c in checks:
        try:
            StopRule.parse(f"check:{c.name}>=99.9%")
        except ValueError:
            raise AssertionError(f"a check's own name makes a bad rule: {c.name!r}") from None


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
