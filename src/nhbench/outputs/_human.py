"""The ``human`` output format: a report for people.

The human report follows Nighthawk's human output (statistic blocks with a percentile table,
then a counters table) with three deliberate differences: the coordinated-omission-correct
latency comes first and is labelled as the headline; dropped requests in open loop get a
warning nobody can miss, because they are absent from every latency figure; and the report
ends with requested vs achieved rate and the verdict of the failure predicates.
"""

from __future__ import annotations

from datetime import timezone
from typing import TYPE_CHECKING

from .._format import format_latency, format_rate, format_seconds, printable
from .._grpc import STATUS_NAMES
from .._names import (
    GRPC_STATUS_RANGE,
    LATENCY_BY_CLASS,
    LATENCY_CHECK_FAILED,
    ORIGIN_LATENCY,
    PHASE_IDS,
    QUEUE_TO_CONNECT,
    RELEASE_LATENESS,
    REQUEST_TO_RESPONSE,
    RESPONSE_BODY_SIZE,
    RESPONSE_HEADER_SIZE,
    SCHEDULED_TO_RESPONSE,
    SEQUENCER_BLOCKING,
    SEQUENCER_CALLBACK,
    STREAMING_IDS,
    TLS_HANDSHAKE,
    describe_errors,
)
from ..options import format_cpu_list

if TYPE_CHECKING:
    # Only for annotations: the renderers read a result's fields and never build one, and
    # `Result.render` calls them, so the result layer sits above this one (an annotation
    # import is not executed and import-linter's contracts do not count it).
    from .._result import Result, Statistic

__all__ = ["render_human"]

_BLOCKING_WARNING = "Results are skewed when significant numbers are reported here."

# What each section is, in the order of the report, after the headline. The notes say what
# the number means where the id alone leaves it open.
_SECTIONS: tuple[tuple[str, str | None], ...] = (
    (REQUEST_TO_RESPONSE, "measured from the actual send, not corrected for coordinated "
     "omission"),
    *((sid, None) for sid in LATENCY_BY_CLASS),
    (LATENCY_CHECK_FAILED, "2xx responses that failed a --check, kept out of the 2xx latency"),
    (QUEUE_TO_CONNECT, None),
    (TLS_HANDSHAKE, None),
    (ORIGIN_LATENCY, "as the origin reported it in the latency response header"),
    (SEQUENCER_BLOCKING, None),
    (RELEASE_LATENESS, "how late each release left compared with its schedule"),
    (SEQUENCER_CALLBACK, None),
    (RESPONSE_HEADER_SIZE, None),
    (RESPONSE_BODY_SIZE, None),
)


def _format_value(statistic: Statistic, value: float) -> str:
    return f"{value:g}" if statistic.raw else format_seconds(value)


def _format_rate(rps: float) -> str:
    return f"{rps:,.2f}"


def _statistic_block(statistic: Statistic, title: str, note: str | None = None) -> list[str]:
    lines = [f"{title} ({statistic.count} samples)"]
    if note:
        lines.append(f"  ({note})")
    if statistic.raw:
        lines.append(
            f"  min: {statistic.min:g} | mean: {statistic.mean:.1f} | "
            f"max: {statistic.max:g} | pstdev: {statistic.pstdev:.1f}"
        )
    else:
        lines.append(
            f"  min: {format_seconds(statistic.min)} | mean: {format_seconds(statistic.mean)} | "
            f"max: {format_seconds(statistic.max)} | pstdev: {format_seconds(statistic.pstdev)}"
        )
    if statistic.percentiles:
        lines.append("")
        lines.append(f"  {'Percentile':<12}{'Count':<12}Value")
        for point in statistic.percentiles:
            lines.append(
                f"  {point.percentile:<12g}{point.count:<12}{_format_value(statistic, point.value)}"
            )
    lines.append("")
    return lines


def _title(statistic: Statistic) -> str:
    if statistic.id == SEQUENCER_BLOCKING:
        return f"{statistic.id}: Blocking. {_BLOCKING_WARNING}"
    return f"{statistic.id}: {statistic.description}"


