"""Target-side metrics (``--scrape``, docs/sweep.md "Target metrics"): the two parsers on
real pages, the selectors, the deltas, and the HTTP fetch against real endpoints.

The endpoints are real: a prometheus-client exporter started in the test
(`start_http_server`), ``nhbench run --prometheus-listen`` as a process, and Envoy's plain
/stats text as Envoy's documentation prints it (tests/data/envoy, origin in its README),
served over HTTP by a local server so that the fetch reads it as it would read Envoy.
"""

from __future__ import annotations

import http.server
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client")

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from nhbench.options import parse_metric_selector, parse_scrape_sources
from nhbench.scrape import (
    Scraper,
    ScrapeSpec,
    envoy_kind,
    fetch,
    parse_envoy_stats,
    parse_page,
)
from tests.support.sockets import reserved_port

DATA = Path(__file__).parent / "data" / "envoy"


def _by_key(samples):  # type: ignore[no-untyped-def]
    return {sample.key: sample for sample in samples}


# ---- Envoy's plain /stats --------------------------------------------------------------------


def test_envoy_quick_start_page() -> None:
    samples = _by_key(parse_envoy_stats((DATA / "stats-quick-start.txt").read_text()))
    # 68 counters and gauges, and two histograms of 10 quantiles each.
    assert len(samples) == 68 + 2 * 10
    total = samples["http.ingress_http.downstream_rq_total"]
    assert (total.value, total.kind, total.mode) == (3, "counter", "delta")
    assert samples["http.ingress_http.downstream_cx_tx_bytes_total"].value == 1117
    for gauge in ("downstream_cx_active", "downstream_rq_active", "downstream_cx_rx_bytes_buffered",
                  "downstream_cx_http1_active"):
        sample = samples[f"http.ingress_http.{gauge}"]
        assert (sample.kind, sample.mode) == ("gauge", "value"), gauge
    p999 = samples['http.ingress_http.downstream_rq_time{quantile="0.999"}']
    assert (p999.value, p999.mode, p999.family) == (16.997, "value",
                                                    "http.ingress_http.downstream_rq_time")
    assert samples['http.ingress_http.downstream_cx_length_ms{quantile="1"}'].value == 18.0
    assert samples['http.ingress_http.downstream_cx_length_ms{quantile="0"}'].value == 2.0


def test_envoy_detailed_and_bucket_pages() -> None:
    detailed = _by_key(parse_envoy_stats((DATA / "stats-detailed.txt").read_text()))
    assert sorted(detailed) == sorted(
        f'http.admin.downstream_rq_time{{quantile="{q}"}}'
        for q in ("0", "0.25", "0.5", "0.75", "0.9", "0.95", "0.99", "0.995", "0.999", "1"))
    assert detailed['http.admin.downstream_rq_time{quantile="0.5"}'].value == 1.068
    text = (DATA / "stats-buckets.txt").read_text()
    cumulative = _by_key(parse_envoy_stats(text))
    bucket = cumulative['other_example_histogram_bucket{le="5000"}']
    assert (bucket.value, bucket.mode, bucket.family) == (300, "delta", "other_example_histogram")
    assert cumulative['other_example_histogram_bucket{le="0.5"}'].value == 0
    # Read as disjoint buckets, the same counts are summed into cumulative ones.
    disjoint = _by_key(parse_envoy_stats(text, buckets="disjoint"))
    assert disjoint['other_example_histogram_bucket{le="5000"}'].value == 400
    assert disjoint['other_example_histogram_bucket{le="3600000"}'].value == 100 + 300 + 6 * 600 + 600


def test_envoy_lines_that_are_not_numbers() -> None:
    samples = parse_envoy_stats('cluster.a.version_text: "v1"\nh.t: No recorded values\n'
                                "server.uptime: 12\n")
    assert [(s.key, s.kind) for s in samples] == [("server.uptime", "gauge")]
    for bad, where in (("not a stats page\n", "line 1"), ("a: 1\nb: x\n", "line 2"),
                       ("a: P50(1,2\n", "line 1"), ("  summary=P0(1,1)\n", "line 1")):
        with pytest.raises(ValueError, match=where):
            parse_envoy_stats(bad)


def test_envoy_kinds_by_name() -> None:
    assert envoy_kind("cluster.x.upstream_rq_total") == "counter"
    assert envoy_kind("cluster.x.upstream_cx_active") == "gauge"
    assert envoy_kind("cluster.x.circuit_breakers.default.rq_pending_open") == "gauge"
    assert envoy_kind("cluster.x.circuit_breakers.default.remaining_rq") == "gauge"
    assert envoy_kind("cluster.x.membership_healthy") == "gauge"
    assert envoy_kind("server.memory_allocated") == "gauge"


