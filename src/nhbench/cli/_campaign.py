"""What ``nhbench sweep`` and ``nhbench adapt`` do alike: both run a campaign of steps.

They differ in where their settings come from (a sweep also reads a campaign file; the
search has its own options and strategy) and in what they say at the end; everything around
that is here, once: refusing the run flags the command defines its own way, turning the
settings into a `Sweep` (bad input exits 2 before anything is created), asking for the SSH
password last, running under the signal handler, printing the text report and the summary
line, and the shell's 128+signal status for an interrupted campaign.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .._exceptions import CampaignError, OptionsError
from .._signals import stop_on_signals
from ._common import NOT_OPTIONS, PROG, die, note

if TYPE_CHECKING:
    from ..sweep import Sweep

__all__ = ["add_redefined_flags", "campaign_summary", "interrupted_status", "prepare",
           "print_text_report", "run_campaign", "stop_notice"]


def add_redefined_flags(parser: argparse.ArgumentParser, flags: tuple[str, ...]) -> None:
    """Accept 'nhbench run' flags the command has no use for, so that `prepare` refuses them
    with a message that says what to do instead of argparse's bare "unrecognized
    arguments"."""
    for flag in flags:
        parser.add_argument(flag, nargs="?", help=argparse.SUPPRESS,
                            dest="redefined_" + flag[2:].replace("-", "_"))


def prepare(args: argparse.Namespace, redefined: Mapping[str, str],
            build: Callable[[dict[str, Any], list[str]], Sweep]) -> Sweep:
    """The campaign the flags describe: `build` turns the given settings and the command line
    into a `Sweep`; any OptionsError or CampaignError it raises exits 2, before anything is
    created. A flag of `redefined` (`add_redefined_flags`) exits 2 with its message."""
    given = {k: v for k, v in vars(args).items() if k not in NOT_OPTIONS}
    for key, message in redefined.items():
        if key in given:
            die(message, status=2)
    argv = list(getattr(args, "argv", []))
    try:
        sweep = build(given, [PROG, *argv])
    except (OptionsError, CampaignError) as exc:
        die(str(exc), status=2)
    # Asked only now, once everything else is known to be valid.
    sweep.use_password(_password(sweep.config))
    return sweep


def _password(config: Any) -> str | None:
    ssh = config.ssh
    if ssh is None or not ssh.password_prompt:
        return None
    from ..hosts import prompt_password

    return prompt_password(ssh.target)


def stop_notice(after: str) -> Callable[[int, bool], None]:
    """The line a campaign prints on the first SIGINT or SIGTERM: the step in progress is
    abandoned, then `after`."""

    def notice(signum: int, first: bool) -> None:
        if first:
            name = signal.Signals(signum).name
            sys.stderr.write(f"{PROG}: {name}: stopping; the step in progress is abandoned, "
                             f"{after}\n")
            sys.stderr.flush()

    return notice


def run_campaign(sweep: Sweep, notice: Callable[[int, bool], None]) -> Any:
    """Run `sweep`: the first SIGINT or SIGTERM abandons the step in progress and ends the
    campaign as interrupted; a second SIGINT stops at once."""
    with stop_on_signals(sweep.stop, notice=notice):
        return sweep.run()


def interrupted_status(sweep: Sweep, campaign: Any) -> int | None:
    """130 or 143 (the shell's 128+signal) for a campaign a signal interrupted, else None."""
    if campaign.manifest.status == "interrupted":
        return 143 if sweep.signal == signal.SIGTERM else 130
    return None


def print_text_report(campaign: Any) -> None:
    """The campaign's text report on stdout (report.txt's content)."""
    from ..report import render_text

    try:
        text = render_text(campaign.manifest)
    except Exception as exc:  # noqa: BLE001 - the campaign is safe on disk whatever this does
        note(f"text report not rendered: {type(exc).__name__}: {exc}".splitlines()[0])
        return
    if text:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()


def campaign_summary(campaign: Any) -> str:
    """``campaign DIR: STATUS, N steps (STOP REASON)``, the start of the last line."""
    manifest = campaign.manifest
    steps = len(manifest.steps)
    summary = f"campaign {campaign.directory}: {manifest.status}, {steps} step" + (
        "s" if steps != 1 else "")
    if manifest.stop_reason:
        summary += f" ({manifest.stop_reason})"
    return summary
