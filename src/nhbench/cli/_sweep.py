"""``nhbench sweep URL [flags]`` and ``nhbench report DIR``.

Exit status of ``nhbench sweep``:

* 0: the campaign ended as planned: every step ran, or a stop rule fired (finding where a
  rule fires is what a sweep is for; the manifest and the last progress line say which).
* 1: the sweep could not be carried out (the SSH host refused us, the target did not
  resolve, a host command failed): one line on stderr. Steps finished until then are kept
  and the manifest says ``failed``.
* 2: invalid input (a flag, a stop rule, a campaign file, an --out directory that is not
  empty, a --resume with different options): one line, and nothing was created.
* 130: stopped by SIGINT (Ctrl-C), 143: stopped by SIGTERM. The step in progress is
  abandoned, the finished ones are on disk, the manifest says ``interrupted``, and
  ``--resume DIR`` continues. These are the shell's 128+signal codes, so a script can tell
  an interrupted campaign from a finished one.

``nhbench report DIR`` re-renders report.txt, results.csv and report.html from the saved
results; 2 when DIR is not a campaign. ``nhbench report RESULT.json [-o PAGE.html]`` writes
the result browser's page of one result (`nhbench.browse`) as a self-contained file (to
stdout without -o); 2 when the file is not a result nhbench reads, 1 when the page cannot
be written.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any

from .._exceptions import CampaignError, OptionsError
from ..options import SweepOptions, add_model_flags
from . import _NOT_OPTIONS, PROG, _die, _note, add_run_options
from ._signals import stop_on_signals

__all__ = ["add_report_parser", "add_sweep_parser"]


def add_sweep_parser(commands: argparse._SubParsersAction[Any]) -> None:
    parser = commands.add_parser(
        "sweep",
        help="step the offered load and record every step in a campaign directory",
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
    # 'nhbench run' flags that make no sense in a sweep get a message that says what to do
    # instead of argparse's bare "unrecognized arguments".
    for flag in ("--output", "--output-format", "--no-duration", "--slo"):
        parser.add_argument(flag, nargs="?", help=argparse.SUPPRESS,
                            dest="redefined_" + flag[2:].replace("-", "_"))
    parser.set_defaults(func=_cmd_sweep, subparser=parser)


def add_report_parser(commands: argparse._SubParsersAction[Any]) -> None:
    parser = commands.add_parser(
        "report",
        help="re-render a campaign's reports, or write one result's HTML page",
        description="With a campaign directory: write DIR/report.txt, DIR/results.csv and "
        "DIR/report.html again from the campaign's manifest and step results, and print the "
        "text report. With a result file (nhbench, Nighthawk or Fortio JSON): write its "
        "page, the one 'nhbench browse' shows, as one self-contained HTML file.",
        argument_default=argparse.SUPPRESS,
        allow_abbrev=False,
    )
    parser.add_argument("directory", metavar="DIR|RESULT",
                        help="A campaign directory, or a result file.")
    parser.add_argument("-o", "--output", metavar="PAGE",
                        help="With a result file: write the page here (default: stdout).")
    parser.set_defaults(func=_cmd_report, subparser=parser)


_REDEFINED = {
    "redefined_output": "--output: a sweep writes every step's result into the campaign "
    "directory; use --out DIR",
    "redefined_output_format": "--output-format: a sweep writes JSON results and its own "
    "reports; see nhbench report",
    "redefined_no_duration": "--no-duration: every sweep step needs a --duration",
    "redefined_slo": "--slo: a sweep's objectives are its stop rules; use --stop-on-slo RULE "
    "(the same grammar)",
}


def _notice_sweep_stop(signum: int, first: bool) -> None:
    if first:
        name = signal.Signals(signum).name
        sys.stderr.write(f"{PROG}: {name}: stopping; the step in progress is abandoned, "
                         f"finished steps are kept (Ctrl-C again to stop at once)\n")
        sys.stderr.flush()


def _password(config: Any) -> str | None:
    ssh = config.ssh
    if ssh is None or not ssh.password_prompt:
        return None
    from ..hosts import prompt_password

    return prompt_password(ssh.target)


def _cmd_sweep(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..campaign import load_manifest
    from ..sweep import Sweep, load_scenario, overlay, prepare_sweep, settings_for_resume

    given = {k: v for k, v in vars(args).items() if k not in _NOT_OPTIONS}
    for key, message in _REDEFINED.items():
        if key in given:
            _die(message, status=2)
    argv = list(getattr(args, "argv", []))
    try:
        scenario = given.pop("scenario", None)
        settings = overlay(load_scenario(scenario) if scenario else {}, given)
        resume = settings.pop("resume", None)
        if resume is not None:
            settings = settings_for_resume(load_manifest(resume), settings)
            settings["resume"] = resume
        config = prepare_sweep(settings)
        sweep = Sweep(config, command=[PROG, *argv])
    except (OptionsError, CampaignError) as exc:
        _die(str(exc), status=2)
    # Asked only now, once everything else is known to be valid.
    sweep.use_password(_password(config))
    # The first SIGINT or SIGTERM abandons the step in progress and ends the campaign as
    # interrupted; a second SIGINT stops at once.
    with stop_on_signals(sweep.stop, notice=_notice_sweep_stop):
        campaign = sweep.run()
    manifest = campaign.manifest
    _print_summary(campaign)
    if manifest.status == "interrupted":
        return 143 if sweep.signal == signal.SIGTERM else 130
    return 0


def _print_summary(campaign: Any) -> None:
    manifest = campaign.manifest
    from ..report import render_text

    text: str | None
    try:
        text = render_text(manifest)
    except Exception as exc:  # noqa: BLE001 - the campaign is safe on disk whatever this does
        _note(f"text report not rendered: {type(exc).__name__}: {exc}".splitlines()[0])
        text = None
    if text:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
    steps = len(manifest.steps)
    summary = f"campaign {campaign.directory}: {manifest.status}, {steps} step" + (
        "s" if steps != 1 else "")
    if manifest.stop_reason:
        summary += f" ({manifest.stop_reason})"
    if manifest.highest_passing_step is not None:
        best = campaign.step(manifest.highest_passing_step)
        summary += (f"; highest passing step {best.index}: {best.rps_per_worker:g} rps per "
                    f"worker, {best.achieved_rps:.1f} achieved")
    _note(summary)


def _report_result(path: Path, output: str | None) -> int:
    """``nhbench report RESULT.json [-o PAGE]``: the result's page, self-contained."""
    from .._exceptions import ResultFileError
    from .._io import check_output_path, write_text
    from .._load import load_result
    from ..browse import result_page

    if output is not None:
        try:
            check_output_path(output)
        except ValueError as exc:
            _die(f"--output: {exc}", status=2)
    try:
        result = load_result(path)
    except ResultFileError as exc:
        _die(str(exc), status=2)
    try:
        page = result_page(result, str(path), standalone=True)
    except Exception as exc:  # noqa: BLE001 - the last resort: one line, not a traceback
        # Loading checks what the page needs (docs/reliability.md, "Result files"); the
        # page failing anyway is nhbench's fault, said in one line.
        _die(f"cannot render {path}: internal error ({type(exc).__name__}: {exc})", status=1)
    if output is None:
        sys.stdout.write(page)
        sys.stdout.flush()
        return 0
    try:
        write_text(output, page)
    except OSError as exc:
        _die(f"--output: {exc}", status=1)
    if sys.stderr.isatty():
        _note(f"wrote {output}")
    return 0


def _cmd_report(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..campaign import load_manifest

    directory = Path(args.directory)
    output = getattr(args, "output", None)
    if directory.is_file() or (os.path.lexists(directory) and not directory.is_dir()):
        # Anything at the path but a directory is a result file, refused by the reader if
        # it is not a regular one (a FIFO, a device, a symbolic-link loop).
        return _report_result(directory, output)
    if output is not None:
        _die("--output: only for a result file; a campaign's reports are written into "
             "its directory", status=2)
    try:
        manifest = load_manifest(directory)
    except CampaignError as exc:
        _die(str(exc), status=2)
    from .._io import check_output_path
    from ..report import REPORT_FILES, render_text, write_reports

    # A read-only campaign (or a directory squatting on a report's name) is refused before
    # anything is rendered; what only the write can find out (a full disk) exits 1.
    for name in REPORT_FILES:
        try:
            check_output_path(directory / name)
        except ValueError as exc:
            _die(f"cannot write the reports: {exc}", status=2)
    try:
        written = write_reports(directory, manifest)
    except OSError as exc:
        _die(str(exc), status=1)
    text = render_text(manifest)
    if text:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
    if written:
        _note("wrote " + ", ".join(str(path) for path in written))
    return 0
