"""``--until STAT:±X%`` (docs/trust.md, "Running until the numbers are tight"): the grammar
and its refusals, the estimate on recorded timelines (seeded, the same decisions however
the intervals arrive), and real runs against the test server that stop early or run to
--max-duration and say so."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import nhbench_cli

import nhbench
from nhbench import OptionsError
from nhbench._until import UntilTracker, stride, until_stats_interval
from nhbench.options import UNTIL_MIN_INTERVALS, parse_until

np = pytest.importorskip("numpy")

from test_compare import lognormal_run  # noqa: E402  (needs numpy, as the skip above)

pytest_plugins = ["pytester"]

URL = "http://127.0.0.1:9/"


# --------------------------------------------------------------------------------------------
# The grammar and the refusals
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "canonical"), [
    ("p99:±2%", "p99:2%"), ("p99:+-2%", "p99:2%"), ("p99:2%", "p99:2%"),
    ("P99.9 : ± 0.5 %", "p99.9:0.5%"), ("mean:10%", "mean:10%"), ("rate:1%", "rate:1%"),
    ("p50:+/-5%", "p50:5%"), ("p90:99.5%", "p90:99.5%"),
])
def test_the_grammar(text: str, canonical: str) -> None:
    assert parse_until(text) == canonical


@pytest.mark.parametrize(("options", "message"), [
    ({"until": "p98:2%"}, "until: unknown statistic 'p98'"),
    ({"until": "p99:0%"}, "until: the width must be above 0% and below 100%"),
    ({"until": "p99:100%"}, "until: the width must be above 0% and below 100%"),
    ({"until": "p99:-2%"}, "until: expected STAT:±X%"),
    ({"until": "p99:2"}, "until: expected STAT:±X% such as p99:±2%, a percentage"),
    ({"until": ["p99:2%", "p99:5%"]}, "until: p99 given twice"),
    ({"until": "p99:2%", "max_duration": None}, "until: needs max_duration"),
    ({"until": "p99:2%", "duration": "5s"}, "until: mutually exclusive with duration"),
    ({"until": "p99:2%", "no_duration": True}, "until: mutually exclusive with no_duration"),
    ({"until": "p99:2%", "requests": 100}, "until: mutually exclusive with requests"),
    ({"until": "p99:2%", "stage": ["5s:10"]}, "until: mutually exclusive with stage"),
    ({"until": "p99:2%", "schedule_offsets": [0, 0.1]},
     "until: mutually exclusive with schedule_offsets"),
    ({"until": "p99:2%", "ray": "auto"}, "until: mutually exclusive with ray"),
    ({"max_duration": "10s", "until": ()}, "max_duration: needs until"),
    ({"until": "p99:2%", "stats_interval": "off"}, "until: needs live statistics"),
    ({"until": "p99:2%", "max_duration": "1s"},
     "until: max_duration 1s holds fewer than the 20 intervals of 0.1s"),
    ({"until": "p99:2%", "stats_interval": "1s"},
     "until: max_duration 10s holds fewer than the 20 intervals of 1s"),
    ({"until": "rate:2%", "rps": 100}, "until: rate is set by rps in an open loop"),
])
def test_refusals_by_name(options: dict[str, object], message: str) -> None:
    kwargs: dict[str, object] = {"max_duration": "10s", **options}
    if kwargs["max_duration"] is None:
        del kwargs["max_duration"]
    with pytest.raises(OptionsError) as caught:
        nhbench.options.make_options(URL, **kwargs)
    assert str(caught.value).startswith(message), str(caught.value)


def test_the_bound_is_the_duration_and_a_copy_validates_again() -> None:
    options = nhbench.options.make_options(URL, until=["p99:±2%", "mean:5%"],
                                           max_duration="30s")
    assert options.until == ("p99:2%", "mean:5%")
    assert options.effective_duration == 30.0
    # A copy with one field changed carries the duration until set: the same value passes.
    assert nhbench.options.make_options(options, rps=10).effective_duration == 30.0
    # rate in a closed loop is a throughput estimate: accepted.
    nhbench.options.make_options(URL, until="rate:2%", max_duration="30s", rps=0)


@pytest.fixture
def silent_port() -> Iterator[socket.socket]:
    """A listening socket nobody accepts on: a connection attempt stays in its backlog."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        sock.setblocking(False)
        yield sock