def test_page_format_is_detected() -> None:
    assert parse_page("a_b 1\n", "http://h/")[0] == "prometheus"
    assert parse_page("# TYPE a counter\na_total 1\n", "http://h/")[0] == "prometheus"
    assert parse_page('a{b="c: d"} 1\n', "http://h/")[0] == "prometheus"
    assert parse_page("a.b: 1\n", "http://h/stats")[0] == "envoy"
    with pytest.raises(ValueError, match="not Prometheus text"):
        parse_page("<html>hello</html>\n", "http://h/")


# ---- selectors -------------------------------------------------------------------------------


def test_selectors() -> None:
    selector = parse_metric_selector('envoy_cluster_upstream_rq_*{envoy_cluster_name="web"}')
    assert selector.matches("envoy_cluster_upstream_rq_total", "envoy_cluster_upstream_rq",
                            {"envoy_cluster_name": "web", "x": "y"})
    assert not selector.matches("envoy_cluster_upstream_rq_total", "envoy_cluster_upstream_rq",
                                {"envoy_cluster_name": "api"})
    assert not selector.matches("envoy_cluster_upstream_cx_total", "envoy_cluster_upstream_cx",
                                {"envoy_cluster_name": "web"})
    # A family name selects its histogram's series.
    assert parse_metric_selector("rq_time").matches("rq_time_bucket", "rq_time", {"le": "1"})
    assert parse_metric_selector(r'a{b="x\"y"}').labels == (("b", 'x"y'),)
    for bad in ("", "a b", "a{b=1}", 'a{b="1"', 'a{b="1",b="2"}', 'a{b="\\q"}', 'a{b="1" c="2"}'):
        with pytest.raises(ValueError):
            parse_metric_selector(bad)


def test_sources() -> None:
    assert parse_scrape_sources(["http://h:9901/stats?format=prometheus"]) == {
        "target": "http://h:9901/stats?format=prometheus"}
    assert parse_scrape_sources(["http://a/m", "mesh=http://b/m", "http://c/m"]) == {
        "target1": "http://a/m", "mesh": "http://b/m", "target2": "http://c/m"}
    assert parse_scrape_sources({"ingress": "https://i/stats"}) == {"ingress": "https://i/stats"}
    for bad in (["h:9901/stats"], ["ftp://h/x"], ["a=http://x/", "a=http://y/"], ["http://h:x/"]):
        with pytest.raises(ValueError):
            parse_scrape_sources(bad)


# ---- real endpoints --------------------------------------------------------------------------


@pytest.fixture
def exporter() -> Iterator[tuple[str, CollectorRegistry]]:
    registry = CollectorRegistry()
    server, thread = start_http_server(0, "127.0.0.1", registry)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics", registry
    finally:
        server.shutdown()
        server.server_close()


def test_deltas_and_values_from_a_prometheus_client_exporter(
        exporter: tuple[str, CollectorRegistry], tmp_path: Path) -> None:
    url, registry = exporter
    requests = Counter("app_requests", "requests", ["route"], registry=registry)
    inflight = Gauge("app_inflight", "in flight", registry=registry)
    latency = Histogram("app_latency_seconds", "latency", buckets=(0.1, 1.0), registry=registry)
    requests.labels("/a").inc(5)
    inflight.set(7)
    scraper = Scraper(ScrapeSpec({"app": url}, (
        parse_metric_selector('app_requests_total{route="/a"}'),
        parse_metric_selector("app_requests_total"),  # the same series: one column
        parse_metric_selector("app_inflight"),
        parse_metric_selector("app_latency_seconds"),
        parse_metric_selector("app_nothing_*"),
    ), timeout=5))
    before = scraper.take()
    requests.labels("/a").inc(12)
    requests.labels("/b").inc(3)  # appears during the step: counted from zero
    inflight.set(2)
    for value in (0.05, 0.5, 0.5, 2.0):
        latency.observe(value)
    after = scraper.take()
    files = {"before": scraper.save(before, tmp_path, "before"),
             "after": scraper.save(after, tmp_path, "after")}
    [record] = scraper.compare(before, after, files)
    assert record.format == "prometheus" and not record.errors
    values = {series.series: (series.mode, series.value) for series in record.series}
    assert values['app_requests_total{route="/a"}'] == ("delta", 12)
    assert values['app_requests_total{route="/b"}'] == ("delta", 3)
    assert values["app_inflight"] == ("value", 2)
    assert values['app_latency_seconds_bucket{le="1.0"}'] == ("delta", 3)
    assert values['app_latency_seconds_bucket{le="+Inf"}'] == ("delta", 4)
    assert values["app_latency_seconds_count"] == ("delta", 4)
    assert values["app_latency_seconds_sum"][1] == pytest.approx(3.05)
    assert record.unmatched == ["app_nothing_*"]
    # The whole pages are kept, as received.
    assert record.after_file == "scrape/app.after.txt"
    kept = (tmp_path / record.after_file).read_text()
    assert 'app_requests_total{route="/b"} 3.0' in kept and "app_inflight 2.0" in kept


