"""``nhbench adapt URL --slo RULE ...``: the highest rate that meets the SLO (docs/adapt.md).

Exit status:

* 0: the search ended with an answer (converged, --max-rps passed, or the step limit, which
  the summary and the manifest say), and every --confirm run passed.
* 99 (SLO_FAILED, as ``nhbench run --slo``): even --min-rps breaks the SLO, or a
  confirmation run at the answer failed.
* 1: the search could not be carried out (the target, the SSH host, a host command): one
  line; the steps finished until then are kept and the manifest says ``failed``.
* 2: invalid input (no --slo, a bad rule, --min-rps above --max-rps, a bad --precision, an
  --out that is not empty, a --resume with other settings): one line, nothing created.
* 130 (SIGINT) / 143 (SIGTERM): the step in progress is abandoned, the finished ones are kept,
  and ``--resume DIR`` continues the search where it stopped.
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

from .._exceptions import CampaignError, OptionsError
from ..options import NOT_IN_AN_ADAPT, AdaptOptions, SweepOptions, add_model_flags
from . import _NOT_OPTIONS, PROG, _die, _note, add_run_options
from ._signals import stop_on_signals

__all__ = ["add_adapt_parser"]

# The sweep's options an adapt campaign does not take (its plan); the URL is added first.
_SWEEP_SKIPPED = ("url", "max_rps", *NOT_IN_AN_ADAPT)

_REDEFINED = {
    "redefined_output": "--output: every step's result goes into the campaign directory; use "
    "--out DIR",
    "redefined_output_format": "--output-format: adapt writes JSON results and its own "
    "reports; see nhbench report",
    "redefined_no_duration": "--no-duration: every step of the search needs a --duration",
    "redefined_rps": "--rps: the search chooses the rates; give --min-rps and --max-rps",
    "redefined_stop_on_slo": "--stop-on-slo: adapt's objectives are --slo RULE (the same "
    "grammar)",
}


def add_adapt_parser(commands: argparse._SubParsersAction[Any]) -> None:
    parser = commands.add_parser(
        "adapt",
        help="search for the highest rate that still meets the SLO",
        description="Exponential then binary search over the offered rate (per worker, as "
        "--rps): start at --min-rps, double while every --slo rule passes, then bisect "
        "between the highest passing and the lowest failing rate until they are within "
        "--precision. Each step is a full measured run recorded in a campaign directory, as "
        "nhbench sweep records its steps; every 'nhbench run' option applies to every step, "
        "and --ssh captures work as in a sweep. See docs/adapt.md.",
        argument_default=argparse.SUPPRESS,
        allow_abbrev=False,
    )
    parser.add_argument("url", metavar="URL", nargs="?",
                        help=SweepOptions.model_fields["url"].description)
    add_model_flags(parser, AdaptOptions)
    add_model_flags(parser, SweepOptions, skip=_SWEEP_SKIPPED)
    add_run_options(parser, sweep=True)
    for flag in ("--output", "--output-format", "--no-duration", "--rps", "--stop-on-slo"):
        parser.add_argument(flag, nargs="?", help=argparse.SUPPRESS,
                            dest="redefined_" + flag[2:].replace("-", "_"))
    parser.set_defaults(func=_cmd_adapt, subparser=parser)


def _notice_stop(signum: int, first: bool) -> None:
    if first:
        name = signal.Signals(signum).name
        sys.stderr.write(f"{PROG}: {name}: stopping; the step in progress is abandoned, "
                         f"finished steps are kept, --resume continues the search "
                         f"(Ctrl-C again to stop at once)\n")
        sys.stderr.flush()


def _cmd_adapt(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..adaptive import outcome_of, prepare_adapt, settings_for_resume
    from ..campaign import load_manifest
    from ..sweep import Sweep
    from ._sweep import _password

    given = {k: v for k, v in vars(args).items() if k not in _NOT_OPTIONS}
    for key, message in _REDEFINED.items():
        if key in given:
            _die(message, status=2)
    argv = list(getattr(args, "argv", []))
    try:
        resume = given.pop("resume", None)
        settings = given
        if resume is not None:
            settings = settings_for_resume(load_manifest(resume), given)
            settings["resume"] = resume
        config = prepare_adapt(settings)
        sweep = Sweep(config.sweep, command=[PROG, *argv], strategy=config.strategy)
    except (OptionsError, CampaignError) as exc:
        _die(str(exc), status=2)
    sweep.use_password(_password(config.sweep))
    with stop_on_signals(sweep.stop, notice=_notice_stop):
        campaign = sweep.run()
    outcome = outcome_of(campaign.directory, campaign.manifest)
    _print_summary(campaign, outcome)
    if campaign.manifest.status == "interrupted":
        return 143 if sweep.signal == signal.SIGTERM else 130
    return outcome.exit_status


def _print_summary(campaign: Any, outcome: Any) -> None:
    from ..report import adapt_summary, render_text

    try:
        text = render_text(campaign.manifest)
    except Exception as exc:  # noqa: BLE001 - the campaign is safe on disk whatever this does
        _note(f"text report not rendered: {type(exc).__name__}: {exc}".splitlines()[0])
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
    steps = len(campaign.manifest.steps)
    line = (f"campaign {campaign.directory}: {campaign.manifest.status}, {steps} step"
            f"{'s' if steps != 1 else ''}")
    if campaign.manifest.stop_reason:
        line += f" ({campaign.manifest.stop_reason})"
    _note(line)
    if outcome.search is not None and outcome.reason is not None:
        _note(adapt_summary(campaign.manifest))
