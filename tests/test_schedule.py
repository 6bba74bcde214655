"""Schedule shapes (docs/engine.md "Shaping the schedule") against real servers.

Exact counts where the schedule makes them exact (--requests, stages' planned releases,
no-catchup's made + lost), wide ratios and spreads where the wire adds noise; no timing
thresholds. Bad values: exit 2 and one line (the CLI as a subprocess).
"""

from __future__ import annotations

import json
import socket
import statistics
import threading
import time

import pytest
from support.pinned import SERVER_CPUS, run, served
from test_cli_errors import assert_one_line_error, nhbench_cli

import nhbench

pytestmark = pytest.mark.core



@pytest.fixture(scope="module")
def server():
    with nhbench.TestServer(cpus=SERVER_CPUS) as srv:
        yield srv



# ---- --requests N (Fortio's -n) ---------------------------------------------------------


@pytest.mark.parametrize("rps", [2000, 0], ids=["rate", "closed-loop"])
def test_requests_sends_exactly_n(server, rps):
    before = served(server)
    result = run(server.url, requests=999, rps=rps, concurrency=2, cpus=None, connections=8)
    assert served(server) - before == 999
    assert result.counters["upstream_rq_total"] == 999
    assert result.counters["benchmark.http_2xx"] == 999
    assert result.schedule.released == 999
    assert result.options.effective_duration is None  # no time limit of its own


def test_requests_split_n_over_w_plus_one_for_the_first(server):
    result = run(server.url, requests=7, rps=500, concurrency=3, cpus=None)
    per_worker = [w.counter_values["sequencer.released"] for w in result.workers]
    assert per_worker == [3, 2, 2]


def test_requests_with_a_duration_ends_at_whichever_comes_first(server):
    before = served(server)
    result = run(server.url, requests=10_000, rps=100, duration=0.3)
    assert served(server) - before == result.counters["upstream_rq_total"] == 30


# ---- --stage TIME:RPS -----------------------------------------------------------------


def test_stages_release_the_integral_of_the_rate(server):
    before = served(server)
    result = run(server.url, stage=["0.5s:400", "0.5s:400", "0.5s:0"], connections=10)
    stages = result.schedule.stages
    assert [s.planned for s in stages] == [100.0, 200.0, 100.0]
    assert [(s.rps_from, s.rps_to) for s in stages] == [(0, 400), (400, 400), (400, 0)]
    for stage in stages:
        # Exact in the schedule: only the release rounding at the stage edges differs.
        assert abs(stage.releases - stage.planned) <= 2
        assert stage.responses == stage.releases
    assert served(server) - before == sum(s.releases for s in stages) == 400
    assert result.duration == pytest.approx(1.5, abs=0.05)
    # The requested rate of a staged run is the stages' planned mean, not the unused --rps.
    assert result.requested_rps == pytest.approx(400 / 1.5)
    human = result.render("human")
    assert "STAGES" in human
    assert "Requested rate: 266.67 rps on average (3 stages)" in human


def test_a_constant_stage_equals_rps_and_duration(server):
    staged = run(server.url, stage=["0.4s:250"])
    plain = run(server.url, rps=250, duration=0.4)
    # The stage ramps from 0: half of it. As a second stage after a 0-length ramp it is the
    # same schedule as --rps 250 --duration 0.4.
    assert staged.schedule.released == 50
    assert plain.counters["sequencer.released"] == 100
    steady = run(server.url, stage=["0.1s:250", "0.4s:250"])
    assert steady.schedule.stages[1].releases == pytest.approx(100, abs=1)


# ---- jitter ---------------------------------------------------------------------------


