"""Build result dicts in the exact shape ``nhbench._core.ClientRun.result()`` returns.

These tests check the conversion (core dict -> Result -> outputs), not the engine, so the
input is built by hand: histograms with the PyPI hdrh package, which has the same bucket
layout as the C core, so its non-zero ``(index, count)`` pairs are exactly what the core
returns. The contract is in docs/architecture.md ("Binding contract").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from hdrh.histogram import HdrHistogram

from nhbench._names import COUNTERS, HISTOGRAM_IDS, STREAM_IDS

UINT64_MAX = 2**64 - 1


def core_histogram(values: Iterable[int]) -> dict:
    """One entry of a WorkerResult's ``histograms`` (values in ns)."""
    values = [int(v) for v in values]
    h = HdrHistogram(1, 60_000_000_000, 3)
    for v in values:
        h.record_value(v)
    return {
        **core_stream(values),
        "counts": [(i, int(h.counts[i])) for i in range(h.counts_len) if h.counts[i]],
    }


def core_stream(values: Iterable[int]) -> dict:
    """One entry of a WorkerResult's ``streams`` (raw values, no buckets); a histogram entry
    is this plus its buckets."""
    values = [int(v) for v in values]
    return {
        "count": len(values),
        # An empty C histogram or stream keeps its min sentinel; the conversion must not
        # show it.
        "min": min(values) if values else UINT64_MAX,
        "max": max(values) if values else 0,
        "sum": float(sum(values)),
        "sumsq": float(sum(v * v for v in values)),
    }


def core_worker(
    latencies: Sequence[int],
    *,
    counters: Mapping[str, int] | None = None,
    start_ns: int = 1_700_000_000_000_000_000,
    duration_ns: int = 5_000_000_000,
    extra_histograms: Mapping[str, Sequence[int]] | None = None,
    body_size: int = 10,
    header_size: int = 110,
) -> dict:
    """A WorkerResult dict where every request got a 2xx after `latencies` ns."""
    n = len(latencies)
    values: dict[str, Sequence[int]] = {sid: [] for sid in HISTOGRAM_IDS}
    values["benchmark_http_client.scheduled_to_response"] = [v + 1_000 for v in latencies]
    values["benchmark_http_client.request_to_response"] = list(latencies)
    values["benchmark_http_client.latency_2xx"] = list(latencies)
    values["sequencer.callback"] = list(latencies)
    values["sequencer.release_lateness"] = [500 + (i % 7) * 100 for i in range(n)]
    values["benchmark_http_client.queue_to_connect"] = [20_000 + i % 13 for i in range(n)]
    values.update(extra_histograms or {})
    all_counters = {name: 0 for name in COUNTERS}
    all_counters.update(
        {
            "benchmark.http_2xx": n,
            "upstream_rq_total": n,
            "upstream_cx_total": 10,
            "upstream_cx_http1_total": 10,
            "upstream_cx_rx_bytes_total": n * (body_size + header_size),
            "upstream_cx_tx_bytes_total": n * 60,
            "sequencer.released": n,
        }
    )
    all_counters.update(counters or {})
    return {
        "execution_start_ns": start_ns,
        "execution_duration_ns": duration_ns,
        "counters": all_counters,
        "histograms": {sid: core_histogram(v) for sid, v in values.items()},
        "streams": {
            STREAM_IDS[0]: core_stream([header_size] * n),
            STREAM_IDS[1]: core_stream([body_size] * n),
        },
    }


def _merge_histograms(entries: Sequence[dict]) -> dict:
    counts: dict[int, int] = {}
    for entry in entries:
        for index, count in entry["counts"]:
            counts[index] = counts.get(index, 0) + count
    nonempty = [e for e in entries if e["count"]]
    return {
        "count": sum(e["count"] for e in entries),
        "min": min((e["min"] for e in nonempty), default=UINT64_MAX),
        "max": max((e["max"] for e in nonempty), default=0),
        "sum": sum(e["sum"] for e in entries),
        "sumsq": sum(e["sumsq"] for e in entries),
        "counts": sorted(counts.items()),
    }


def _merge_streams(entries: Sequence[dict]) -> dict:
    merged = _merge_histograms([{**e, "counts": []} for e in entries])
    del merged["counts"]
    return merged


def core_result(
    workers: Sequence[dict],
    *,
    terminated_by: str = "duration",
    failed_predicates: Sequence[str] = (),
    error: str | None = None,
) -> dict:
    """The top-level result dict, with ``global`` merged the way the C core merges."""
    ids = workers[0]["histograms"].keys()
    stream_ids = workers[0]["streams"].keys()
    merged = {
        "execution_start_ns": min(w["execution_start_ns"] for w in workers),
        # Nighthawk: the global execution duration is the mean of the workers'.
        "execution_duration_ns": sum(w["execution_duration_ns"] for w in workers) // len(workers),
        "counters": {
            name: sum(w["counters"].get(name, 0) for w in workers)
            for name in workers[0]["counters"]
        },
        "histograms": {sid: _merge_histograms([w["histograms"][sid] for w in workers])
                       for sid in ids},
        "streams": {sid: _merge_streams([w["streams"][sid] for w in workers])
                    for sid in stream_ids},
    }
    return {
        "execution_start_ns": merged["execution_start_ns"],
        "terminated_by": terminated_by,
        "failed_predicates": list(failed_predicates),
        "error": error,
        "workers": list(workers),
        "global": merged,
    }


def spread(n: int, low: int = 50_000, high: int = 5_000_000, seed: int = 1) -> list[int]:
    """n deterministic, varied latencies in ns."""
    import random

    rng = random.Random(seed)
    return [rng.randint(low, high) for _ in range(n)]