@pytest.mark.parametrize("args", [
    ["--until", "p98:2%", "--max-duration", "10s"],
    ["--until", "p99:2%"],
    ["--until", "p99:2%", "--max-duration", "10s", "--duration", "5s"],
    ["--until", "rate:2%", "--max-duration", "10s", "--rps", "100"],
    ["--max-duration", "10s"],
])
def test_the_cli_refuses_in_one_line_and_sends_nothing(silent_port: socket.socket,
                                                       args: list[str]) -> None:
    port = silent_port.getsockname()[1]
    done = nhbench_cli("run", f"http://127.0.0.1:{port}/", *args, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nhbench: error: --"), done.stderr
    with pytest.raises(BlockingIOError):
        silent_port.accept()  # no connection was made


@pytest.mark.parametrize(("command", "flag"), [
    ("sweep", "--until"), ("sweep", "--max-duration"), ("adapt", "--until"),
    ("adapt", "--max-duration"),
])
def test_campaigns_refuse_until_by_name(command: str, flag: str) -> None:
    value = "p99:2%" if flag == "--until" else "10s"
    done = nhbench_cli(command, URL, flag, value, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"nhbench: error: {flag}: a campaign's steps last their --duration" + (
            "; run the step alone with nhbench run --until" if flag == "--until" else
            " (--max-duration bounds nhbench run --until)")]


# --------------------------------------------------------------------------------------------
# The estimate on recorded timelines
# --------------------------------------------------------------------------------------------


def test_no_estimate_before_the_minimum_and_a_stride_after() -> None:
    assert [stride(n) for n in (20, 100, 101, 600)] == [2, 10, 11, 60]
    timeline = list(lognormal_run(1, intervals=UNTIL_MIN_INTERVALS - 1).timeline)
    tracker = UntilTracker([("p50", 0.5)])
    tracker.add(timeline)
    assert not tracker.step() and tracker.estimates == 0
    assert tracker.final() is None
    assert until_stats_interval(10) == pytest.approx(0.1)
    assert until_stats_interval(600) == pytest.approx(1.0)


def test_same_intervals_same_decision_however_they_arrive() -> None:
    # A wandering run (AR(1) level): the decision depends on the data, not on delivery.
    timeline = list(lognormal_run(7, intervals=200, per=300, drift=0.05).timeline)
    targets = [("p50", 0.025), ("p99", 0.03), ("mean", 0.025)]

    def decide(chunks: list[int], seed: int = 0) -> UntilTracker:
        tracker = UntilTracker(targets, seed=seed)
        start = 0
        for size in chunks:
            tracker.add(timeline[start:start + size])
            start += size
            if tracker.step():
                break
        return tracker

    one_by_one = decide([1] * 200)
    at_once = decide([200])
    uneven = decide([3, 50, 7, 1, 60, 79])
    assert one_by_one.reached is not None, one_by_one.last
    for other in (at_once, uneven):
        assert other.reached == one_by_one.reached
    # The interval read is within the target, and the point is the merged intervals'.
    for statistic in one_by_one.reached.statistics:
        assert statistic.half_width is not None
        assert statistic.half_width <= statistic.target
        assert statistic.low is not None and statistic.high is not None
        assert statistic.estimate is not None
        assert statistic.low <= statistic.estimate <= statistic.high
    # Another seed draws other resamples: same points, other ends.
    reseeded = UntilTracker(targets, seed=1)
    reseeded.add(timeline[:one_by_one.reached.intervals])
    first = reseeded._estimate(one_by_one.reached.intervals)
    assert [s.estimate for s in first.statistics] == \
        [s.estimate for s in one_by_one.reached.statistics]
    assert [s.low for s in first.statistics] != [s.low for s in one_by_one.reached.statistics]


def test_the_interval_narrows_with_more_intervals() -> None:
    timeline = list(lognormal_run(3, intervals=400, per=200).timeline)
    widths = []
    for n in (25, 400):
        tracker = UntilTracker([("p50", 0.001)])
        tracker.add(timeline[:n])
        final = tracker.final()
        assert final is not None and final.statistics[0].half_width is not None
        widths.append(final.statistics[0].half_width)
    # sqrt(400 / 25) = 4 for independent intervals: wide bounds.
    assert 1.5 < widths[0] / widths[1] < 12, widths


def test_a_tail_percentile_waits_for_its_data() -> None:
    # 20 intervals of 50 responses: 1,000 responses, p99.9 needs 10,000.
    timeline = list(lognormal_run(2, intervals=20, per=50).timeline)
    tracker = UntilTracker([("p99.9", 0.5)])
    tracker.add(timeline)
    assert not tracker.step()
    final = tracker.final()
    assert final is not None
    assert final.statistics[0].half_width is None
    assert "p99.9 needs 10,000" in final.statistics[0].reason


# --------------------------------------------------------------------------------------------
# Real runs against the test server
# --------------------------------------------------------------------------------------------


def test_a_steady_origin_stops_early_with_the_interval_within_target() -> None:
    # A 2 ms response delay: the median is the server's timer, not the loopback round trip
    # of tens of microseconds that a busy host moves by more than 5 %.
    with nhbench.TestServer(static_delay="2ms") as server:
        result = nhbench.run(server.url, until="p50:±5%", max_duration="20s", rps=200)
    until = result.until
    assert until is not None and until.reached, until
    assert result.terminated_by == "until"
    assert not result.interrupted
    # Stopped before the bound (the first estimate is due at 4 s; a busy host may need a
    # few more).
    assert result.duration < 18, (result.duration, until)
    assert until.reached_at is not None and until.reached_at < 18
    assert until.stats_interval_chosen and until.stats_interval == pytest.approx(0.2)
    assert until.intervals >= UNTIL_MIN_INTERVALS
    (p50,) = until.statistics
    assert p50.statistic == "p50" and p50.reached
    assert p50.half_width is not None and p50.half_width <= 0.05
    assert result.validity is not None
    check = next(c for c in result.validity.checks if c.name == "until")
    assert check.verdict == "valid"


def test_a_noisy_origin_runs_to_max_duration_and_says_not_reached() -> None:
    with nhbench.TestServer() as server:
        # Fortio's echo delay: half the responses wait 1 ms, a third 5 ms, the rest none.
        done = nhbench_cli("run", server.url + "?delay=1ms:50,5ms:30", "--until", "mean:±0.1%",
                           "--max-duration", "3s", "--rps", "200", "--stats-interval", "0.1s",
                           "--output-format", "json", timeout=90)
        human = nhbench_cli("run", server.url + "?delay=1ms:50,5ms:30", "--until",
                            "mean:+-0.1%", "--max-duration", "2s", "--rps", "200",
                            timeout=90)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    result = nhbench.Result.model_validate(document)
    until = result.until
    assert until is not None and not until.reached
    assert result.terminated_by == "duration"
    assert until.reached_at is None
    assert not until.stats_interval_chosen
    assert "max_duration 3 s reached first" in until.reason
    # Estimates at 20, 22, 25 and 28 intervals, then the last over all of them.
    assert 4 <= until.estimates <= 7, until
    assert 0 < until.estimate_seconds < result.duration, until
    (mean,) = until.statistics
    assert mean.half_width is not None and mean.half_width > 0.001
    assert result.validity is not None
    check = next(c for c in result.validity.checks if c.name == "until")
    assert check.verdict == "suspect"
    assert result.validity.verdict in ("suspect", "invalid")
    # The human report says it under the verdict, with the interval live statistics chose.
    assert human.returncode == 0, human.stderr
    assert "UNTIL: NOT REACHED: max_duration 2 s reached first" in human.stdout
    assert "live statistics turned on at 0.1 s intervals" in human.stdout
    assert "suspect: until: --until NOT REACHED" in human.stdout


def test_the_pytest_plugins_duration_scale_scales_the_bound(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_scaled(nhbench_server, nhbench_run):
            result = nhbench_run(nhbench_server().url, until="p50:±50%", max_duration="20s",
                                 rps=50)
            assert result.options.max_duration == 5.0
            assert result.options.duration == 5.0
            assert result.until is not None
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--nhbench-duration-scale=0.25")
    result.assert_outcomes(passed=1)


def test_a_warm_up_is_marked_in_the_timeline_and_until_reads_past_it(tmp_path: Path) -> None:
    # The warm-up's 1 s at 0.1 s intervals: its intervals (and at most one more, begun while
    # a worker was ending its warm-up) are marked, the measured phase's are not, and --until
    # counts only the measured phase's.
    with nhbench.TestServer(static_delay="2ms") as server:
        result = nhbench.run(server.url, until="p50:±50%", max_duration="4s", rps=200,
                             warmup="1s", stats_interval="0.1s")
    marks = [r.warmup for r in result.timeline]
    warm = marks.index(False)
    assert 8 <= warm <= 13, marks
    assert not any(marks[warm:]), marks
    assert result.warmup is not None and result.warmup.counters
    until = result.until
    assert until is not None
    assert until.intervals <= len(marks) - warm
    # The JSON says warmup on the warm-up's intervals only, and reads back the same.
    path = tmp_path / "run.json"
    path.write_text(result.render("json"))
    assert '"warmup": false' not in path.read_text()
    assert [r.warmup for r in nhbench.load_result(path).timeline] == marks