def _header(result: Result) -> list[str]:
    options = result.options
    # A result loaded from Nighthawk's or Fortio's JSON has a version such as "Nighthawk
    # 0.3.0" or "fortio 1.66.5": name that tool, and show no CPUs (they were another tool's).
    ours = result.version[:1].isdigit()
    tool = f"nhbench {result.version}" if ours else result.version
    cpus = (sorted({cpu for cpu in options.worker_cpus if cpu >= 0})
            if ours and _same_machine(result) else [])
    workers = result.worker_count
    worker_text = f"{workers} worker{'s' if workers != 1 else ''}"
    if cpus:
        worker_text += f" (CPU {format_cpu_list(cpus)})"
    loop = "open loop" if options.open_loop else "closed loop"
    if options.no_duration:
        duration = "no duration"
    else:
        duration = f"duration {format_seconds(options.duration or 0)}"
    start = result.global_result.execution_start
    started = (
        start.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
        if start else "not started"
    )
    # An echo request has no method; a gRPC call is always a POST (the options'
    # method stays at its default GET unless a payload option switched it).
    scheme = result.options.target.scheme
    method = ("echo" if scheme in ("tcp", "udp")
              else "POST" if scheme in ("grpc", "grpcs") else options.request_method)
    lines = [
        # Several targets have no URI: each endpoint's URL, in round-robin order.
        f"{tool}: {method} "
        f"{options.uri or ' '.join(t.url for t in options.targets)}",
        f"  {worker_text} x {options.connections} connections, {loop}, {duration}, "
        f"idle strategy {options.sequencer_idle_strategy}",
        f"  started {started}, ran {format_seconds(result.duration)}, "
        f"ended by: {result.terminated_by}",
    ]
    if options.protocol != "http1" or result.options.target.scheme == "https":
        protocol = {"http1": "HTTP/1.1", "http2": "HTTP/2", "http3": "HTTP/3"}[options.protocol]
        # grpcs:// is TLS too: the core's scheme says which. HTTP/3 is always
        # QUIC, whose handshake is TLS 1.3.
        transport = ("QUIC" if options.protocol == "http3"
                     else "TLS" if options.core_scheme == "https" else "cleartext")
        extra = ""
        if options.protocol == "http2":
            streams = ("unlimited" if options.max_concurrent_streams >= 2**31 - 1
                       else str(options.max_concurrent_streams))
            extra = (f", max {streams} streams per connection, "
                     f"{options.max_active_requests} active requests per worker")
        lines.append(f"  {'gRPC over ' if options.is_grpc else ''}{protocol} over "
                     f"{transport}{extra}")
    if result.insecure:
        lines.append("  !! TLS certificates were NOT verified (--insecure)")
    if options.label:
        lines.append(f"  labels: {', '.join(options.label)}")
    lines.append("")
    return lines


def _same_machine(result: Result) -> bool:
    # The CPU list is only meaningful if the worker count still matches (an 'auto' run shown
    # on another machine would otherwise print that machine's CPUs).
    try:
        return len(result.options.worker_cpus) == result.worker_count
    except (OSError, ValueError, ArithmeticError):
        # No affinity mask to read, or an empty CPU pool: the report just omits the list.
        return False


def _overflow_warning(result: Result) -> list[str]:
    dropped = result.counters["benchmark.pool_overflow"]
    if not dropped:
        return []
    bar = "!" * 78
    mode = "open loop" if result.options.open_loop else "this run"
    return [
        bar,
        f"!! WARNING: {dropped} requests were DROPPED (benchmark.pool_overflow) in {mode}.",
        "!! They were scheduled but never sent: no free connection and no pending slot.",
        "!! They are NOT in any latency figure above, so the latencies look better than",
        "!! the service was. Raise --connections or --max-pending-requests, or lower --rps.",
        bar,
        "",
    ]


