"""``nhbench calibrate``: measure this host and say how far a measurement here can be trusted
(`nhbench._calibrate`, docs/trust.md "Calibrating the host").

Exit status: 0 measured; 2 invalid input (one line, nothing measured); 1 the measurement
failed (the floor client broke, the core refused a timer).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._common import die, note

if TYPE_CHECKING:
    from ._commands import Command, Subparsers

__all__ = ["add_parser", "format_human", "run"]


def add_parser(commands: Subparsers, command: Command) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        command.name,
        help=command.help,
        description="Measure this host: timer wake-up lateness for each idle strategy "
        "(poll, spin, sleep; p50/p99/max), the clock source and the cost of a clock read and "
        "of a system call, the loopback request floor (the floor client of benchmarks/floor/ "
        "against the test server), CPU frequency scaling, steal time, CPU count and load; "
        "then the smallest latency difference runs of 1 s to 5 min can resolve here. "
        "'nhbench sweep/adapt --calibrate' (or --calibration FILE) stores it in the "
        "campaign's machine facts. See docs/trust.md.",
        allow_abbrev=False,
    )
    parser.add_argument("--duration", metavar="SECONDS", default="8",
                        help="How long to measure, in seconds (default 8; a quarter each for "
                        "the three idle strategies and the floor).")
    parser.add_argument("--output", metavar="FORMAT", default="human",
                        help="human (default) or json (the shape --calibration reads).")
    parser.add_argument("--rate", metavar="RPS",
                        help="Samples per second of the runs the resolution is for (default: "
                        "the floor's rate on one connection).")
    parser.add_argument("--floor-client", metavar="PATH",
                        help="A request_floor binary (default: built from the checkout's "
                        "benchmarks/floor/).")
    parser.add_argument("--no-floor", action="store_true",
                        help="Skip the loopback request floor.")
    return parser


def _positive(text: str, flag: str, limit: float) -> float:
    try:
        value = float(text)
    except ValueError:
        die(f"{flag}: must be a number, not {text!r}", 2)
    if not math.isfinite(value) or value <= 0 or value > limit:
        die(f"{flag}: must be above 0 and at most {limit:g}, not {text!r}", 2)
    return value


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    duration = _positive(args.duration, "--duration", 3600)
    rate = None if args.rate is None else _positive(args.rate, "--rate", 1e9)
    if args.output not in ("human", "json"):
        die(f"--output: must be human or json, not {args.output!r}", 2)
    client = None
    if args.floor_client is not None:
        client = Path(args.floor_client)
        if not client.is_file():
            die(f"--floor-client: no such file: {args.floor_client!r}", 2)
    from .._calibrate import CalibrationError, calibrate

    try:
        data = calibrate(duration, rate=rate, floor=not args.no_floor, floor_client=client,
                         progress=lambda text: note(f"calibrate: {text}"))
    except (CalibrationError, RuntimeError, OSError) as exc:
        die(f"calibrate: {exc}", 1)
    if args.output == "json":
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_human(data))
    return 0


def _us(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3g} µs" if value < 1000 else f"{value / 1000:.3g} ms"


def format_human(data: dict[str, Any]) -> str:
    """The calibrate JSON as the report ``nhbench calibrate`` prints."""
    host = data["host"]
    freq = host["cpufreq"]
    load = host["load_average"]
    steal = host["steal_percent"]
    lines = [
        f"Host calibration, {data['measured_at']} ({data['duration_s']:g} s)",
        f"  CPUs {host['cpus']}, load average "
        + (" ".join(f"{x:.2f}" for x in load) if load else "not exposed")
        + ", steal " + ("not reported" if steal is None else f"{steal:.2f} %"),
        f"  clock source {host['clock_source']['current']}; clock read "
        f"{data['clock_read_ns']:.1f} ns; system call {data['syscall_ns']:.0f} ns",
        "  CPU frequency scaling: "
        + (f"governor {freq['governors']}, min {freq['min_frequency']}, "
           f"max {freq['max_frequency']}" if freq["exposed"] else freq["reason"]),
        "",
        "Timer wake-up lateness (the sequencer's idle strategies):",
        f"  {'strategy':<9}{'wake-ups':>9}{'p50':>11}{'p99':>11}{'max':>11}",
    ]
    for name, w in data["wakeups"].items():
        lines.append(f"  {name:<9}{w['count']:>9}{_us(w['p50_us']):>11}{_us(w['p99_us']):>11}"
                     f"{_us(w['max_us']):>11}")
    floor = data["floor"]
    lines.append("")
    if floor["available"]:
        lines.append(f"Loopback request floor (one connection): {_us(floor['rtt_us'])} round "
                     f"trip, {floor['rps']:.0f} requests/s, "
                     f"{floor['cpu_us_per_request']:.1f} µs client CPU a request")
    else:
        lines.append(f"Loopback request floor: not measured: {floor['reason']}")
    res = data["resolution"]
    lines.append("")
    if res["rows"]:
        lines.append(f"Smallest resolvable latency difference between two runs "
                     f"(at {res['rate']:.0f} samples/s, {res['rate_source']}; "
                     f"{res['strategy']} strategy):")
        lines.append(f"  {'run':>7}{'samples':>11}{'mean':>11}{'p50':>11}{'p99':>11}")
        for r in res["rows"]:
            lines.append(f"  {r['seconds']:>6g}s{r['samples']:>11}{_us(r['mean_us']):>11}"
                         f"{_us(r['p50_us']):>11}{_us(r['p99_us']):>11}")
        lines.append(f"  assumptions: {res['assumptions']} (docs/trust.md)")
    else:
        lines.append("Resolution: no sample rate (no floor measured; give --rate RPS)")
    return "\n".join(lines) + "\n"
