"""The human and JSON renderers, and atomic output files (no C core)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.fakecore import core_result, core_worker, spread
from support.files import assert_failed_rename_keeps_the_old_file

import nhbench
from nhbench import Options, Result
from nhbench._format import format_seconds
from nhbench.outputs import render, render_human, render_json, write_atomic

URI = "http://127.0.0.1:8080/"


def make(options: Options | None = None, workers: int = 1, **kwargs) -> Result:
    options = options or Options(uri=URI, rps=1000)
    counters = kwargs.pop("counters", None)
    extra = kwargs.pop("extra_histograms", None)
    worker_dicts = [core_worker(spread(2000, seed=i), counters=counters, extra_histograms=extra)
                    for i in range(workers)]
    return Result.from_core(core_result(worker_dicts, **kwargs), options)


def test_human_puts_the_headline_first() -> None:
    text = render_human(make())
    assert "LATENCY (headline)" in text
    assert "coordinated-omission corrected" in text
    headline = text.index("benchmark_http_client.scheduled_to_response")
    assert headline < text.index("benchmark_http_client.request_to_response")
    assert headline < text.index("benchmark_http_client.queue_to_connect")
    assert text.index("LATENCY (headline)") < headline


def test_human_percentile_rows_are_exact_points() -> None:
    text = render_human(make())
    block = text[text.index("scheduled_to_response"):text.index("request_to_response")]
    rows = [line.split()[0] for line in block.splitlines()
            if line.startswith("  0") or line.startswith("  1")]
    assert rows == ["0", "0.5", "0.75", "0.9", "0.99", "0.999", "0.9999", "1"]
    assert "0.990625" not in text


def test_human_counters_rates_and_verdict() -> None:
    text = render_human(make())
    assert "Counter" in text and "Per second" in text
    assert "benchmark.http_2xx" in text
    assert "benchmark.http_5xx" not in text  # zero counters are not listed
    assert "Requested rate: 1,000.00 rps (1000 per worker x 1 worker)" in text
    assert "Achieved rate:  400.00 rps" in text  # 2000 responses in 5 s
    assert "OK: no failure predicate fired." in text
    assert "DROPPED" not in text
    assert "Results are skewed" not in text  # no blocking, no section


def test_human_blocking_warning() -> None:
    text = render_human(make(extra_histograms={"sequencer.blocking": [10_000, 20_000]}))
    assert "sequencer.blocking: Blocking. Results are skewed when significant numbers are " \
           "reported here." in text


def test_human_loud_overflow_warning() -> None:
    options = Options(uri=URI, rps=1000, open_loop=True)
    text = render_human(make(options, counters={"benchmark.pool_overflow": 42}))
    assert "WARNING: 42 requests were DROPPED (benchmark.pool_overflow) in open loop" in text
    assert "NOT in any latency figure" in text


def test_human_failure_error_interrupt() -> None:
    result = make(
        counters={"benchmark.http_5xx": 3, "benchmark.pool_connection_failure": 1},
        terminated_by="stop",
        failed_predicates=["benchmark.http_5xx", "benchmark.pool_connection_failure"],
        error="connect to 127.0.0.1:1: connection refused",
    )
    text = render_human(result)
    assert ("FAILED: failure predicate fired: benchmark.http_5xx = 3 > 0; "
            "benchmark.pool_connection_failure = 1 > 0") in text
    assert "First error: connect to 127.0.0.1:1: connection refused" in text
    assert "Interrupted: stopped after 5.000s; this is a partial result." in text


def test_human_without_responses() -> None:
    options = Options(uri=URI)
    result = Result.from_core(core_result([core_worker([])], terminated_by="error",
                                          error="connection refused"), options)
    text = render_human(result)
    assert "LATENCY (headline): no responses were received." in text
    assert "FAILED: the run ended with an error." in text


def test_human_with_workers_and_max_rate() -> None:
    options = Options(uri=URI, rps=0, concurrency=2, connections=4)
    text = render_human(make(options, workers=2))
    assert "worker_0" in text and "worker_1" in text
    assert "Requested rate: max (as fast as 4 connections per worker allow)" in text


def test_json_render() -> None:
    result = make(workers=2)
    text = render_json(result)
    assert text.endswith("\n")
    data = json.loads(text)
    assert [r["name"] for r in data["results"]] == ["worker_0", "worker_1", "global"]
    assert Result.model_validate_json(text).counters["benchmark.http_2xx"] == 4000


def test_render_dispatch() -> None:
    result = make()
    assert render(result, "json").startswith("{")
    assert result.render() == render_human(result)
    with pytest.raises(ValueError, match="output_format"):
        render(result, "xml")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (1e-7, "100ns"), (0.000148223, "148.223us"), (0.002262, "2.262ms"),
     (5, "5.000s")],
)
def test_format_seconds(seconds: float, text: str) -> None:
    assert format_seconds(seconds) == text


def test_write_atomic(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    write_atomic(target, "first\n")
    write_atomic(target, "second\n")
    assert target.read_text() == "second\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask


def test_write_atomic_leaves_nothing_partial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old\n")
    assert_failed_rename_keeps_the_old_file(write_atomic, target, monkeypatch)


def test_public_api() -> None:
    for name in nhbench.__all__:
        assert hasattr(nhbench, name), name
    assert issubclass(nhbench.ResolveError, nhbench.RunError)
    assert issubclass(nhbench.OptionsError, ValueError)
    assert issubclass(nhbench.CoreUnavailableError, ImportError)


@pytest.mark.parametrize(
    ("options", "line"),
    [
        ({"uri": "https://127.0.0.1:1/", "protocol": "http3"}, "  HTTP/3 over QUIC"),
        ({"uri": "https://127.0.0.1:1/"}, "  HTTP/1.1 over TLS"),
        ({"uri": "http://127.0.0.1:1/", "protocol": "http2"}, "  HTTP/2 over cleartext, "),
    ],
)
def test_human_and_nighthawk_json_name_the_protocol(options: dict[str, object], line: str
                                                    ) -> None:
    # An HTTP/3 run was reported as "HTTP/1.1 over TLS" and written as Nighthawk's HTTP1.
    result = Result(options=Options(**options), results=[nhbench.WorkerResult(name="global")])
    assert any(row.startswith(line) for row in render_human(result).splitlines())
    document = json.loads(render_json(result))
    assert document["options"]["protocol"] == {"value": options.get("protocol", "http1").upper()}
    assert Result.model_validate(document).options.protocol == options.get("protocol", "http1")