def _workers_table(result: Result) -> list[str]:
    if not result.workers:
        return []
    # A distributed run's workers are named after their host (host_0.worker_1).
    width = max(12, max(len(worker.name) for worker in result.workers) + 2)
    lines = [f"{'Worker':<{width}}{'2xx':>12}{'rps':>14}{'p99':>14}{'blocked':>10}"]
    for worker in result.workers:
        counters = worker.counter_values
        duration = worker.execution_duration
        rate = counters["benchmark.http_2xx"] / duration if duration > 0 else 0.0
        try:
            p99 = format_seconds(worker.stat(SCHEDULED_TO_RESPONSE).p(99))
        except (KeyError, ValueError):
            p99 = "-"
        lines.append(
            f"{worker.name:<{width}}{counters['benchmark.http_2xx']:>12}{_format_rate(rate):>14}"
            f"{p99:>14}{counters['sequencer.blocked']:>10}"
        )
    lines.append("")
    return lines


def _endpoints_table(result: Result) -> list[str]:
    # Where the connections went, when that was more than one place (several targets, or
    # a name's addresses with --dns-method rr|random): the spread a load balancer made.
    if len(result.endpoints) < 2:
        return []
    width = max(12, max(len(endpoint.name) for endpoint in result.endpoints) + 2)
    total = sum(endpoint.requests for endpoint in result.endpoints)
    lines = [f"{'Endpoint':<{width}}{'connections':>12}{'requests':>12}{'share':>8}"
             f"{'errors':>10}{'p50':>12}{'p99':>12}"]
    for endpoint in result.endpoints:
        share = f"{100.0 * endpoint.requests / total:.1f}%" if total else "-"
        try:
            p50 = format_seconds(endpoint.latency.p(50))
            p99 = format_seconds(endpoint.latency.p(99))
        except (KeyError, ValueError):
            p50 = p99 = "-"
        lines.append(f"{endpoint.name:<{width}}{endpoint.connections:>12}"
                     f"{endpoint.requests:>12}{share:>8}{endpoint.errors:>10}{p50:>12}{p99:>12}")
    lines.append("")
    return lines


def _groups_table(result: Result) -> list[str]:
    # --group-by: per request kind, target or header value (docs/engine.md "Groups").
    groups = result.groups
    if groups is None or not groups.groups:
        return []
    title = f"Group ({groups.by})"
    width = max(len(title) + 2, max(len(group.name) for group in groups.groups) + 2)
    width = min(width, 60)
    lines = [f"{title:<{width}}{'requests':>12}{'share':>8}{'errors':>10}{'error %':>9}"
             f"{'p50':>12}{'p99':>12}"]
    for group in groups.groups:
        try:
            p50 = format_seconds(group.latency.p(50))
            p99 = format_seconds(group.latency.p(99))
        except (KeyError, ValueError):
            p50 = p99 = "-"
        name = group.name if len(group.name) < width else group.name[:width - 4] + "..."
        lines.append(f"{name:<{width}}{group.requests:>12}{100.0 * group.share:>7.1f}%"
                     f"{group.errors:>10}{100.0 * group.error_rate:>8.2f}%{p50:>12}{p99:>12}")
    if groups.spread is not None:
        lines.append(f"spread (max share / min share over the values): {groups.spread:.3f}")
    lines.append("")
    return lines


def _counters_table(result: Result) -> list[str]:
    nonzero = result.counters.nonzero()
    duration = result.duration
    width = max([len("Counter"), *(len(name) for name in nonzero)]) + 2
    lines = [f"{'Counter':<{width}}{'Value':<14}Per second"]
    for name, value in nonzero.items():
        per_second = value / duration if duration > 0 else 0.0
        lines.append(f"{name:<{width}}{value:<14}{per_second:.2f}")
    lines.append("")
    return lines


