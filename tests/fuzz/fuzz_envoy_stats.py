"""Fuzz target for Envoy's plain /stats text, the one scrape format nhbench parses by hand
(`nhbench.scrape.parse_envoy_stats`; docs/sweep.md, "Target metrics"): what a sweep's
``--scrape`` does with whatever page a target's admin port returns.

Run by atheris from `nox -s fuzz_python`, or by hand::

    PYTHONPATH=src python tests/fuzz/fuzz_envoy_stats.py -max_total_time=60

Each input is either raw text (the bytes decoded as UTF-8 with surrogate escapes), or one
of the pages of tests/data/envoy (Envoy's documentation's examples) with up to eight
mutations: a line replaced by fuzzed text, a fuzzed string put into a line (inside a
``P50(...)`` group, after the colon, in the name), a line repeated, the indentation of a
detailed histogram block changed.

What must hold: `parse_envoy_stats` (both bucket readings) raises ValueError with a
one-line message that starts with ``line N:`` for a line N of the page, or returns samples
whose names hold no whitespace, whose kind and mode agree (counters and buckets a delta,
gauges and quantiles a value), whose quantiles lie in 0..1 and whose bucket bounds are
finite decimals; disjoint buckets summed are never below the cumulative reading's bucket of
a page whose counts are all non-negative. `looks_like_envoy` never raises. Anything else (a
traceback) is a finding.
"""

from __future__ import annotations

import re
import sys
from decimal import Decimal
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["nhbench"]):
    from nhbench.scrape import looks_like_envoy, parse_envoy_stats

_DATA = Path(__file__).resolve().parent.parent / "data" / "envoy"
_SEEDS = [path.read_text(encoding="utf-8") for path in sorted(_DATA.glob("*.txt"))]
_LINE_ERROR = re.compile(r"^line ([0-9]+): ")


def _page(data: bytes) -> str:
    fdp = atheris.FuzzedDataProvider(data)
    if not _SEEDS or fdp.ConsumeBool():
        return fdp.ConsumeBytes(fdp.remaining_bytes()).decode("utf-8", "surrogateescape")
    lines = _SEEDS[fdp.ConsumeIntInRange(0, len(_SEEDS) - 1)].splitlines()
    for _ in range(fdp.ConsumeIntInRange(0, 8)):
        if not lines:
            break
        at = fdp.ConsumeIntInRange(0, len(lines) - 1)
        what = fdp.ConsumeIntInRange(0, 3)
        text = fdp.ConsumeUnicodeNoSurrogates(24)
        if what == 0:
            lines[at] = text
        elif what == 1:
            line = lines[at]
            cut = fdp.ConsumeIntInRange(0, len(line))
            lines[at] = line[:cut] + text + line[cut:]
        elif what == 2:
            lines.insert(at, lines[at])
        else:
            lines[at] = (" " * fdp.ConsumeIntInRange(0, 3)) + lines[at].lstrip()
    return "\n".join(lines) + ("\n" if fdp.ConsumeBool() else "")


def TestOneInput(data: bytes) -> None:  # noqa: N802 - atheris's name
    text = _page(data)
    looks_like_envoy(text)
    count = len(text.splitlines())
    results = {}
    for buckets in ("cumulative", "disjoint"):
        try:
            samples = parse_envoy_stats(text, buckets=buckets)  # type: ignore[arg-type]
        except ValueError as exc:
            message = str(exc)
            assert "\n" not in message, message
            match = _LINE_ERROR.match(message)
            assert match and 1 <= int(match.group(1)) <= count, (message, count)
            return
        for sample in samples:
            assert sample.name and not any(c.isspace() for c in sample.name), sample
            if sample.kind == "counter" or sample.name.endswith("_bucket"):
                assert sample.mode == "delta", sample
            else:
                assert sample.mode == "value", sample
            if "quantile" in sample.labels:
                assert 0 <= Decimal(sample.labels["quantile"]) <= 1, sample
            if "le" in sample.labels:
                assert Decimal(sample.labels["le"]).is_finite(), sample
        results[buckets] = samples
    cumulative = {s.key: s.value for s in results["cumulative"] if s.name.endswith("_bucket")}
    if all(value >= 0 for value in cumulative.values()):
        for sample in results["disjoint"]:
            if sample.key in cumulative:
                assert sample.value >= cumulative[sample.key] or sample.value != sample.value, (
                    sample, cumulative[sample.key])


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