def test_a_counter_that_goes_down_is_unknown(exporter: tuple[str, CollectorRegistry]) -> None:
    url, registry = exporter
    gauge = Gauge("restarts_total_like", "x", registry=registry)
    scraper = Scraper(ScrapeSpec({"t": url}, (parse_metric_selector("*"),), timeout=5))
    counter = Counter("c", "c", registry=registry)
    counter.inc(10)
    before = scraper.take()
    registry.unregister(counter)
    Counter("c", "c", registry=registry).inc(4)  # the target restarted
    gauge.set(1)
    [record] = scraper.compare(before, scraper.take())
    [series] = [s for s in record.series if s.series == "c_total"]
    assert series.value is None and series.unknown is not None
    assert "went down from 10 to 4" in series.unknown


class _Page(http.server.BaseHTTPRequestHandler):
    body = b""
    status = 200
    delay = 0.0

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        time.sleep(self.delay)
        self.send_response(self.status)
        self.send_header("Content-Type", "text/plain; charset=UTF-8")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        try:
            self.wfile.write(self.body)
        except BrokenPipeError:
            pass  # the scraper gave up first (the timeout test)

    def log_message(self, *args: object) -> None:
        pass


def _serve(**attributes: object) -> Iterator[str]:
    handler = type("Page", (_Page,), attributes)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/stats"
    finally:
        server.shutdown()
        server.server_close()


def test_envoy_page_over_http() -> None:
    body = (DATA / "stats-quick-start.txt").read_bytes()
    for url in _serve(body=body):
        scraper = Scraper(ScrapeSpec({"envoy": url}, (
            parse_metric_selector("http.ingress_http.downstream_rq_[245]xx"),
            parse_metric_selector("http.ingress_http.downstream_rq_active"),
            parse_metric_selector('http.ingress_http.downstream_rq_time{quantile="0.99"}'),
        ), timeout=5))
        snapshot = scraper.take()
        [record] = scraper.compare(snapshot, snapshot)
    assert record.format == "envoy" and not record.errors
    values = {s.series: (s.kind, s.mode, s.value) for s in record.series}
    assert values == {
        "http.ingress_http.downstream_rq_2xx": ("counter", "delta", 0),
        "http.ingress_http.downstream_rq_4xx": ("counter", "delta", 0),
        "http.ingress_http.downstream_rq_5xx": ("counter", "delta", 0),
        "http.ingress_http.downstream_rq_active": ("gauge", "value", 0),
        'http.ingress_http.downstream_rq_time{quantile="0.99"}': ("histogram", "value", 16.97),
    }


def test_failed_scrapes_are_reasons_not_exceptions() -> None:
    with reserved_port() as port:
        text, error = fetch(f"http://127.0.0.1:{port}/metrics", 2)
        assert text is None and error is not None and error.startswith("cannot connect")
    for url in _serve(body=b"oops", status=503):
        assert fetch(url, 2) == (None, "HTTP 503 Service Unavailable")
    for url in _serve(body=b"a_total 1\n", delay=3.0):
        started = time.monotonic()
        assert fetch(url, 0.5) == (None, "timed out after 0.5 s")
        assert time.monotonic() - started < 2.5
    for url in _serve(body=b"<html>not metrics</html>"):
        scraper = Scraper(ScrapeSpec({"t": url}, (parse_metric_selector("a"),), timeout=2))
        [record] = scraper.compare(scraper.take(), scraper.take())
        assert set(record.errors) == {"before", "after"}
        assert record.errors["after"].startswith("not Prometheus text")


def test_nhbench_run_prometheus_listen_is_scraped(tmp_path: Path) -> None:
    """Our own endpoint: `nhbench run --prometheus-listen` as a process, its counters read
    through the scraper as they grow."""
    import nhbench
    from tests.support.sockets import free_port

    port = free_port()
    with nhbench.TestServer() as server:
        process = subprocess.Popen(
            [sys.executable, "-m", "nhbench", "run", server.url, "--rps", "50",
             "--duration", "6s", "--prometheus-listen", f"127.0.0.1:{port}",
             "--output", str(tmp_path / "r.json")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}/metrics"
            deadline = time.monotonic() + 20
            while True:
                try:
                    with urllib.request.urlopen(url, timeout=1) as response:
                        response.read()
                    break
                except OSError:
                    assert time.monotonic() < deadline and process.poll() is None
                    time.sleep(0.1)
            scraper = Scraper(ScrapeSpec({"loadgen": url}, (parse_metric_selector(
                'nhbench_counter_total{counter="upstream_rq_total"}'),), timeout=5))
            before = scraper.take()
            time.sleep(1.5)
            after = scraper.take()
        finally:
            process.wait(timeout=30)
    [record] = scraper.compare(before, after)
    assert record.format == "prometheus" and not record.errors, record.errors
    [series] = record.series
    assert series.series == 'nhbench_counter_total{counter="upstream_rq_total"}'
    assert series.mode == "delta" and series.value is not None
    # 50 requests/s over about 1.5 s: a wide band, not a timing.
    assert 20 <= series.value <= 150, series