def _summary(result: Result) -> list[str]:
    options = result.options
    workers = result.worker_count
    if options.stage or options.schedule_offsets:
        shape = (f"{len(options.stage)} stage{'s' if len(options.stage) != 1 else ''}"
                 if options.stage else f"{len(options.schedule_offsets or ())} scheduled "
                 f"requests per worker")
        requested = f"{_format_rate(result.requested_rps)} rps on average ({shape})"
    elif options.rps == 0:
        requested = (
            f"max (as fast as {options.connections} connection"
            f"{'s' if options.connections != 1 else ''} per worker allow)"
        )
    else:
        requested = (
            f"{_format_rate(result.requested_rps)} rps "
            f"({options.rps:g} per worker x {workers} worker{'s' if workers != 1 else ''})"
        )
    lines = [
        f"Requested rate: {requested}",
        f"Achieved rate:  {_format_rate(result.achieved_rps)} rps (2xx responses per second)",
    ]
    lines += _grpc_lines(result)
    if result.interrupted:
        lines.append(
            f"Interrupted: stopped after {format_seconds(result.duration)}; "
            f"this is a partial result."
        )
    if result.terminated_by.startswith("termination_predicate:"):
        lines.append(f"Terminated by predicate: {result.terminated_by.split(':', 1)[1]}")
    errors = result.error_count
    if errors:
        # The same definition and sum as the sweep's reports (nhbench._names.ERROR_COUNTERS).
        lines.append(f"Errors:         {errors} ({describe_errors(result.counters)})")
    if result.error:
        lines.append(f"First error: {result.error}")
    no_success = result.no_success_reason
    if result.failed_predicates:
        fired = "; ".join(str(predicate) for predicate in result.fired)
        lines.append(f"FAILED: failure predicate fired: {fired}")
    elif result.terminated_by == "error":
        lines.append("FAILED: the run ended with an error.")
    elif no_success is not None:
        lines.append(f"FAILED: {no_success}.")
    elif not result.succeeded:
        lines.append("OK: no failure predicate fired (no request succeeded, allowed by "
                     "allow_no_success).")
    else:
        lines.append("OK: no failure predicate fired.")
    return lines


def _grpc_lines(result: Result) -> list[str]:
    """A gRPC run's calls by grpc-status, e.g. ``gRPC status:    990 OK, 10
    UNAVAILABLE (14)``; nothing for other runs."""
    if not result.options.is_grpc:
        return []
    counters = result.counters
    parts = []
    for code in GRPC_STATUS_RANGE:
        count = counters.get(f"benchmark.grpc_status_{code}", 0)
        if count:
            name = STATUS_NAMES[code]
            parts.append(f"{count} {name}" if code == 0 else f"{count} {name} ({code})")
    broken = counters.get("benchmark.grpc_protocol_error", 0)
    if broken:
        parts.append(f"{broken} without a valid status (benchmark.grpc_protocol_error)")
    return [f"gRPC status:    {', '.join(parts) if parts else 'no call ended with a status'}"]


def _hosts_table(result: Result) -> list[str]:
    # A distributed run (docs/distributed.md): each node's merged share of the load, where
    # it ran, and how well it kept the one scheduled start.
    if not result.hosts:
        return []
    lines = [f"{'Host':<10}{'node':<14}{'address':<18}{'workers':>8}{'2xx':>12}{'rps':>14}"
             f"{'p99':>14}{'clock offset':>24}{'start skew':>14}{'ready ahead':>14}"]
    for host in result.hosts:
        try:
            entry = result.host_result(host.name)
        except KeyError:
            continue
        counters = entry.counter_values
        duration = entry.execution_duration
        rate = counters["benchmark.http_2xx"] / duration if duration > 0 else 0.0
        try:
            p99 = format_seconds(entry.stat(SCHEDULED_TO_RESPONSE).p(99))
        except (KeyError, ValueError):
            p99 = "-"
        offset = (f"{_signed(host.clock_offset)} ±"
                  f"{format_seconds(host.clock_uncertainty)}")
        lines.append(
            f"{host.name:<10}{host.node_id[:12]:<14}{host.address[:17]:<18}"
            f"{len(host.workers):>8}{counters['benchmark.http_2xx']:>12}{_format_rate(rate):>14}"
            f"{p99:>14}{offset:>24}{_signed(host.start_skew):>14}"
            f"{_signed(host.ready_margin):>14}"
        )
    lines.append("")
    return lines


def _signed(seconds: float) -> str:
    text = format_seconds(abs(seconds))
    return f"-{text}" if seconds < 0 else f"+{text}"


