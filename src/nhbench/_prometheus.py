"""``--prometheus-listen HOST:PORT``: a scrape endpoint serving a run's live numbers.

`PrometheusEndpoint` serves ``http://HOST:PORT/metrics`` (prometheus-client's HTTP server, a
daemon thread, its own registry) while the run goes. It keeps the latest `Progress` snapshot
and the latest closed interval and renders them at each scrape, so a scrape costs the run
nothing. Metric names (docs/live.md):

* ``nhbench_counter_total{counter="benchmark.http_2xx"}`` (counter): every core counter, as
  summed over the workers about every 10 ms.
* ``nhbench_errors_total`` (counter): errors by the one definition (`nhbench._names`).
* ``nhbench_check_total{check="body_ok",result="pass"|"fail"}`` (counter): the responses
  each response check (``--check``, a request source's own) passed and failed, as summed
  over the workers about every 10 ms (also in ``nhbench_counter_total`` as
  ``check.NAME.pass|fail``); a pass share is
  ``nhbench_check_total{result="pass"} / ignoring(result) sum without(result)(...)``.
* ``nhbench_elapsed_seconds`` (gauge): seconds since the first scheduled release.
* ``nhbench_latency_seconds{quantile="0.5"|"0.9"|"0.99"|"1"}`` (gauge): the last closed
  interval's coordinated-omission-corrected latency (``scheduled_to_response``); absent
  until an interval with a response has closed.
* ``nhbench_interval_requests``, ``nhbench_interval_rps``, ``nhbench_interval_errors``,
  ``nhbench_interval_blocked``, ``nhbench_interval_duration_seconds`` (gauges): the same
  interval's numbers.
* ``nhbench_intervals_total`` (counter): intervals closed so far.

prometheus-client is the optional ``prometheus`` extra; it is imported only here.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from typing import Any

from ._exceptions import NHBenchError
from ._progress import Progress
from ._timeline import IntervalRecord

__all__ = ["PrometheusEndpoint"]

_QUANTILES = (("0.5", "p50"), ("0.9", "p90"), ("0.99", "p99"), ("1", "max"))
# check.NAME.pass / check.NAME.fail, the response checks' counters (nhbench._names).
_CHECK_COUNTER = re.compile(r"check\.([A-Za-z0-9_-]{1,64})\.(pass|fail)")


class PrometheusEndpoint:
    """The scrape endpoint of one run. ``start()`` binds and returns ``(host, port)``."""

    def __init__(self, host: str, port: int) -> None:
        try:
            import prometheus_client  # noqa: F401
        except ImportError:
            # Not installed: one line, exit status 1 (like a missing compiled extension).
            raise NHBenchError(
                "--prometheus-listen needs prometheus-client: pip install 'nhbench[prometheus]'"
            ) from None
        self._host = host
        self._port = port
        self._lock = threading.Lock()
        self._progress: Progress | None = None
        self._interval: IntervalRecord | None = None
        self._intervals = 0
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> tuple[str, int]:
        """Bind and serve; OSError when the address cannot be bound."""
        from prometheus_client import CollectorRegistry, start_http_server

        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(self))
        self._server, self._thread = start_http_server(self._port, self._host, registry)
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    # ---- callbacks of Benchmark.run ------------------------------------------------------

    def on_progress(self, progress: Progress) -> None:
        with self._lock:
            self._progress = progress

    def on_interval(self, record: IntervalRecord) -> None:
        with self._lock:
            self._interval = record
            self._intervals += 1

    def snapshot(self) -> tuple[Progress | None, IntervalRecord | None, int]:
        with self._lock:
            return self._progress, self._interval, self._intervals


class _Collector:
    """Renders the endpoint's latest snapshot at each scrape."""

    def __init__(self, endpoint: PrometheusEndpoint) -> None:
        self._endpoint = endpoint

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        progress, interval, intervals = self._endpoint.snapshot()
        counters = CounterMetricFamily(
            "nhbench_counter", "Core counters summed over workers (nhbench counter names).",
            labels=["counter"],
        )
        errors = CounterMetricFamily(
            "nhbench_errors", "Requests that ended in an error (nhbench._names.ERROR_COUNTERS)."
        )
        elapsed = GaugeMetricFamily(
            "nhbench_elapsed_seconds", "Seconds since the first scheduled release."
        )
        if progress is not None:
            for name, value in sorted(progress.counters.items()):
                counters.add_metric([name], value)
            errors.add_metric([], progress.errors)
            elapsed.add_metric([], progress.elapsed)
        yield counters
        yield errors
        yield elapsed
        # Each response check's passes and failures, by check and result (docs/checks.md).
        checks = CounterMetricFamily(
            "nhbench_check", "Responses that passed or failed each response check.",
            labels=["check", "result"],
        )
        for name, value in sorted(progress.counters.items()) if progress is not None else ():
            m = _CHECK_COUNTER.fullmatch(name)
            if m is not None:
                checks.add_metric([m[1], m[2]], value)
        yield checks
        # Several endpoints (--resolve with several addresses, --dns-method rr|random,
        # several targets): each one's counts so far, labelled with its name.
        for name, field, text in (
            ("nhbench_endpoint_connections", "connections", "Connections started per endpoint."),
            ("nhbench_endpoint_requests", "requests", "Measured requests ended per endpoint."),
            ("nhbench_endpoint_errors", "errors", "Of those, not 2xx, per endpoint."),
        ):
            family = CounterMetricFamily(name, text, labels=["endpoint"])
            for endpoint in progress.endpoints if progress is not None else ():
                family.add_metric([endpoint.name], getattr(endpoint, field))
            yield family
        yield CounterMetricFamily(
            "nhbench_intervals", "Live-statistics intervals closed so far.", value=intervals
        )
        latency = GaugeMetricFamily(
            "nhbench_latency_seconds",
            "CO-corrected latency (scheduled_to_response) of the last closed interval.",
            labels=["quantile"],
        )
        if interval is not None:
            for quantile, field in _QUANTILES:
                value = getattr(interval, field)
                if value is not None:
                    latency.add_metric([quantile], value)
        yield latency
        for name, field, text in (
            ("nhbench_interval_requests", "requests", "Responses in the last closed interval."),
            ("nhbench_interval_rps", "rps", "Responses per second in the last closed interval."),
            ("nhbench_interval_errors", "errors", "Errors in the last closed interval."),
            ("nhbench_interval_blocked", "blocked", "Blocked releases in the last interval."),
            ("nhbench_interval_duration_seconds", "duration", "Length of the last interval."),
        ):
            gauge = GaugeMetricFamily(name, text)
            if interval is not None:
                gauge.add_metric([], float(getattr(interval, field)))
            yield gauge
