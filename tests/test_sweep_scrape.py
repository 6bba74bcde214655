"""A sweep with ``--scrape``: the target's own request counter, scraped before and after
each step, is a column whose delta equals the requests the step sent; a scrape that fails
is an unknown cell with its reason, and ends the campaign only under --scrape-required.

The target is nhbench's test server (in-process, so its counters are exact at any moment);
its `requests` counter (responses written, docs/server.md) is exported by a
prometheus-client exporter started here, which reads `TestServer.stats()` at each scrape.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client")

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

import nhbench
from nhbench._exceptions import RunError
from nhbench.campaign import load_manifest
from nhbench.sweep import run_sweep
from tests.support.cli import nhbench_cli
from tests.support.sockets import reserved_port

SERVER_CPU = max(os.sched_getaffinity(0))
CLIENT_CPU = min(os.sched_getaffinity(0))
QUICK = {"duration": "0.5s", "cpus": str(CLIENT_CPU), "captures": False, "facts": False}


class _ServerStats:
    """A collector: the test server's counters at the moment of each scrape."""

    def __init__(self, server: nhbench.TestServer) -> None:
        self.server = server

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        stats = self.server.stats()
        requests = CounterMetricFamily("testserver_requests", "responses written",
                                       labels=["status"])
        for status, count in sorted(stats["status"].items()):
            requests.add_metric([status], count)
        yield requests
        yield GaugeMetricFamily("testserver_connections_open", "HTTP connections open now",
                                value=stats["connections_active"])


@pytest.fixture
def target() -> Iterator[tuple[nhbench.TestServer, str]]:
    with nhbench.TestServer(cpus=[SERVER_CPU]) as server:
        registry = CollectorRegistry()
        registry.register(_ServerStats(server))
        exporter, _thread = start_http_server(0, "127.0.0.1", registry)
        try:
            yield server, f"http://127.0.0.1:{exporter.server_address[1]}/metrics"
        finally:
            exporter.shutdown()
            exporter.server_close()