def render_human(result: Result) -> str:
    """The human report (plain text, no colours, safe to redirect into a file and to print
    on a terminal: control characters from the result are escaped, see `printable`)."""
    lines = _header(result)
    lines += _validity_lines(result)
    lines += _until_lines(result)
    lines += _overflow_warning(result)
    statistics = {s.id: s for s in result.global_result.statistics}
    headline = statistics.get(SCHEDULED_TO_RESPONSE)
    if headline is not None and headline.count:
        lines.append(
            "LATENCY (headline): from each request's scheduled send time to the end of its "
            "response"
        )
        lines.append("(coordinated-omission corrected: waiting for a connection counts)")
        lines += _statistic_block(headline, f"{headline.id}")
    else:
        lines.append("LATENCY (headline): no responses were received.")
        lines.append("")
    lines += _phases_block(statistics)
    lines += _streaming_block(statistics)
    for stat_id, note in _SECTIONS:
        statistic = statistics.get(stat_id)
        if statistic is not None and statistic.count:
            lines += _statistic_block(statistic, _title(statistic), note)
    # Anything the core added that this renderer does not know yet still gets shown.
    known = {SCHEDULED_TO_RESPONSE, *PHASE_IDS, *STREAMING_IDS, *(sid for sid, _ in _SECTIONS)}
    for statistic in result.global_result.statistics:
        if statistic.id not in known and statistic.count:
            lines += _statistic_block(statistic, _title(statistic))
    lines += _workers_table(result)
    lines += _hosts_table(result)
    lines += _endpoints_table(result)
    lines += _groups_table(result)
    lines += _counters_table(result)
    lines += _schedule_lines(result)
    lines += _echo_lines(result)
    lines += _overflow_warning(result)
    lines += _summary(result)
    # Labels, the uri, names and the first error come from the run or from a result file;
    # each line is made safe for a terminal (a newline inside a field is escaped, too).
    return "\n".join(printable(line) for line in lines) + "\n"


def _phases_block(statistics: dict[str, Statistic]) -> list[str]:
    # Where a request's time went, one line per phase in the order a request lives through
    # them (docs/engine.md "Latency phases"): connect and handshake count per new connection,
    # the rest per request; the per-request ones add up to request_to_response.
    rows = [statistics[sid] for sid in PHASE_IDS if sid in statistics and statistics[sid].count]
    if not rows:
        return []
    width = max(len(s.id) for s in rows)
    lines = ["LATENCY PHASES (dns, connect and tls_handshake per new connection, the rest "
             "per request)",
             f"  {'statistic':<{width}}  {'samples':>9}  {'mean':>10}  {'p50':>10}  "
             f"{'p99':>10}  {'max':>10}"]
    for s in rows:
        lines.append(f"  {s.id:<{width}}  {s.count:>9}  {format_seconds(s.mean):>10}  "
                     f"{_point(s, 50):>10}  {_point(s, 99):>10}  "
                     f"{format_seconds(s.max):>10}")
    lines.append("")
    return lines


def _streaming_block(statistics: dict[str, Statistic]) -> list[str]:
    # With --stream-stats (docs/engine.md "Streaming responses"): when the first event came,
    # the gaps between events, how long streams lasted and how many events each had.
    rows = [statistics[sid] for sid in STREAMING_IDS
            if sid in statistics and statistics[sid].count]
    if not rows:
        return []
    width = max(len(s.id) for s in rows)
    lines = ["STREAMING (events: SSE events of text/event-stream responses, else body pieces)",
             f"  {'statistic':<{width}}  {'samples':>9}  {'mean':>10}  {'p50':>10}  "
             f"{'p99':>10}  {'max':>10}"]
    for s in rows:
        if s.raw:
            lines.append(f"  {s.id:<{width}}  {s.count:>9}  {s.mean:>10.4g}  {'-':>10}  "
                         f"{'-':>10}  {s.max:>10g}")
        else:
            lines.append(f"  {s.id:<{width}}  {s.count:>9}  {format_seconds(s.mean):>10}  "
                         f"{_point(s, 50):>10}  {_point(s, 99):>10}  "
                         f"{format_seconds(s.max):>10}")
    lines.append("")
    return lines


