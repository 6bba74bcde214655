"""``nhbench run -v/--verbosity LEVEL`` (Nighthawk) and ``-loglevel`` (Fortio).

What reaches stderr, observed on the real CLI (a subprocess) against the real test server:
at debug the resolved address, the core config and each worker's counters; at error
nothing but errors; the default (info) unchanged. Bad levels exit 2 with one line.
"""

from __future__ import annotations

import pytest
from test_cli_errors import nhbench_cli
from test_cli_run import cli

import nhbench
from nhbench import OptionsError
from nhbench.options import Options, make_options


def _run(server: nhbench.TestServer, *flags: str) -> tuple[int, str, str]:
    proc = cli("run", server.url, "--rps", "50", "--duration", "0.4", "--stats-interval",
               "0.1", *flags)
    return proc.returncode, proc.stdout, proc.stderr


def test_debug_prints_the_config_summary_and_worker_counters(server: nhbench.TestServer) -> None:
    code, stdout, stderr = _run(server, "--verbosity", "debug", "--concurrency", "2")
    assert code == 0, stderr
    lines = stderr.splitlines()
    assert "nhbench: resolved 127.0.0.1 to 127.0.0.1" in lines
    [config] = [line for line in lines if line.startswith("nhbench: core config: ")]
    # The summary names the core config's keys with their values, the requests by their size.
    assert "address='127.0.0.1'" in config and f"port={server.url.rsplit(':', 1)[1].rstrip('/')}" in config
    assert "rps=50.0" in config and "cpus=[" in config
    assert "specs=<1 request, " in config and " bytes>" in config
    # The full config (trace) is not printed at debug.
    assert not any("core config (full)" in line for line in lines)
    # One line per worker and the global sum, with the counters that are not zero.
    counters = [line for line in lines if " counters: " in line]
    assert len(counters) == 3, stderr
    total = server.stats()["requests"]
    [global_line] = [line for line in counters if line.startswith("nhbench: global ")]
    assert f"upstream_rq_total={total}" in global_line
    # Live lines are still there at debug, and the report is on stdout as always.
    assert any(line.startswith("[") and " requests " in line for line in lines), stderr
    assert "Latency" in stdout or "latency" in stdout


def test_trace_adds_the_full_config(server: nhbench.TestServer) -> None:
    code, _stdout, stderr = _run(server, "-v", "trace")
    assert code == 0, stderr
    [full] = [line for line in stderr.splitlines() if "core config (full): " in line]
    assert "GET / HTTP/1.1" in full


def test_error_prints_nothing_but_errors(server: nhbench.TestServer, closed_port: int) -> None:
    # A run that works: nothing at all on stderr, not even the live lines that
    # --stats-interval asks for at the default level.
    code, stdout, stderr = _run(server, "-v", "error")
    assert code == 0
    assert stderr == ""
    assert stdout  # the report is output, not a note
    # A run that fails (nothing listens): the error is still printed, and only it.
    proc = cli("run", f"http://127.0.0.1:{closed_port}/", "--rps", "20", "--duration", "0.3",
               "-v", "error")
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nhbench: failure predicate fired"), lines


def test_default_info_keeps_the_live_lines_and_hides_debug(server: nhbench.TestServer) -> None:
    code, _stdout, stderr = _run(server)
    assert code == 0, stderr
    # The interval lines --stats-interval asks for, and nothing else.
    assert stderr and all(line.startswith("[") for line in stderr.splitlines()), stderr
    assert "core config" not in stderr and "resolved" not in stderr
    code, _stdout, quiet = _run(server, "-v", "warn")
    assert code == 0 and quiet == ""


@pytest.mark.parametrize(
    ("given", "level"),
    [
        ("trace", "trace"), ("debug", "debug"), ("info", "info"), ("warn", "warn"),
        ("error", "error"), ("critical", "critical"),
        # Fortio's -loglevel names.
        ("Debug", "debug"), ("Verbose", "debug"), ("Info", "info"), ("Warning", "warn"),
        ("Error", "error"), ("Critical", "critical"), ("Fatal", "critical"),
    ],
)
def test_levels_and_fortio_names(given: str, level: str) -> None:
    assert make_options("http://127.0.0.1/", verbosity=given).verbosity == level


def test_default_level() -> None:
    assert Options(uri="http://127.0.0.1/").verbosity == "info"


def test_bad_level_is_refused() -> None:
    with pytest.raises(OptionsError, match="verbosity: must be one of trace, debug"):
        make_options("http://127.0.0.1/", verbosity="loud")


@pytest.mark.parametrize("flag", ["-v", "--verbosity", "-loglevel"])
def test_bad_level_on_the_command_line(flag: str) -> None:
    proc = nhbench_cli("run", "http://127.0.0.1:1/", flag, "loud")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "--verbosity: must be one of trace, debug, info, warn, error, critical" in proc.stderr


def test_fortio_loglevel_flag_sets_the_level(server: nhbench.TestServer) -> None:
    code, _stdout, stderr = _run(server, "-loglevel", "Warning")
    assert code == 0 and stderr == ""
