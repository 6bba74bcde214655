"""``nhbench compare BASELINE CANDIDATE``: is the candidate worse, better or the same?

Each side is a result file (nhbench's JSON, Nighthawk's JSON) or a directory of them (every
``*.json`` in it, as ``nhbench run --repeat N --output-dir DIR`` writes them): one run a
side is compared by a block bootstrap over its interval histograms, several runs a side add
a rank test across the runs (`nhbench._compare`, docs/trust.md "Comparing runs"). The
table goes to stdout (``--output json``: the `Comparison` as JSON).

Exit status: 0 compared (and, with --fail-on-regression, nothing regressed); 3 with
--fail-on-regression, a statistic regressed; 2 bad input (a file that is not a result, an
empty directory, a bad flag value): one line, nothing compared; 1 the comparison could not
be carried out (an interval histogram that does not decode).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING

from ._common import die

if TYPE_CHECKING:
    from .._result import Result
    from ._commands import Command, Subparsers

__all__ = ["REGRESSED", "add_parser", "run"]

#: The exit status of a comparison that found a regression (with --fail-on-regression).
REGRESSED = 3
# A directory side holds at most this many runs (each is loaded whole).
_MAX_RUNS = 1000


def add_parser(commands: Subparsers, command: Command) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        command.name,
        help=command.help,
        description="Compare CANDIDATE with BASELINE: for p50, p90, p99, p99.9, mean "
        "latency, rate and error rate, the difference with a confidence interval (a block "
        "bootstrap over the runs' interval histograms; with several runs a side, a "
        "Mann-Whitney U test across them as well) and a verdict: regressed, improved or no "
        "significant change. Each side is a result file (nhbench's or Nighthawk's JSON) or "
        "a directory of them (nhbench run --repeat N --output-dir DIR). Exit status: 0, or "
        f"{REGRESSED} for a regression with --fail-on-regression; 2 bad input. See "
        "docs/trust.md.",
        allow_abbrev=False,
    )
    parser.add_argument("baseline", metavar="BASELINE",
                        help="The baseline: a result file or a directory of them.")
    parser.add_argument("candidate", metavar="CANDIDATE",
                        help="The candidate: a result file or a directory of them.")
    parser.add_argument("--output", metavar="FORMAT", default="human",
                        help="human (the table, default) or json.")
    parser.add_argument("--fail-on-regression", action="store_true",
                        help=f"Exit {REGRESSED} when a statistic regressed.")
    parser.add_argument("--confidence", metavar="LEVEL", default="95%",
                        help="Confidence level of the intervals: 95%% (default) or 0.95, "
                        "in [50%%, 100%%).")
    parser.add_argument("--resamples", metavar="N", default="2000",
                        help="Bootstrap resamples, 100..100000 (default 2000).")
    parser.add_argument("--seed", metavar="N", default="0",
                        help="Seed of the resampling (default 0): the same files and seed "
                        "give the same numbers.")
    parser.add_argument("--block-length", metavar="N", default=None,
                        help="Intervals per block (default: Politis and White's estimate "
                        "from the runs, docs/trust.md).")
    return parser


def _number(text: str, flag: str, *, integer: bool = False) -> float:
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        die(f"{flag}: not a number: {text!r}", status=2)
    if integer and (not value.is_integer()):
        die(f"{flag}: not a whole number: {text!r}", status=2)
    return value


def _load_side(path: str, side: str) -> list[Result]:
    from .._exceptions import ResultFileError
    from .._load import load_result

    if os.path.isdir(path):
        try:
            names = sorted(name for name in os.listdir(path) if name.endswith(".json"))
        except OSError as exc:
            die(f"{side} {path!r}: {exc.strerror or exc}", status=2)
        files = [os.path.join(path, name) for name in names
                 if os.path.isfile(os.path.join(path, name))]
        if not files:
            die(f"{side} {path!r}: the directory holds no .json result file", status=2)
        if len(files) > _MAX_RUNS:
            die(f"{side} {path!r}: {len(files)} result files, more than the {_MAX_RUNS} "
                "a side may have", status=2)
    else:
        files = [path]
    runs = []
    for name in files:
        try:
            runs.append(load_result(name))
        except ResultFileError as exc:
            die(f"{side}: {exc}", status=2)
    return runs


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .._compare import compare, single_threaded_blas
    from .._histogram import HistogramDecodeError

    # Before numpy is imported (a comparison imports it): see its doc.
    single_threaded_blas()

    output = args.output.strip().lower()
    if output not in ("human", "json"):
        die(f"--output: must be human or json (got {args.output!r})", status=2)
    confidence = _number(args.confidence, "--confidence")
    if not 0.5 <= confidence < 1:
        die(f"--confidence: must be in [50%, 100%) (got {args.confidence!r})", status=2)
    resamples = int(_number(args.resamples, "--resamples", integer=True))
    if not 100 <= resamples <= 100_000:
        die(f"--resamples: must be in 100..100000 (got {args.resamples!r})", status=2)
    seed = int(_number(args.seed, "--seed", integer=True))
    if seed < 0:
        die(f"--seed: must not be negative (got {args.seed!r})", status=2)
    block_length = None
    if args.block_length is not None:
        block_length = int(_number(args.block_length, "--block-length", integer=True))
        if block_length < 1:
            die(f"--block-length: must be at least 1 (got {args.block_length!r})", status=2)
    baseline = _load_side(args.baseline, "baseline")
    candidate = _load_side(args.candidate, "candidate")
    try:
        comparison = compare(baseline, candidate, confidence=confidence,
                             resamples=resamples, seed=seed, block_length=block_length)
    except HistogramDecodeError as exc:
        die(f"an interval histogram does not decode: {exc}", status=1)
    if output == "json":
        sys.stdout.write(json.dumps(comparison.to_dict(), indent=1) + "\n")
    else:
        sys.stdout.write(f"{comparison}\n")
    sys.stdout.flush()
    if args.fail_on_regression and comparison.regressed:
        return REGRESSED
    return 0
