"""``nhbench run`` live statistics end to end, as subprocesses against the real test server
(docs/live.md): interval lines on a piped stderr (and none without the flag), the rich
display on a pseudo-terminal, and a real Prometheus scrape while the run goes."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import nhbench

PACKAGE_PARENT = str(Path(nhbench.__file__).resolve().parent.parent)
INTERVAL_LINE = re.compile(
    r"^\[\s*[\d.]+s\] requests ([\d,]+)  rps [\d,]+  p50 \S+  p99 \S+  max \S+  "
    r"errors [\d,]+  blocked [\d,]+$"
)
# Any C0 control character but the newline, and DEL.
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT, env.get("PYTHONPATH")]))
    env.pop("NO_COLOR", None)
    return env


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nhbench", *args], capture_output=True, text=True,
        timeout=timeout, env=_env(), stdin=subprocess.DEVNULL,
    )


def _scheduled_count(result: dict) -> int:  # type: ignore[type-arg]
    stats = next(r for r in result["results"] if r["name"] == "global")["statistics"]
    stat = next(s for s in stats if s["id"] == "benchmark_http_client.scheduled_to_response")
    return int(stat["count"])


def test_interval_lines_on_a_piped_stderr(server: nhbench.TestServer) -> None:
    proc = cli("run", server.url, "--rps", "400", "--duration", "1.2s",
               "--stats-interval", "200ms", "--output-format", "json")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    matches = [INTERVAL_LINE.match(line) for line in lines]
    assert lines and all(matches), proc.stderr
    requests = sum(int(m.group(1).replace(",", "")) for m in matches if m)
    result = json.loads(proc.stdout)
    # Exact: the intervals' requests are the run's CO-corrected latency samples.
    assert requests == _scheduled_count(result) == 480
    # The timeline is in the nhbench entry of Nighthawk's JSON.
    timeline = nhbench.Result.model_validate(result).timeline
    assert sum(r.requests for r in timeline) == requests
    assert len(timeline) == len(lines)
    assert not CONTROL.search(proc.stderr)


def test_no_interval_lines_without_the_flag(server: nhbench.TestServer) -> None:
    proc = cli("run", server.url, "--rps", "200", "--duration", "0.6s",
               "--output-format", "json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert len(nhbench.Result.model_validate_json(proc.stdout).timeline) == 0


@pytest.mark.parametrize("value", ["50ms", "-1", "soon"])
def test_bad_stats_interval_is_one_line(value: str) -> None:
    proc = cli("run", "http://127.0.0.1:1/", "--stats-interval", value)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "--stats-interval" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_prometheus_listen_is_one_line() -> None:
    proc = cli("run", "http://127.0.0.1:1/", "--prometheus-listen", "nowhere")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "--prometheus-listen" in proc.stderr


def _read_pty(fd: int, proc: subprocess.Popen[bytes], timeout: float) -> bytes:
    chunks = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: the child closed its side of the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    return b"".join(chunks)


def test_rich_display_on_a_terminal_then_a_clean_report(server: nhbench.TestServer) -> None:
    leader, follower = pty.openpty()
    env = _env()
    env.update(COLUMNS="160", LINES="40", TERM="xterm-256color")
    proc = subprocess.Popen(
        [sys.executable, "-m", "nhbench", "run", server.url, "--rps", "300",
         "--duration", "2s"],
        stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, env=env,
    )
    os.close(follower)
    try:
        output = _read_pty(leader, proc, 60).decode("utf-8", "replace")
        assert proc.wait(timeout=30) == 0
    finally:
        os.close(leader)
        if proc.poll() is None:
            proc.kill()
    # The display was drawn (rich hides the cursor while it is live) ...
    assert "\x1b[?25l" in output and "remaining" in output
    # ... with one interval line per second above it (stderr is a terminal: 1 s by default).
    assert len(re.findall(r"\[\s*[\d.]+s\] requests", output)) >= 1
    # ... and gone before the report: after the cursor comes back, plain text only.
    tail = output.rsplit("\x1b[?25h", 1)[1]
    # The display's erasure (up a line, erase it) comes first; then the report, plain.
    tail = re.sub(r"^(?:\r|\x1b\[\d*A|\x1b\[2K)+", "", tail)
    assert "benchmark_http_client.scheduled_to_response" in tail
    assert "\x1b" not in tail and "remaining" not in tail


def _scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def test_prometheus_scrape_during_a_run(server: nhbench.TestServer) -> None:
    pytest.importorskip("prometheus_client")
    proc = subprocess.Popen(
        [sys.executable, "-m", "nhbench", "run", server.url, "--rps", "500", "--duration",
         "3s", "--prometheus-listen", "127.0.0.1:0", "--stats-interval", "200ms",
         "--output-format", "json"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=_env(),
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        found = re.search(r"prometheus metrics on (http://127\.0\.0\.1:\d+/metrics)", first)
        assert found, first
        url = found.group(1)
        sent = []
        latency = None
        # Poll while the run goes: the counters grow between scrapes, and the last
        # interval's latency quantiles appear once an interval has closed.
        while proc.poll() is None and len(sent) < 40:
            try:
                values = _scrape(url)
            except OSError:
                break  # the run ended and took the endpoint with it
            sent.append(values.get('nhbench_counter_total{counter="upstream_rq_total"}', 0))
            latency = values.get('nhbench_latency_seconds{quantile="0.99"}', latency)
            time.sleep(0.1)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert len(sent) >= 3 and sent[-1] > sent[0], sent
    assert sent == sorted(sent)
    assert latency is not None and latency > 0
    assert nhbench.Result.model_validate_json(out).timeline.requests == 1500


def test_import_nhbench_loads_no_display_or_exporter() -> None:
    # rich and prometheus-client are imported only when a display or an endpoint is shown.
    code = ("import sys, nhbench; "
            "print(sorted(m for m in ('rich', 'prometheus_client', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=_env(), check=True).stdout
    assert out.strip() == "[]"


def test_prometheus_port_in_use_is_one_line(server: nhbench.TestServer) -> None:
    pytest.importorskip("prometheus_client")
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = cli("run", server.url, "--duration", "0.5s", "--prometheus-listen",
                   f"127.0.0.1:{port}")
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "--prometheus-listen" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert server.stats()["requests"] == 0  # refused before any load was sent
