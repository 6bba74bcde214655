"""``nhbench sweep URL [flags]``: every step of a plan recorded in a campaign directory.

Exit status of ``nhbench sweep``:

* 0: the campaign ended as planned: every step ran, or a stop rule fired (finding where a
  rule fires is what a sweep is for; the manifest and the last progress line say which).
* 98: ``--validity strict`` and a step was invalid (docs/trust.md "Validity"): the sweep
  still runs its plan (its stop rules decide where it ends, as without the flag), so that
  every step is on record with its verdict; the summary names the invalid steps.
* 1: the sweep could not be carried out (the SSH host refused us, the target did not
  resolve, a host command failed): one line on stderr. Steps finished until then are kept
  and the manifest says ``failed``.
* 2: invalid input (a flag, a stop rule, a campaign file, an --out directory that is not
  empty, a --resume with different options): one line, and nothing was created.
* 130: stopped by SIGINT (Ctrl-C), 143: stopped by SIGTERM. The step in progress is
  abandoned, the finished ones are on disk, the manifest says ``interrupted``, and
  ``--resume DIR`` continues. These are the shell's 128+signal codes, so a script can tell
  an interrupted campaign from a finished one.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..options import SweepOptions, add_model_flags
from . import _campaign
from ._common import note
from ._run import INVALID_RUN, add_run_options

if TYPE_CHECKING:
    from ..sweep import Sweep
    from ._commands import Command, Subparsers

__all__ = ["add_parser", "run"]


def add_parser(commands: Subparsers,
               command: Command) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        command.name,
        help=command.help,
        description="Run URL at each rate of a plan (--rps R --max-rps M --step-rps S, or "
        "--steps A,B,C), writing each step's full result to the campaign directory the moment "
        "it ends, until the plan ends or a stop rule fires. Every 'nhbench run' option applies "
        "to every step; --rps is per worker, as in Nighthawk. With --ssh the target host's "
        "facts, CPU load (mpstat) and flame graphs (perf) are captured over SSH; without it, "
        "on this machine. URL 'embedded' starts nhbench's own test server. See docs/sweep.md.",
        argument_default=argparse.SUPPRESS,
        allow_abbrev=False,
    )
    # The URL may come from --scenario or --resume, so the positional is optional here and
    # required by SweepOptions once the settings are merged.
    parser.add_argument("url", metavar="URL", nargs="?",
                        help=SweepOptions.model_fields["url"].description)
    # --scenario is where the options come from, not an option itself (a campaign file
    # cannot name another one).
    parser.add_argument("--scenario", metavar="FILE",
                        help="YAML campaign file whose keys are these options' names; flags "
                        "override it.")
    add_model_flags(parser, SweepOptions, skip=("url",))
    add_run_options(parser, sweep=True)
    _campaign.add_redefined_flags(parser, ("--output", "--output-format", "--no-duration",
                                           "--slo", "--until", "--max-duration"))
    return parser


_REDEFINED = {
    "redefined_output": "--output: a sweep writes every step's result into the campaign "
    "directory; use --out DIR",
    "redefined_output_format": "--output-format: a sweep writes JSON results and its own "
    "reports; see nhbench report",
    "redefined_no_duration": "--no-duration: every sweep step needs a --duration",
    "redefined_slo": "--slo: a sweep's objectives are its stop rules; use --stop-on-slo RULE "
    "(the same grammar)",
    "redefined_until": "--until: a campaign's steps last their --duration; run the step alone "
    "with nhbench run --until",
    "redefined_max_duration": "--max-duration: a campaign's steps last their --duration "
    "(--max-duration bounds nhbench run --until)",
}

_notice_stop = _campaign.stop_notice("finished steps are kept (Ctrl-C again to stop at once)")


def _build(given: dict[str, Any], command: list[str]) -> Sweep:
    # A sweep's settings: the campaign file, then the flags over it, then (with --resume)
    # the campaign's own settings under them.
    from ..campaign import load_manifest
    from ..sweep import Sweep, load_scenario, overlay, prepare_sweep, settings_for_resume

    scenario = given.pop("scenario", None)
    settings = overlay(load_scenario(scenario) if scenario else {}, given)
    resume = settings.pop("resume", None)
    if resume is not None:
        settings = settings_for_resume(load_manifest(resume), settings)
        settings["resume"] = resume
    return Sweep(prepare_sweep(settings), command=command)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    sweep = _campaign.prepare(args, _REDEFINED, _build)
    campaign = _campaign.run_campaign(sweep, _notice_stop)
    _print_summary(campaign)
    status = _campaign.interrupted_status(sweep, campaign)
    if status is not None:
        return status
    invalid = [step.index for step in campaign.manifest.steps if step.validity == "invalid"]
    if invalid and sweep.config.options.validity == "strict":
        note(f"step(s) {', '.join(map(str, invalid))} invalid (--validity strict); their "
             "reasons are under the step table")
        return INVALID_RUN
    return 0


def _print_summary(campaign: Any) -> None:
    _campaign.print_text_report(campaign)
    manifest = campaign.manifest
    summary = _campaign.campaign_summary(campaign)
    if manifest.highest_passing_step is not None:
        best = campaign.step(manifest.highest_passing_step)
        summary += (f"; highest passing step {best.index}: {best.rps_per_worker:g} rps per "
                    f"worker, {best.achieved_rps:.1f} achieved")
    note(summary)