def test_step_columns_are_the_requests_each_step_sent(
        target: tuple[nhbench.TestServer, str], tmp_path: Path) -> None:
    server, metrics = target
    out = tmp_path / "c"
    campaign = run_sweep(server.url, out=out, steps="40,80", connections=2,
                         scrape=[f"ingress={metrics}"],
                         scrape_metric=['testserver_requests_total{status="200"}',
                                        "testserver_connections_*"], **QUICK)
    assert campaign.manifest.status == "completed"
    steps = campaign.steps
    assert len(steps) == 2
    deltas = []
    for step in steps:
        [record] = step.scrape
        assert record.name == "ingress" and record.format == "prometheus" and not record.errors
        series = {s.series: s for s in record.series}
        requests = series['testserver_requests_total{status="200"}']
        assert requests.mode == "delta"
        # Every request the step sent was answered and counted by the server before the
        # scrape after the step (a response counts before it is written).
        assert requests.value == step.requests == step.http_2xx > 0
        deltas.append(requests.value)
        gauge = series["testserver_connections_open"]
        assert gauge.mode == "value" and gauge.value is not None
        # The pages themselves are kept in the step directory.
        for name in (record.before_file, record.after_file):
            assert name is not None and (out / step.directory / name).is_file()
    assert sum(deltas) == server.stats()["requests"]
    # The second step offered twice the first's rate: its delta is about twice as large.
    assert 1.4 < deltas[1] / deltas[0] < 2.6

    # The column is in every table: results.csv, report.txt, report.html.
    with (out / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    column = 'scrape:ingress:testserver_requests_total{status="200"}'
    assert [float(row[column]) for row in rows] == deltas
    text = (out / "report.txt").read_text()
    assert 'Δ testserver_requests_total{status="200"}' in text
    assert "testserver_connections_open" in text
    html = (out / "report.html").read_text()
    assert "Δ testserver_requests_total{status=&#34;200&#34;}" in html
    assert "ingress metrics after" in html
    # And the campaign reads back with them.
    manifest = load_manifest(out)
    assert manifest.steps[1].scrape[0].series[0].value == deltas[1]


def test_a_scrape_that_fails_is_unknown_and_the_sweep_goes_on(
        target: tuple[nhbench.TestServer, str], tmp_path: Path) -> None:
    server, _metrics = target
    with reserved_port() as port:
        campaign = run_sweep(server.url, out=tmp_path / "c", steps="20", connections=1,
                             scrape=[f"http://127.0.0.1:{port}/metrics"],
                             scrape_metric=["anything"], scrape_timeout="1s", **QUICK)
    assert campaign.manifest.status == "completed"
    [step] = campaign.steps
    [record] = step.scrape
    assert set(record.errors) == {"before", "after"}
    assert record.errors["after"].startswith("cannot connect")
    text = (tmp_path / "c" / "report.txt").read_text()
    assert "No. 1 target after the step: unknown (cannot connect" in text


def test_scrape_required_fails_the_campaign_after_recording_the_step(
        tmp_path: Path) -> None:
    with nhbench.TestServer(cpus=[SERVER_CPU]) as server:
        registry = CollectorRegistry()
        registry.register(_ServerStats(server))
        exporter, _thread = start_http_server(0, "127.0.0.1", registry)
        metrics = f"http://127.0.0.1:{exporter.server_address[1]}/metrics"

        def stop_exporter(step: object) -> None:
            # The endpoint goes away after the first step: the second one's scrapes fail.
            if exporter.socket.fileno() != -1:
                exporter.shutdown()
                exporter.server_close()

        with pytest.raises(RunError, match="--scrape-required: step 2: scrape target before"):
            run_sweep(server.url, out=tmp_path / "c", steps="20,40,60", connections=1,
                      scrape=[metrics], scrape_metric=["testserver_requests_total"],
                      scrape_required=True, scrape_timeout="1s", on_step=stop_exporter,
                      **QUICK)
    manifest = load_manifest(tmp_path / "c")
    assert manifest.status == "failed" and "--scrape-required" in (manifest.stop_reason or "")
    # Both steps are recorded: the second one's own numbers are sound.
    assert len(manifest.steps) == 2
    assert manifest.steps[0].scrape[0].series[0].value == manifest.steps[0].requests
    assert set(manifest.steps[1].scrape[0].errors) == {"before", "after"}


def test_scrape_options_are_refused_by_name(tmp_path: Path) -> None:
    for args, message in (
        (["--scrape-metric", "a"], "--scrape-metric: only meaningful with --scrape URL"),
        (["--scrape", "localhost:9901/stats"], "--scrape 'localhost:9901/stats': not an http"),
        (["--scrape", "http://h/m", "--scrape-metric", "a{b=1}"], "--scrape-metric 'a{b=1}'"),
        (["--scrape", "http://h/m", "--scrape-timeout", "0"], "--scrape-timeout"),
    ):
        done = nhbench_cli("sweep", "http://127.0.0.1:1/", "--rps", "10",
                           "--out", str(tmp_path / "never"), *args)
        assert done.returncode == 2, (args, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], (args, done.stderr)
        assert not (tmp_path / "never").exists()


def test_cli_sweep_reads_envoy_stats_text(tmp_path: Path) -> None:
    """The command line end to end, against Envoy's /stats text as its documentation prints
    it (tests/data/envoy), served by a separate process: a static page, so the counter's
    delta is 0 and the quantile's value is the page's."""
    import subprocess
    import sys
    import time

    from tests.support.sockets import free_port, listening

    port = free_port()
    data = Path(__file__).parent / "data" / "envoy"
    page = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind",
                             "127.0.0.1", "--directory", str(data)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not listening(port):
            assert time.monotonic() < deadline and page.poll() is None
            time.sleep(0.1)
        done = nhbench_cli(
            "sweep", "embedded", "--rps", "20", "--duration", "0.5s", "--cpus", str(CLIENT_CPU),
            "--no-mpstat", "--out", str(tmp_path / "c"),
            "--scrape", f"envoy=http://127.0.0.1:{port}/stats-quick-start.txt",
            "--scrape-metric", "http.ingress_http.downstream_rq_total",
            "--scrape-metric", 'http.ingress_http.downstream_rq_time{quantile="0.99"}')
    finally:
        page.terminate()
        page.wait(timeout=10)
    assert done.returncode == 0, done.stderr
    assert "scrape envoy: 88 series (envoy)" in done.stderr
    header = next(line for line in done.stdout.splitlines() if line.startswith("No."))
    assert "Δ http.ingress_http.downstream_rq_total" in header
    assert 'http.ingress_http.downstream_rq_time{quantile="0.99"}' in header
    row = next(line for line in done.stdout.splitlines() if line.lstrip().startswith("1 "))
    assert row.split()[-4:-2] == ["0", "16.97"], row


def test_scrape_is_refused_by_name_without_prometheus_client(tmp_path: Path) -> None:
    import subprocess
    import sys

    # prometheus-client made unimportable in a fresh interpreter, as when the extra is not
    # installed.
    code = ("import sys; sys.modules['prometheus_client'] = None\n"
            "from nhbench.cli import main\n"
            f"sys.exit(main(['sweep', 'http://127.0.0.1:1/', '--rps', '10', '--out', "
            f"{str(tmp_path / 'never')!r}, '--scrape', 'http://127.0.0.1:1/metrics']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == ("nhbench: error: --scrape needs prometheus-client: "
                                   "pip install 'nhbench[prometheus]'")
    assert not (tmp_path / "never").exists()
