"""Bad input on the command line: exit 2, exactly one line on stderr, no traceback.

The CLI runs as a real subprocess (``python -m nhbench``), the way users run it. None of
these cases may need the compiled extension: argument errors are found before it loads.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import PEAK_RSS_MAIN

import nhbench

# Run the same nhbench the tests import (a source checkout via PYTHONPATH, or installed).
PACKAGE_PARENT = str(Path(nhbench.__file__).resolve().parent.parent)


def nhbench_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT, env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "nhbench", *args],
        capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL,
    )


URI = "http://127.0.0.1:1/"


def assert_one_line_error(proc: subprocess.CompletedProcess[str], expected: str) -> None:
    """Bad input's contract (docs/reliability.md): exit 2, nothing on stdout, one line
    ``nhbench: error: ...`` on stderr that says `expected`, never a traceback."""
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("nhbench: error: ")
    assert expected in lines[0]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), "missing command"),
        (("bogus",), "invalid choice: 'bogus'"),
        # The URI may be left out for --multi-target-endpoint, so the model says it.
        (("run",), "URI: is required"),
        (("run", URI, "--bogus-flag"), "unrecognized arguments: --bogus-flag"),
        (("run", URI, "--h3"), "--protocol: http3 runs over QUIC"),
        (("run", "tcp://127.0.0.1/"), "URI: tcp:// needs a port"),
        (("run", "udp://127.0.0.1:9/x"), "URI: udp:// takes no path or query"),
        (("run", URI, "--conn", "5"), "unrecognized arguments"),  # no abbreviations
        (("run", "not a url"), "URI: must not contain spaces"),
        (("run", "http//127.0.0.1/"), "URI: must start with http://"),
        (("run", "http://"), "URI: malformed URL: no host"),
        (("run", "http://[::1/"), "URI: malformed URL"),
        (("run", "ftp://127.0.0.1/"), "URI: unsupported scheme 'ftp://'"),
        (("run", "unix:/tmp/x.sock"), "URI: Unix domain sockets are written http://unix:/"),
        (("run", "unix:///tmp/x.sock"), "URI: Unix domain sockets are written http://unix:/"),
        (("run", "http+unix://%2Ftmp%2Fx.sock/"), "URI: Unix domain sockets are written http://unix:/"),
        (("run", "/tmp/x.sock"), "URI: Unix domain sockets are written http://unix:/"),
        (("run", "https://127.0.0.1/", "--h2c"), "--h2c: is HTTP/2 without TLS"),
        (("run", URI, "--insecure"), "--insecure: only applies to https:// URIs"),
        (("run", URI, "--protocol", "http3"),
         "--protocol: http3 runs over QUIC, whose handshake is TLS 1.3: the URI must be https://"),
        (("run", URI, "--h2c", "--protocol", "http1"), "--h2c: mutually exclusive with --protocol"),
        (("run", "https://127.0.0.1/", "--cacert", "/nonexistent.pem"),
         "--cacert: no such file or directory"),
        (("run", "https://127.0.0.1/", "--tls-session-reuse", "maybe"),
         "--tls-session-reuse: must be true or false"),
        (("run", "https://127.0.0.1/", "--tls-ciphers", "NOPE-NOTHING"),
         "--tls-ciphers: OpenSSL knows none of these ciphers"),
        (("run", URI, "--max-active-requests", "0"), "--max-active-requests: must be >= 1"),
        (("run", URI, "--rps", "-1"), "--rps: must be >= 0 and <= 1000000 (got -1)"),
        (("run", URI, "--rps", "lots"), "--rps: must be a number (got lots)"),
        (("run", URI, "--duration", "5x"), "--duration: must be a duration such as 5, 5s"),
        (("run", URI, "--duration", "0"), "--duration: must be > 0 and <= 31536000 (got 0"),
        (("run", URI, "--duration", "5", "--no-duration"),
         "--no-duration: mutually exclusive with --duration"),
        (("run", URI, "--connections", "0"), "--connections: must be >= 1 and <= 1000000"),
        (("run", URI, "--concurrency", "zero"), "--concurrency: must be 'auto' or an integer"),
        (("run", URI, "--cpus", "100000"), "--cpus: CPU 100000 does not exist (this machine"),
        (("run", URI, "--cpus", "3-1"), "--cpus: range '3-1' goes backwards"),
        (("run", URI, "--request-method", "FETCH"), "--request-method: must be one of"),
        (("run", URI, "--request-header", "X-Bad"), "--request-header: must be 'name: value'"),
        (("run", URI, "--request-header", "X: a\r\nY: b"), "--request-header: must not contain"),
        (("run", URI, "--sequencer-idle-strategy", "nap"),
         "--sequencer-idle-strategy: must be one of"),
        (("run", URI, "--failure-predicate", "benchmark.http_5xx"),
         "--failure-predicate: must be 'counter:threshold'"),
        (("run", URI, "--termination-predicate", "nope:1"),
         "--termination-predicate: unknown counter 'nope'"),
        (("run", URI, "--percentiles", "50,200"), "--percentiles: must be percentages"),
        (("run", URI, "--output-format", "xml"), "--output-format: must be one of"),
        (("run", URI, "--output", "/nonexistent-dir/x.json"),
         "--output: directory '/nonexistent-dir' does not exist"),
        (("run", URI, "--rps", "-1", "--connections", "0"), "--rps: must be >= 0"),
        (("server", "--listen", "127.0.0.1"), "--listen: must be HOST:PORT"),
        (("server", "--listen", "127.0.0.1:70000"), "--listen: port must be in 0..65535"),
        (("server", "--workers", "0"), "--workers: must be >= 1 and <= 1024"),
        (("server", "--static-delay", "soon"), "--static-delay: must be a duration"),
        (("server", "--response-body-size", "-1"), "--response-body-size: must be >= 0"),
        (("server", "--response-header", "bad"), "--response-header: must be 'name: value'"),
        (("demo", "--rps", "-5"), "--rps: must be >= 0"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], expected: str) -> None:
    assert_one_line_error(nhbench_cli(*args), expected)


def _run_measured(args: tuple[str, ...]) -> tuple[int, str, int]:
    """Run the CLI and return (exit status, stderr, peak RSS in KiB) of that one process.

    The address space is capped at 2 GiB, so a regression (a CPU range expanded into a list
    before it is checked: 24 GB for 0-999999999) fails with MemoryError instead of calling
    the OOM killer on a shared machine.
    """
    import resource
    import tempfile

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    with tempfile.TemporaryDirectory() as tmp:
        peak_file = os.path.join(tmp, "peak")
        env = dict(os.environ, NHB_PEAK_FILE=peak_file)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT,
                                                          env.get("PYTHONPATH")]))
        proc = subprocess.run([sys.executable, "-c", PEAK_RSS_MAIN, *args], capture_output=True,
                              text=True, stdin=subprocess.DEVNULL, env=env, preexec_fn=cap,
                              timeout=60, check=False)
        with open(peak_file) as f:
            peak = int(f.read())
    return proc.returncode, proc.stderr, peak


@pytest.mark.parametrize(
    "args",
    [
        ("run", URI, "--cpus", "0-999999999"),
        ("run", URI, "--cpus", "0,999999999"),
        ("server", "--cpus", "0-999999999"),
        ("sweep", URI, "--rps", "10", "--cpus", "0-999999999"),
        ("sweep", URI, "--rps", "10", "--watch-cpus", "server=0-999999999"),
        ("sweep", URI, "--rps", "10", "--perf", "--perf-cpus", "0-999999999"),
    ],
)
def test_cpu_list_beyond_the_machine_is_refused_before_it_is_expanded(
    args: tuple[str, ...],
) -> None:
    status, stderr, peak_kib = _run_measured(args)
    assert status == 2, stderr
    # The interpreter with pydantic loaded is well under 200 MiB; the expanded list alone
    # would be gigabytes.
    assert peak_kib < 200 * 1024, peak_kib
    lines = stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    flag = next(arg for arg in args if arg.endswith("cpus"))
    assert lines[0].startswith(f"nhbench: error: {flag}"), lines[0]
    assert "999999999 do not exist (this machine has CPU" in lines[0] or (
        "CPU 999999999 does not exist (this machine has CPU" in lines[0]), lines[0]


def test_version() -> None:
    proc = nhbench_cli("--version")
    assert proc.returncode == 0
    assert proc.stdout == f"nhbench {nhbench.__version__}\n"


@pytest.mark.parametrize("command", [(), ("run",), ("server",), ("demo",)])
def test_help(command: tuple[str, ...]) -> None:
    proc = nhbench_cli(*command, "--help")
    assert proc.returncode == 0 and proc.stderr == ""
    assert "usage: nhbench" in proc.stdout


def test_run_help_lists_nighthawk_flags() -> None:
    text = nhbench_cli("run", "--help").stdout
    for flag in ("--rps", "--connections", "--concurrency", "--duration", "--no-duration",
                 "--timeout", "--request-method", "--request-header", "--request-body-size",
                 "--max-pending-requests", "--max-requests-per-connection",
                 "--prefetch-connections", "--open-loop", "--sequencer-idle-strategy",
                 "--burst-size", "--failure-predicate", "--termination-predicate",
                 "--no-default-failure-predicates", "--output-format", "--label", "--cpus",
                 "--request-timeout", "--percentiles", "--output", "--drain-timeout"):
        assert flag in text, flag


def test_module_cli_entry_point() -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT, env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-m", "nhbench.cli", "--version"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("nhbench ")


def _subcommands() -> list[str]:
    import argparse

    from nhbench.cli import build_parser
    from nhbench.cli._commands import COMMANDS

    parser = build_parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    # A raw command reads its own tool's grammar (tests/test_compat_*.py), not argparse's.
    raw = {command.name for command in COMMANDS if command.raw}
    return sorted(set(commands.choices) - raw)


@pytest.mark.parametrize("command", _subcommands())
def test_no_subcommand_reads_a_single_dash_word_as_help(
    command: str, capsys: pytest.CaptureFixture[str],
) -> None:
    """argparse reads "-hX..." as -h followed by the grouped flag -X, so Fortio's
    -httpbufferkb printed the help and exited 0. Every subcommand (all of build_parser's,
    so that a new one is covered) refuses such a word in one line, exit 2, nothing on
    stdout; -h alone still prints the help."""
    from nhbench.cli import main
    from nhbench.compat._native import foreign_word

    for word in ("-httpbufferkb", "-hc", "-hX", "-hk", "-httpccch", "-http-port"):
        with pytest.raises(SystemExit) as exit_:
            main([command, word, "5"])
        out, err = capsys.readouterr()
        assert exit_.value.code == 2, (word, out[:80], err)
        assert out == "", word
        # A Fortio word is refused with what it is; any other by the grammar's rule.
        expected = foreign_word(word) or (
            f"unrecognized arguments: {word} (no such flag; a single-dash flag is one whole "
            "word: no grouped switches, no abbreviation, no value attached to a short flag; "
            "only -h or --help alone prints the help)")
        assert err == f"nhbench: error: {expected}\n", err
    with pytest.raises(SystemExit) as exit_:
        main([command, "-h"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: nhbench {command}")


def test_percentiles_are_capped_before_they_are_parsed() -> None:
    """99,999 percentiles through the API took 17.7 s and 676 MB to report a 0.5 s run;
    more than 1000 are refused by name (the API has no argv length limit)."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=r"at most 1000 percentiles \(got 99999\)"):
        nhbench.Options(uri=URI, percentiles=[n / 1000 for n in range(1, 100000)])
    assert len(nhbench.Options(uri=URI, percentiles=[n / 10 for n in range(1, 1001)])
               .percentiles) == 1000
