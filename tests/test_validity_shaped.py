"""Shaped schedules against the process they asked for, and the trend test corrected for
autocorrelation (docs/trust.md "Validity"): the `schedule` and `arrivals` checks of stages,
explicit schedules and replays (uniform and Poisson), `trend_rate` detrended by the planned
rate, and Mann-Kendall with Hamed and Rao's variance correction checked against an
independent implementation (pymannkendall) and the chi-square tail against scipy.

The real runs go to our test server; a pool too small for the ramp (two connections, one
pending request, a server that takes 10 ms a request) is what makes the schedule slip."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy
import pymannkendall
import pytest
from scipy import stats as scipy_stats

import nhbench
from nhbench._validity import (
    IntervalCounts,
    ValidityInputs,
    WorkerLoad,
    assess,
    chi2_sf,
    mann_kendall,
    planned_offsets,
    planned_rate,
    planned_stages,
)
from tests.support.cli import nhbench_cli

# ---- Mann-Kendall with Hamed and Rao's correction, against pymannkendall ----------------


def _ar1(n: int, phi: float, seed: int, trend: float = 0.0) -> list[float]:
    rng = random.Random(seed)
    x, out = 0.0, []
    for i in range(n):
        x = phi * x + rng.gauss(0.0, 1.0)
        out.append(x + trend * i)
    return out


_SERIES: dict[str, list[float]] = {
    "ar1_strong": _ar1(60, 0.8, 1),
    "ar1_with_trend": _ar1(80, 0.6, 2, trend=0.05),
    "ar1_short": _ar1(20, 0.7, 3),
    "white": _ar1(50, 0.0, 4),
    "ties": [float(round(v)) for v in _ar1(40, 0.7, 5, trend=0.03)],
    "steps_with_ties": [float(v) for v in (1, 1, 2, 2, 2, 3, 3, 3, 3, 2, 2, 4, 4, 5, 5, 5, 4, 6,
                                          6, 6)],
    "p99_like": [0.001 * (1 + 0.3 * math.sin(i / 3)) + 0.00001 * i for i in range(100)],
}


@pytest.mark.parametrize("name", sorted(_SERIES))
def test_hamed_rao_matches_pymannkendall(name: str) -> None:
    x = _SERIES[name]
    ours = mann_kendall(x, hamed_rao=True)
    theirs = pymannkendall.hamed_rao_modification_test(x, alpha=0.05)
    plain = mann_kendall(x)
    assert ours.n_ratio > 0, "a series for the fallback test, not this one"
    assert ours.s == theirs.s == plain.s
    assert ours.var_s == pytest.approx(theirs.var_s, rel=1e-9)
    assert ours.z == pytest.approx(theirs.z, rel=1e-9, abs=1e-12)
    assert ours.p == pytest.approx(theirs.p, rel=1e-6, abs=1e-12)
    assert ours.slope == pytest.approx(theirs.slope, rel=1e-9, abs=1e-15)
    assert ours.var_s == pytest.approx(plain.var_s * ours.n_ratio)
    # The plain test is pymannkendall's original one.
    original = pymannkendall.original_test(x)
    assert plain.var_s == pytest.approx(original.var_s, rel=1e-12)
    assert plain.p == pytest.approx(original.p, rel=1e-6, abs=1e-12)


def test_hamed_rao_widens_the_variance_of_autocorrelated_series() -> None:
    # The point of the correction: a positively autocorrelated series has fewer independent
    # values than intervals, so its variance grows and its p-value with it.
    strong = mann_kendall(_SERIES["ar1_strong"], hamed_rao=True)
    assert strong.n_ratio > 1.5
    assert strong.p > mann_kendall(_SERIES["ar1_strong"]).p
    # No significant lag in a strictly rising series' detrended ranks: no change.
    assert mann_kendall([float(i) for i in range(15)], hamed_rao=True).n_ratio == 1.0


def test_hamed_rao_falls_back_to_the_plain_variance_when_the_ratio_is_not_positive() -> None:
    # Alternating values: strong negative autocorrelation at lag 1 takes n/n* below 0
    # (pymannkendall then has a negative variance and a NaN z).
    x = [0.134, 10.847, 0.764, 10.255, 0.495, 10.449, 0.652, 10.789, 0.094, 10.028, 0.836,
         10.433]
    with pytest.warns(RuntimeWarning):
        theirs = pymannkendall.hamed_rao_modification_test(x)
    assert theirs.var_s < 0
    ours = mann_kendall(x, hamed_rao=True)
    assert ours.n_ratio == 1.0 and ours.var_s == mann_kendall(x).var_s


def test_trend_p99_of_an_autocorrelated_series_without_trend_is_not_flagged() -> None:
    # An AR(1) wander (phi 0.9, no trend) of 60 intervals whose plain Mann-Kendall p is
    # 5e-4 with a 39 % fall by Sen's slope: the plain test called it a trend; with Hamed
    # and Rao's correction (n/n* = 5.5) p is 0.14.
    p99 = [0.001 * (1 + 0.1 * v) for v in _ar1(60, 0.9, 49)]
    assert mann_kendall(p99).p < 0.001
    inputs = ValidityInputs(
        workers=[], hiccup_p99=None, spin=False, requested_rps=0.0, shaped=False,
        worker_count=1, latency_p99=None, lateness_p99=None, blocked=0, released=0,
        sent_rate=0.0, interval_p99=p99, interval_rate=[])
    trend = next(c for c in assess(inputs) if c.name == "trend_p99")
    assert trend.verdict == "valid", trend.reason
    assert "Hamed-Rao n/n*=5.5" in trend.reason
    assert trend.value is not None and trend.value < -0.25


def test_the_check_never_narrows_the_plain_variance() -> None:
    # White noise with a significant negative lag by chance: Hamed and Rao's n/n* < 1 would
    # make the trend test more liberal than the plain one; the check keeps the plain one.
    x = next(v for seed in range(200) if mann_kendall(v := _ar1(40, 0.0, seed),
                                                       hamed_rao=True).n_ratio < 0.8)
    inputs = ValidityInputs(
        workers=[], hiccup_p99=None, spin=False, requested_rps=0.0, shaped=False,
        worker_count=1, latency_p99=None, lateness_p99=None, blocked=0, released=0,
        sent_rate=0.0, interval_p99=[10 + v for v in x], interval_rate=[])
    trend = next(c for c in assess(inputs) if c.name == "trend_p99")
    plain = mann_kendall([10 + v for v in x])
    assert f"p={plain.p:.2g}, Hamed-Rao n/n*=1," in trend.reason


def test_a_long_timeline_is_tested_on_the_means_of_groups_of_intervals() -> None:
    # An hour at 0.1 s intervals: 36,000 intervals, 648 million pairs for the plain test.
    # The check takes 500 means of 72 intervals; a 50 % rise along the run is still seen,
    # and white noise still is not.
    rng = random.Random(7)
    rising = [0.010 * (1 + 0.5 * i / 36_000) + rng.gauss(0, 0.002) for i in range(36_000)]
    flat = [0.010 + rng.gauss(0, 0.002) for _ in range(36_000)]
    verdicts = {}
    for name, p99 in (("rising", rising), ("flat", flat)):
        inputs = ValidityInputs(
            workers=[], hiccup_p99=None, spin=False, requested_rps=0.0, shaped=False,
            worker_count=1, latency_p99=None, lateness_p99=None, blocked=0, released=0,
            sent_rate=0.0, interval_p99=p99, interval_rate=[])
        trend = next(c for c in assess(inputs) if c.name == "trend_p99")
        assert "36000 intervals as 500 means" in trend.reason, trend.reason
        verdicts[name] = trend
    assert verdicts["rising"].verdict == "suspect", verdicts["rising"].reason
    # The change is over the median (mid-run, 1.25 x the start): 0.5 / 1.25 = 40 %.
    assert verdicts["rising"].value is not None and 0.35 < verdicts["rising"].value < 0.45
    assert verdicts["flat"].verdict == "valid", verdicts["flat"].reason


@pytest.mark.parametrize("k", [3, 5, 10, 30, 100, 500])
def test_chi2_tail_is_close_to_scipys(k: int) -> None:
    for p in (0.5, 0.1, 0.01, 0.001, 0.0001):
        x = float(scipy_stats.chi2.isf(p, k))
        assert chi2_sf(x, k) == pytest.approx(p, rel=1e-9), (k, p)
    for x in (0.1, 1.0, k / 2, k + 1.0, 3.0 * k + 40):
        assert chi2_sf(x, k) == pytest.approx(float(scipy_stats.chi2.sf(x, k)), rel=1e-9,
                                              abs=1e-300)


# ---- what the plans plan -------------------------------------------------------------


def test_planned_counts() -> None:
    # Two workers ramping 0 -> 100/s over 2 s, then 100/s for 1 s: per worker 100 + 100.
    stages = planned_stages([(2.0, 100.0), (1.0, 100.0)], workers=2)
    assert stages.total == pytest.approx(400.0)
    assert stages.cumulative(1.0) == pytest.approx(2 * 25.0)  # 100 t^2 / 4 at t = 1
    assert stages.between(2.0, 2.5) == pytest.approx(100.0)
    assert stages.cumulative(10.0) == stages.total
    assert planned_stages([(2.0, 100.0)], workers=1, end=1.0).total == pytest.approx(25.0)
    # Ramp down: 100 -> 0 over 1 s after a hold.
    down = planned_stages([(1.0, 100.0), (1.0, 0.0)], workers=1)
    assert down.between(1.0, 2.0) == pytest.approx(50.0)
    offsets = planned_offsets([0.0, 0.5, 0.5, 2.0], workers=3)
    assert offsets.total == 12
    assert offsets.between(0.0, 0.5) == 3  # a release due at a bound is in the next one
    assert offsets.between(0.5, 2.0) == 6
    assert offsets.between(2.0, 3.0) == 3
    rate = planned_rate(1000.0, 2.0, count=1500)
    assert rate.total == 1500 and rate.between(0.0, 1.0) == 1000.0


# ---- the checks on made-up counts ----------------------------------------------------------


def _inputs(planned: object, intervals: list[IntervalCounts], sent: int) -> ValidityInputs:
    return ValidityInputs(
        workers=[WorkerLoad(cpu_time=0.1, wall_time=1.0, wait_time=0.0)], hiccup_p99=None,
        spin=False, requested_rps=1000.0, shaped=True, worker_count=1, latency_p99=0.001,
        lateness_p99=None, blocked=0, released=sent, sent_rate=0.0, interval_p99=[],
        interval_rate=[], planned=planned, sent=sent, intervals=intervals)  # type: ignore[arg-type]


def _checks(inputs: ValidityInputs) -> dict[str, tuple[str, float | None]]:
    return {c.name: (c.verdict, c.value) for c in assess(inputs)}


def test_poisson_counts_pass_and_clumped_counts_do_not() -> None:
    # A Poisson ramp 0 -> 2000/s over 10 s in 0.1 s intervals, counts drawn from the
    # process (numpy's Poisson), then the same counts in clumps (pairs of intervals
    # merged into one and zero: dispersion about 2 times the count).
    plan = planned_stages([(10.0, 2000.0)], workers=1, poisson=True)
    rng = numpy.random.default_rng(7)
    bounds = [(i / 10, 0.1) for i in range(100)]
    counts = [int(rng.poisson(plan.between(s, s + d))) for s, d in bounds]
    good = [IntervalCounts(s, d, c, c) for (s, d), c in zip(bounds, counts, strict=True)]
    checks = _checks(_inputs(plan, good, sum(counts)))
    assert checks["arrivals"][0] == "valid"
    assert checks["arrivals"][1] is not None and 0.5 < checks["arrivals"][1] < 1.6
    assert checks["schedule"][0] == "valid"
    assert checks["trend_rate"][0] == "valid"  # a ramp asked for is no trend
    clumped = list(counts)
    for i in range(0, 100, 2):
        clumped[i], clumped[i + 1] = clumped[i] + clumped[i + 1], 0
    bad = [IntervalCounts(s, d, c, c) for (s, d), c in zip(bounds, clumped, strict=True)]
    assert _checks(_inputs(plan, bad, sum(counts)))["arrivals"][0] == "invalid"


def test_a_uniform_interval_short_of_its_plan_is_flagged() -> None:
    plan = planned_rate(1000.0, 2.0)
    intervals = [IntervalCounts(i / 10, 0.1, 100, 100) for i in range(20)]
    assert _checks(_inputs(plan, intervals, 2000))["arrivals"][0] == "valid"
    short = list(intervals)
    short[7] = IntervalCounts(0.7, 0.1, 85, 85)  # 15 short: 13 % beyond 1 + 0.2 x 10
    short[8] = IntervalCounts(0.8, 0.1, 115, 115)  # the catch-up burst
    assert _checks(_inputs(plan, short, 2000))["arrivals"][0] == "suspect"
    short[7] = IntervalCounts(0.7, 0.1, 50, 50)
    assert _checks(_inputs(plan, short, 1965))["arrivals"][0] == "invalid"


def test_trend_rate_of_a_shaped_run_is_its_ratio_to_the_plan() -> None:
    plan = planned_stages([(10.0, 1000.0)], workers=1)
    bounds = [(i / 10, 0.1) for i in range(100)]
    kept = [IntervalCounts(s, d, round(plan.between(s, s + d)), round(plan.between(s, s + d)))
            for s, d in bounds]
    inputs = _inputs(plan, kept, 5000)
    assert _checks(inputs)["trend_rate"][0] == "valid"
    # The raw rate of the same run rises all along: flagged if tested raw.
    raw = replace(inputs, planned=None, shaped=False, requested_rps=500.0, sent_rate=500.0,
                  interval_rate=[iv.responses / iv.duration for iv in kept])
    assert _checks(raw)["trend_rate"][0] == "invalid"
    # A server that falls behind the ramp: its share of the plan falls.
    behind = [IntervalCounts(s, d, c.released, round(c.released * (1 - 0.004 * i)))
              for i, ((s, d), c) in enumerate(zip(bounds, kept, strict=True))]
    assert _checks(_inputs(plan, behind, 5000))["trend_rate"][0] == "invalid"


# ---- real runs -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer() as test_server:
        yield test_server


@pytest.fixture(scope="module")
def slow_server() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer(static_delay="10ms") as test_server:
        yield test_server


def _verdicts(result: nhbench.Result) -> dict[str, str]:
    assert result.validity is not None
    return {c.name: c.verdict for c in result.validity.checks}


def _reasons(result: nhbench.Result) -> str:
    assert result.validity is not None
    return "\n".join(f"{c.name} {c.verdict}: {c.reason}" for c in result.validity.checks)


def _kept_run(url: str, **kw: Any) -> nhbench.Result:
    # The host is shared: a run during which the worker's own event loop stalled (the
    # hiccup meter says so) did not keep its schedule for a reason that is not under test;
    # up to three tries for a run on a quiet host.
    for _ in range(3):
        result = nhbench.run(url, **kw)
        if _verdicts(result)["hiccup"] == "valid":
            break
    return result


_RAMP: dict[str, Any] = {"stage": ["3s:600"], "stats_interval": "0.1s", "connections": 50}


def test_a_kept_ramp_is_valid_and_not_a_trend(server: nhbench.TestServer) -> None:
    result = _kept_run(server.url, **_RAMP)
    verdicts = _verdicts(result)
    why = _reasons(result)
    assert verdicts["schedule"] == "valid", why
    assert verdicts["arrivals"] == "valid", why
    assert verdicts["trend_rate"] == "valid", why
    # The raw throughput of the run rises: what the detrending takes out.
    raw = [r.rps for r in result.timeline if r.requests]
    assert mann_kendall(raw).p < 1e-6 and mann_kendall(raw).slope > 0


def test_a_ramp_the_pool_cannot_carry_is_flagged(slow_server: nhbench.TestServer) -> None:
    # Two connections on a 10 ms server carry 200 requests per second; the ramp asks for up
    # to 400. In the closed loop the releases block and fall behind.
    result = nhbench.run(slow_server.url, stage=["2s:400"], stats_interval="0.2s",
                         connections=2, max_pending_requests=1)
    verdicts = _verdicts(result)
    why = _reasons(result)
    assert verdicts["schedule"] == "invalid", why
    assert verdicts["arrivals"] == "invalid", why
    assert result.validity is not None and result.validity.verdict == "invalid"


def test_a_poisson_ramp(server: nhbench.TestServer, slow_server: nhbench.TestServer) -> None:
    kept = _kept_run(server.url, **_RAMP, arrival="poisson", seed=11)
    why = _reasons(kept)
    verdicts = _verdicts(kept)
    assert verdicts["arrivals"] == "valid", why
    assert verdicts["schedule"] == "valid", why
    assert verdicts["trend_rate"] == "valid", why
    assert "Poisson(stages)" in why
    starved = nhbench.run(slow_server.url, stage=["2s:400"], stats_interval="0.2s",
                          connections=2, max_pending_requests=1, open_loop=True,
                          arrival="poisson", seed=11)
    verdicts = _verdicts(starved)
    why = _reasons(starved)
    assert verdicts["schedule"] == "invalid", why
    assert verdicts["arrivals"] in ("suspect", "invalid"), why


def test_an_explicit_schedule(server: nhbench.TestServer, slow_server: nhbench.TestServer
                              ) -> None:
    # 100/s for 1 s, then 300/s for 1 s: a step the plan asks for.
    offsets = [i / 100 for i in range(100)] + [1 + i / 300 for i in range(300)]
    kw: dict[str, Any] = {"schedule_offsets": offsets, "stats_interval": "0.1s"}
    kept = _kept_run(server.url, **kw, connections=20)
    why = _reasons(kept)
    verdicts = _verdicts(kept)
    assert verdicts["schedule"] == verdicts["arrivals"] == "valid", why
    assert "an explicit schedule" in why
    assert verdicts["trend_rate"] == "valid", why
    short = nhbench.run(slow_server.url, **kw, connections=2, max_pending_requests=1)
    verdicts = _verdicts(short)
    assert verdicts["arrivals"] == "invalid", _reasons(short)


def test_replays_at_a_rate_and_at_their_recorded_times(server: nhbench.TestServer,
                                                       tmp_path: Path) -> None:
    # An nginx access log of 40 requests, 10 a second: replayed at Poisson times at a rate,
    # then at its recorded times (an explicit schedule).
    log = tmp_path / "access.log"
    log.write_text("".join(
        f'127.0.0.1 - - [10/Oct/2024:13:55:{i // 10:02d} +0000] "GET /r{i} HTTP/1.1" 200 5\n'
        for i in range(40)))
    proc = nhbench_cli("run", server.url, "--replay", str(log), "--rps", "400", "--duration",
                       "2s", "--arrival", "poisson", "--stats-interval", "0.1s",
                       "--output-format", "json")
    assert proc.returncode == 0, proc.stderr
    result = nhbench.Result.model_validate_json(proc.stdout)
    why = _reasons(result)
    assert _verdicts(result)["arrivals"] == "valid", why
    assert "Poisson(a fixed rate)" in why
    proc = nhbench_cli("run", server.url, "--replay", str(log), "--replay-timing", "original",
                       "--stats-interval", "0.25s", "--output-format", "json")
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    result = nhbench.Result.model_validate_json(json.dumps(document))
    why = _reasons(result)
    verdicts = _verdicts(result)
    assert verdicts["schedule"] == "valid", why
    assert "40 requests sent of 40 planned by an explicit schedule" in why
    assert verdicts["arrivals"] != "not tested", why
