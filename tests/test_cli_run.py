"""``nhbench run|server|demo`` end to end, as subprocesses against the real test server.

Exit statuses, partial results on SIGINT/SIGTERM, atomic --output, one-line run errors and
nothing extra on stdout when it is not a terminal. Needs the compiled extension.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import nhbench

PACKAGE_PARENT = str(Path(nhbench.__file__).resolve().parent.parent)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT, env.get("PYTHONPATH")]))
    return env


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nhbench", *args], capture_output=True, text=True,
        timeout=timeout, env=_env(), stdin=subprocess.DEVNULL,
    )


def start_cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "nhbench", *args], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=_env(), stdin=subprocess.DEVNULL,
    )


def wait_for_requests(server: nhbench.TestServer, count: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while server.stats()["requests"] < count:
        assert time.monotonic() < deadline, "the client sent nothing"
        time.sleep(0.05)


def test_json_output_file_and_success(server: nhbench.TestServer, tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    proc = cli("run", server.url, "--rps", "200", "--duration", "1", "--output-format", "json",
               "--output", str(out), "--label", "ci")
    assert proc.returncode == 0, proc.stderr
    # stdout and stderr are not terminals: no progress, no report on stdout (it went to the
    # file), nothing on stderr.
    assert proc.stdout == "" and proc.stderr == ""
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]
    result = nhbench.Result.model_validate_json(out.read_text())
    assert result.success and not result.interrupted
    assert result.counters["benchmark.http_2xx"] == server.stats()["requests"]
    assert result.options.label == ("ci",)


def test_human_report_on_stdout(server: nhbench.TestServer) -> None:
    proc = cli("run", server.url, "--rps", "100", "--duration", "0.5s")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "LATENCY (headline)" in proc.stdout
    assert "OK: no failure predicate fired." in proc.stdout


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_gives_partial_result(server: nhbench.TestServer, sig: signal.Signals) -> None:
    proc = start_cli("run", server.url, "--no-duration", "--rps", "100", "--output-format", "json")
    wait_for_requests(server, 20)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    # The run-level fields are in the nhbench entry of Nighthawk's JSON.
    result = nhbench.Result.model_validate_json(out)
    assert result.interrupted is True and result.terminated_by == "stop"
    assert "interrupted after" in err and len(err.splitlines()) == 1
    assert result.counters["benchmark.http_2xx"] >= 20


def test_second_sigint_abandons_the_drain() -> None:
    with nhbench.TestServer(static_delay="5s") as slow:
        proc = start_cli("run", slow.url, "--no-duration", "--rps", "100", "--drain-timeout", "30")
        wait_for_requests(slow, 1)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert out == "" and "Traceback" not in err


def test_failure_predicate_exit_1(server: nhbench.TestServer) -> None:
    proc = cli("run", server.url, "--rps", "200", "--duration", "5",
               "--failure-predicate", "benchmark.http_2xx:10")
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("nhbench: failure predicate fired: benchmark.http_2xx = ")
    assert lines[0].endswith(" > 10")
    assert "FAILED: failure predicate fired" in proc.stdout


def test_refused_port_exit_1(closed_port: int) -> None:
    proc = cli("run", f"http://127.0.0.1:{closed_port}/", "--duration", "5")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(
        "nhbench: failure predicate fired: benchmark.pool_connection_failure = ")
    assert "refused" in proc.stdout


def test_unresolvable_host_exit_1() -> None:
    proc = cli("run", "http://no-such-host.invalid/")
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("nhbench: error: cannot resolve host 'no-such-host.invalid'")


def test_unwritable_output_leaves_nothing(server: nhbench.TestServer, tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.mkdir()  # a directory where the file should go: the write must fail cleanly
    proc = cli("run", server.url, "--duration", "0.2", "--output", str(target))
    assert proc.returncode == 2
    assert "--output:" in proc.stderr and "is a directory" in proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_server_command() -> None:
    proc = start_cli("server", "--listen", "127.0.0.1:0", "--listen", "127.0.0.1:0",
                     "--response-body-size", "3", "--response-header", "X-Test: 1")
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline().strip() for _ in range(2)]
        assert all(line.startswith("listening on http://127.0.0.1:") for line in lines), lines
        url = lines[1].removeprefix("listening on ")
        result = nhbench.run(url, rps=50, duration=0.5)
        assert result.success
        assert result.stat("benchmark_http_client.response_body_size").max == 3
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "server stopped: " in err


def test_subprocess_test_server() -> None:
    with nhbench.TestServer(subprocess=True) as server:
        assert server.url.startswith("http://127.0.0.1:")
        result = nhbench.run(server.url, rps=100, duration=0.5)
        with pytest.raises(nhbench.ServerError):
            server.stats()
    assert server.stats()["requests"] == result.counters["upstream_rq_total"]


def test_demo() -> None:
    proc = cli("demo", "--duration", "1s", "--rps", "500")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("nhbench demo: test server on http://127.0.0.1:")
    assert "LATENCY (headline)" in proc.stdout
    assert "OK: no failure predicate fired." in proc.stdout


def test_known_names_match_the_core(server: nhbench.TestServer) -> None:
    # Python validates predicate names and orders the report with these lists; a counter or
    # statistic the core adds must be added to nhbench/_names.py too.
    from nhbench._names import COUNTERS, HISTOGRAM_IDS, STREAM_IDS, status_counter_code
    from nhbench._run import Benchmark

    benchmark = Benchmark(server.url, rps=50, duration=0.2)
    benchmark.run()
    core = benchmark._run.result()["global"]
    # Besides the fixed counters, the core lists the status codes that occurred.
    per_code = {name for name in core["counters"] if status_counter_code(name) is not None}
    assert per_code == {"benchmark.http_200"}
    assert set(core["counters"]) - per_code == set(COUNTERS)
    # The origin latency statistic exists only with --latency-response-header-name (issue
    # 13): as in Nighthawk, a run without it has no such histogram at all.
    origin = "benchmark_http_client.origin_latency_statistic"
    assert origin in HISTOGRAM_IDS
    # Likewise the tunnel's setup time exists only in a run through a proxy.
    tunnel = "benchmark_http_client.tunnel_setup"
    assert tunnel in HISTOGRAM_IDS
    # And the failed-check latency only in a run with --check (docs/checks.md).
    failed_check = "benchmark_http_client.latency_check_failed"
    assert failed_check in HISTOGRAM_IDS
    # And the streaming statistics only with --stream-stats (docs/engine.md).
    streaming = {"benchmark_http_client.time_to_first_event",
                 "benchmark_http_client.inter_event_gap", "benchmark_http_client.stream_duration"}
    assert streaming <= set(HISTOGRAM_IDS)
    # And the resolution time only with --dns-refresh connection (docs/engine.md).
    dns = "benchmark_http_client.dns"
    assert dns in HISTOGRAM_IDS
    assert set(core["histograms"]) == set(HISTOGRAM_IDS) - {origin, tunnel, failed_check,
                                                            *streaming, dns}
    events = "benchmark_http_client.events_per_response"
    assert set(core["streams"]) == set(STREAM_IDS) - {events}