class ArrivalServer:
    """A raw-socket HTTP/1.1 origin that records when each request head arrives."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.arrivals: list[float] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                buf += data
                while b"\r\n\r\n" in buf:
                    _, buf = buf.split(b"\r\n\r\n", 1)
                    with self._lock:
                        self.arrivals.append(time.monotonic())
                    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")

    def close(self) -> None:
        self.listener.close()


def offsets_from_grid(arrivals: list[float], interval: float) -> list[float]:
    """Each arrival's distance from the schedule's unjittered grid, the grid anchored at the
    earliest (so the smallest offset is 0)."""
    arrivals = sorted(arrivals)
    raw = [t - k * interval for k, t in enumerate(arrivals)]
    anchor = min(raw)
    return [r - anchor for r in raw]


# serial: arrival times on the wire within 4 ms of the bound need a free CPU (38 of 60 were
# within it once, with the other test worker busy on a loaded machine).
@pytest.mark.serial
def test_jitter_uniform_spreads_releases_within_the_bound():
    origin = ArrivalServer()
    try:
        interval, bound = 0.02, 0.015
        run(origin.url, rps=1 / interval, duration=1.2, connections=4, jitter_uniform=bound)
        jittered = offsets_from_grid(origin.arrivals, interval)
        origin.arrivals.clear()
        run(origin.url, rps=1 / interval, duration=1.2, connections=4)
        plain = offsets_from_grid(origin.arrivals, interval)
    finally:
        origin.close()
    assert len(jittered) == len(plain) == 60
    q1, _, q3 = statistics.quantiles(jittered, n=4)
    p1, _, p3 = statistics.quantiles(plain, n=4)
    # Uniform on [0, 15 ms]: an interquartile range near 7.5 ms, and nearly all within the
    # bound (plus the wire's noise); the unjittered control stays tight.
    assert q3 - q1 > 3 * (p3 - p1)
    assert q3 - q1 > bound / 4
    within = sum(1 for x in jittered if x <= bound + 0.004)
    assert within >= 0.9 * len(jittered)


def test_fortio_jitter_keeps_the_count(server):
    before = served(server)
    result = run(server.url, rps=200, duration=0.5, jitter=True)
    assert served(server) - before == result.counters["sequencer.released"] == 100


def test_uniform_is_accepted_and_changes_nothing(server):
    result = run(server.url, rps=100, duration=0.3, concurrency=2, cpus=None, uniform=True)
    assert result.counters["sequencer.released"] == 60


# ---- --no-catchup ------------------------------------------------------------------------


def test_no_catchup_moves_the_schedule_and_counts_what_it_lost(server):
    slow = server.url + "?delay=50ms"
    moved = run(slow, rps=100, duration=1.0, connections=1, no_catchup=True)
    facts = moved.schedule
    assert facts.no_catchup and facts.no_catchup_moves > 0 and facts.no_catchup_shift > 0
    # The unmoved schedule had 100 releases before the end: made + lost is exactly that.
    assert facts.released + facts.lost_releases == 100
    assert facts.released == moved.counters["sequencer.released"]
    assert 5 <= facts.released <= 40  # one connection, 50 ms a response: about 20
    assert "NO-CATCHUP" in moved.render("human")
    # The default keeps the schedule, so the headline latency shows the wait that
    # no-catchup hides (coordinated omission): a wide ratio.
    kept = run(slow, rps=100, duration=1.0, connections=1)
    assert kept.schedule.lost_releases == 0 and kept.schedule.no_catchup_moves == 0
    assert kept.latency.max > 3 * moved.latency.max


# ---- warm-up -----------------------------------------------------------------------------


def test_warmup_is_kept_apart(server):
    before = served(server)
    result = run(server.url, rps=200, duration=0.5, warmup=0.3)
    warm = result.warmup
    assert warm is not None
    total = served(server) - before
    measured = result.counters["upstream_rq_total"]
    warmed = warm.counter_values["upstream_rq_total"]
    assert total == measured + warmed
    assert measured == result.schedule.released == 100
    assert warmed == result.schedule.warmup_released == 60
    assert result.latency.count == result.counters["benchmark.http_2xx"] == 100
    assert warm.stat("benchmark_http_client.scheduled_to_response").count == 60
    assert "WARM-UP" in result.render("human")
    # It survives the JSON output.
    back = nhbench.Result.model_validate_json(result.render("json"))
    assert back.warmup is not None and back.schedule == result.schedule


def test_simple_warmup_sends_one_per_worker(server):
    before = served(server)
    result = run(server.url, rps=100, duration=0.3, simple_warmup=True, concurrency=2, cpus=None)
    assert result.schedule.warmup_released == 2
    assert served(server) - before == 2 + result.counters["upstream_rq_total"] == 62


def test_sequential_warmup_sends_one_per_connection(server):
    result = run(server.url, rps=100, duration=0.3, sequential_warmup=True, connections=5)
    assert result.warmup is not None
    assert result.warmup.counter_values["benchmark.http_2xx"] == 5
    assert result.counters["sequencer.released"] == 30


@pytest.mark.parametrize("allow", [False, True])
def test_allow_initial_errors_judges_failures_after_the_warmup(server, allow):
    # A failure predicate that the warm-up's first response fires: without
    # allow_initial_errors the run fails in the warm-up and never measures.
    # The warm-up lasts long enough (1 s, 100 responses) for the predicate to fire in it
    # however busy the machine.
    result = run(server.url, rps=100, duration=0.3, warmup=1.0, allow_initial_errors=allow,
                 failure_predicate={"benchmark.http_2xx": 5})
    assert "benchmark.http_2xx" in result.failed_predicates
    if allow:
        assert result.schedule.released > 0
        assert result.warmup.counter_values["benchmark.http_2xx"] == 100
    else:
        assert result.schedule.released == 0


def test_allow_initial_errors_without_a_warmup_is_refused():
    # Alone it changed nothing (the errors it forgives are a warm-up's), which read as
    # Fortio's -allow-initial-errors being honoured.
    with pytest.raises(nhbench.OptionsError, match="needs warmup, simple_warmup or "
                                                   "sequential_warmup"):
        nhbench.run("http://127.0.0.1:1/", allow_initial_errors=True)
    assert_one_line_error(nhbench_cli("run", "http://127.0.0.1:1/", "--allow-initial-errors"),
                          "--allow-initial-errors: needs --warmup, --simple-warmup or "
                          "--sequential-warmup")


# ---- scheduled start, execution id, explicit offsets -----------------------------------


def test_scheduled_start_is_not_before_the_time(server):
    start = time.time() + 0.8
    result = run(server.url, rps=50, duration=0.2, scheduled_start=start)
    assert result.global_result.execution_start.timestamp() >= start - 0.002
    assert result.counters["sequencer.released"] == 10


def test_execution_id_in_the_result_and_nighthawk_options(server):
    result = run(server.url, rps=20, duration=0.1, execution_id="run-42")
    document = json.loads(result.render("json"))
    assert document["options"]["execution_id"] == "run-42"
    assert nhbench.Result.model_validate(document).options.execution_id == "run-42"
    assert "Execution id: run-42" in result.render("human")


def test_schedule_offsets_release_exactly_the_list(server):
    before = served(server)
    result = run(server.url, schedule_offsets=[0, 0.05, 0.05, 0.2], concurrency=2, cpus=None)
    assert served(server) - before == 8
    assert result.schedule.released == 8
    assert result.duration >= 0.2 - 1e-3  # the last release is due at 0.2 s
    # Three intervals over 0.2 s, on each of two workers.
    assert result.requested_rps == pytest.approx(3 / 0.2 * 2)


# ---- bad values ----------------------------------------------------------------------------

URI = "http://127.0.0.1:1/"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--stage", "10s"), "--stage: must be TIME:RPS"),
        (("--stage", "0s:10"), "--stage: a stage lasts more than 0 s"),
        (("--stage", "1s:x"), "--stage: RPS must be a number"),
        (("--stage", "1s:10", "--rps", "5"), "--stage: mutually exclusive with --rps"),
        (("--stage", "1s:10", "--duration", "5"), "--stage: mutually exclusive with --duration"),
        (("-n", "0"), "--requests"),
        (("--jitter-uniform", "-1"), "--jitter-uniform"),
        (("-jitter", "--rps", "0"), "--jitter: needs --rps"),
        (("-nocatchup", "--rps", "0"), "--no-catchup: needs --rps"),
        (("--scheduled-start", "2001-01-01T00:00:00Z"), "--scheduled-start: is in the past"),
        (("--scheduled-start", "soon"), "--scheduled-start: must be RFC 3339"),
        (("--warmup", "1s", "--simple-warmup"), "mutually exclusive"),
        (("--schedule-offsets", "1,0.5"), "--schedule-offsets: must not decrease"),
    ],
)
def test_bad_schedule_values_exit_2_with_one_line(args, expected):
    assert_one_line_error(nhbench_cli("run", URI, *args), expected)