def _point(statistic: Statistic, percent: float) -> str:
    # A statistic read from another tool's file may carry neither the point nor a histogram.
    try:
        return format_seconds(statistic.p(percent))
    except ValueError:
        return "-"


def _validity_lines(result: Result) -> list[str]:
    # Right under the header: whether to trust what follows (docs/trust.md "Validity").
    validity = result.validity
    if validity is None:
        return []
    if validity.verdict == "valid":
        untested = [c.name for c in validity.checks if c.verdict == "not tested"]
        note = f"; not tested: {', '.join(untested)}" if untested else ""
        return [f"VALIDITY: valid (every check passed{note})", ""]
    return [f"VALIDITY: {validity.verdict.upper()}",
            *(f"  {reason}" for reason in validity.reasons), ""]


def _until_lines(result: Result) -> list[str]:
    # After the verdict: whether --until got the precision it asked for (docs/trust.md
    # "Running until the numbers are tight").
    until = result.until
    if until is None:
        return []
    lines = [f"UNTIL: {'reached' if until.reached else 'NOT REACHED'}: {until.reason}"]
    for s in until.statistics:
        target = f"target ±{s.target * 100:g}%"
        if s.half_width is None or s.estimate is None or s.low is None or s.high is None:
            lines.append(f"  {s.statistic}: no interval ({s.reason}); {target}")
            continue
        value = (format_rate if s.statistic == "rate" else format_latency)
        lines.append(f"  {s.statistic} {value(s.estimate)} ±{s.half_width * 100:.2g}% "
                     f"[{value(s.low)}, {value(s.high)}], {target}")
    if until.stats_interval_chosen:
        lines.append(f"  live statistics turned on at {until.stats_interval:g} s intervals "
                     "for the estimate")
    return [*lines, ""]


def _echo_lines(result: Result) -> list[str]:
    # docs/protocols.md: what the counters mean for a tcp:// or udp:// run, in
    # words; a completed echo counts as a 2xx response everywhere else.
    scheme = result.options.target.scheme
    if scheme not in ("tcp", "udp"):
        return []
    counters = result.counters
    ok, bad = counters["benchmark.http_2xx"], counters["benchmark.echo_mismatch"]
    line = f"ECHO ({scheme}://): {ok} ok (counted as benchmark.http_2xx), {bad} mismatched"
    if scheme == "udp":
        line += (f", {counters['benchmark.udp_lost']} lost (no echo within the request "
                 f"time-out; {counters['benchmark.udp_late']} of them came back late), "
                 f"{counters['benchmark.udp_unexpected']} unexpected datagrams")
    return [line, ""]


def _schedule_lines(result: Result) -> list[str]:
    # Schedule shapes: what a shaped schedule did; nothing for a plain run.
    facts = result.schedule
    lines: list[str] = []
    if facts.no_catchup:
        lines.append(
            f"NO-CATCHUP: the schedule moved {facts.no_catchup_moves} times, "
            f"{facts.no_catchup_shift:.6g} s in all (summed over workers); "
            f"{facts.lost_releases} releases not made. Latency hides that wait "
            "(coordinated omission)."
        )
    if result.warmup is not None:
        warm = result.warmup.counter_values
        latency = next((s for s in result.warmup.statistics
                        if s.id == SCHEDULED_TO_RESPONSE and s.count), None)
        text = (f"WARM-UP (kept apart): {facts.warmup_released} releases, "
                f"{warm['benchmark.http_2xx']} 2xx responses")
        if latency is not None:
            text += f", p50 {latency.p(50) * 1e3:.3g} ms, max {latency.max * 1e3:.3g} ms"
        lines.append(text + ".")
    if facts.stages:
        lines.append("STAGES (rates for all workers):")
        for stage in facts.stages:
            lines.append(
                f"  {stage.index}: {stage.duration:g} s, {stage.rps_from:g} -> "
                f"{stage.rps_to:g} rps, planned {stage.planned:.0f}, released "
                f"{stage.releases}, responses {stage.responses} "
                f"({stage.achieved_rps:.1f}/s)"
            )
    if result.options.execution_id is not None:
        lines.append(f"Execution id: {result.options.execution_id}")
    if lines:
        lines.append("")
    return lines
