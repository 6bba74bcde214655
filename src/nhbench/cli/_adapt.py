"""``nhbench adapt URL --slo RULE ...``: the highest rate that meets the SLO (docs/adapt.md).

Exit status:

* 0: the search ended with an answer (converged, --max-rps passed, or the step limit, which
  the summary and the manifest say), and every --confirm run passed.
* 99 (SLO_FAILED, as ``nhbench run --slo``): even --min-rps breaks the SLO, or a
  confirmation run at the answer failed.
* 98: ``--validity strict`` and a step was invalid, then invalid again when measured once
  more at the same rate: the search stops there (an invalid step never decides the search
  under --validity strict; docs/adapt.md "Validity").
* 1: the search could not be carried out (the target, the SSH host, a host command): one
  line; the steps finished until then are kept and the manifest says ``failed``.
* 2: invalid input (no --slo, a bad rule, --min-rps above --max-rps, a bad --precision, an
  --out that is not empty, a --resume with other settings): one line, nothing created.
* 130 (SIGINT) / 143 (SIGTERM): the step in progress is abandoned, the finished ones are kept,
  and ``--resume DIR`` continues the search where it stopped.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..options import NOT_IN_AN_ADAPT, AdaptOptions, SweepOptions, add_model_flags
from . import _campaign
from ._common import note
from ._run import add_run_options

if TYPE_CHECKING:
    from ..sweep import Sweep
    from ._commands import Command, Subparsers

__all__ = ["add_parser", "run"]

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
    "redefined_until": "--until: a campaign's steps last their --duration; run the step alone "
    "with nhbench run --until",
    "redefined_max_duration": "--max-duration: a campaign's steps last their --duration "
    "(--max-duration bounds nhbench run --until)",
}


def add_parser(commands: Subparsers,
               command: Command) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        command.name,
        help=command.help,
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
    _campaign.add_redefined_flags(parser, ("--output", "--output-format", "--no-duration",
                                           "--rps", "--stop-on-slo", "--until",
                                           "--max-duration"))
    return parser


_notice_stop = _campaign.stop_notice("finished steps are kept, --resume continues the search "
                                     "(Ctrl-C again to stop at once)")


def _build(given: dict[str, Any], command: list[str]) -> Sweep:
    # The search's settings: the flags, then (with --resume) the campaign's own under them.
    from ..adaptive import prepare_adapt, settings_for_resume
    from ..campaign import load_manifest
    from ..sweep import Sweep

    resume = given.pop("resume", None)
    settings = given
    if resume is not None:
        settings = settings_for_resume(load_manifest(resume), given)
        settings["resume"] = resume
    config = prepare_adapt(settings)
    return Sweep(config.sweep, command=command, strategy=config.strategy)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..adaptive import outcome_of

    sweep = _campaign.prepare(args, _REDEFINED, _build)
    campaign = _campaign.run_campaign(sweep, _notice_stop)
    outcome = outcome_of(campaign.directory, campaign.manifest)
    _print_summary(campaign, outcome)
    status = _campaign.interrupted_status(sweep, campaign)
    return outcome.exit_status if status is None else status


def _print_summary(campaign: Any, outcome: Any) -> None:
    from ..report import adapt_summary

    _campaign.print_text_report(campaign)
    note(_campaign.campaign_summary(campaign))
    if outcome.search is not None and outcome.reason is not None:
        note(adapt_summary(campaign.manifest))
