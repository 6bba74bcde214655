"""The pytest plugin: load tests that assert latency SLOs (docs/pytest.md).

pytest loads this module at start-up in every session of an environment where nhbench is
installed (the ``pytest11`` entry point), so it imports only the standard library and pytest
at module level: the rest of nhbench (and the C core, when a server or a run starts) is
imported by the fixtures and hooks that need it, on first use.

What happens per test: `nhbench_run` appends each `Result` to the test item's stash. After
the test function returned, `pytest_pyfunc_call` evaluates the ``nhbench_slo`` marker's rules
on every result and compares each with the saved baseline (``--nhbench-compare``), records
the JUnit properties, saves the results (``--nhbench-save``) and fails the test, with one
message listing every breach, when a rule failed or a metric regressed. The comparison is
by fixed limits (``--nhbench-compare-fail p99:10%``) or statistical
(``--nhbench-compare-stat p99``: the verdict of `nhbench.compare`, a block bootstrap over
the interval histograms with its confidence interval, docs/trust.md), or both. A test that failed
on its own is not failed again, but its results are still summarised, recorded and saved.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .._compare import Comparison
    from .._result import GroupResult, Result
    from .._server import TestServer
    from .._slo import SloOutcome
    from ..options import StopRule

__all__ = [
    "nhbench_run",
    "nhbench_server",
    "nhbench_server_session",
    "pytest_addoption",
    "pytest_configure",
    "pytest_pyfunc_call",
    "pytest_terminal_summary",
]

MARKER = "nhbench_slo"
#: The format tag of a file written by --nhbench-save.
SAVE_FORMAT = "nhbench-pytest/1"
# A saved file's name keeps the test id readable up to this length; longer ids (deeply
# parametrized tests) are cut and made unique again with a hash, well below the usual
# 255-byte limit of a file name.
_NAME_LIMIT = 120
# Metrics --nhbench-compare-fail accepts, and which way is worse. A counter has no general
# "worse" direction (more 2xx is better, more 5xx is worse), so counters are SLO rules only.
_HIGHER_IS_BETTER = ("rps", "achieved_ratio")
_COMPARABLE = ("latency", "error_rate", "errors", "blocked", *_HIGHER_IS_BETTER)


@dataclass
class _Load:
    """One result `nhbench_run` produced, and what the plugin found about it."""

    nodeid: str
    index: int
    result: Result
    outcome: SloOutcome | None = None
    regressions: list[str] = field(default_factory=list)
    compared: str = "-"
    comparison: Comparison | None = None


@dataclass(frozen=True)
class _CompareFail:
    """One ``--nhbench-compare-fail METRIC:LIMIT``: relative (``10%``) or absolute."""

    text: str
    rule: StopRule
    relative: float | None
    absolute: float | None


@dataclass
class _Session:
    save_dir: Path | None = None
    compare_dir: Path | None = None
    compare_fail: tuple[_CompareFail, ...] = ()
    compare_stat: tuple[str, ...] = ()
    scale: float = 1.0
    loads: list[_Load] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)


_SESSION = pytest.StashKey[_Session]()
_LOADS = pytest.StashKey[list[_Load]]()


# --------------------------------------------------------------------------------------------
# Options and configuration
# --------------------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nhbench", "nhbench load tests (docs/pytest.md)")
    group.addoption(
        "--nhbench-save", metavar="DIR", default=None,
        help="write each test's nhbench results as JSON into DIR, one file per test named "
        "after its test id",
    )
    group.addoption(
        "--nhbench-duration-scale", metavar="F", default=None,
        help="multiply the duration of every nhbench_run load by F (0.1 for a quick local "
        "run); default 1",
    )
    group.addoption(
        "--nhbench-compare", metavar="DIR", default=None,
        help="compare each test's results with those saved in DIR by --nhbench-save",
    )
    group.addoption(
        "--nhbench-compare-fail", metavar="METRIC:LIMIT", action="append", default=[],
        help="with --nhbench-compare: fail a test whose METRIC (p99, p50, max, mean, "
        "STATISTIC:p99, rps, error_rate, errors, blocked, achieved/requested) is worse than "
        "its baseline by more than LIMIT (10%% relative, or 1ms / 0.01 absolute); repeatable",
    )
    group.addoption(
        "--nhbench-compare-stat", metavar="STATISTICS", action="append", default=[],
        help="with --nhbench-compare: compare each result with its baseline statistically "
        "(block bootstrap over interval histograms, 95%% confidence interval) and fail a "
        "test whose STATISTICS (comma-separated: p50, p90, p99, p99.9, mean, rate, "
        "error_rate, or all) regressed; the summary shows each verdict with its interval",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(*rules): service-level objectives ('p99<5ms', 'error_rate<0.1%', "
        "'rps>=1990'...) every nhbench_run result of the test must meet (docs/pytest.md)",
    )
    config.stash[_SESSION] = _configure_session(config)


def _configure_session(config: pytest.Config) -> _Session:
    session = _Session()
    scale = config.getoption("nhbench_duration_scale", None)
    if scale is not None:
        try:
            session.scale = float(scale)
        except ValueError:
            session.scale = math.nan
        if not math.isfinite(session.scale) or session.scale <= 0:
            raise pytest.UsageError(
                f"--nhbench-duration-scale: must be a finite number > 0 (got {scale!r})")
    save = config.getoption("nhbench_save", None)
    if save is not None:
        session.save_dir = Path(save)
        try:
            session.save_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise pytest.UsageError(
                f"--nhbench-save: cannot create directory {save!r}: {exc.strerror or exc}"
            ) from None
    compare = config.getoption("nhbench_compare", None)
    fails = config.getoption("nhbench_compare_fail", None) or []
    if compare is not None:
        session.compare_dir = Path(compare)
        if not session.compare_dir.is_dir():
            raise pytest.UsageError(f"--nhbench-compare: {compare!r} is not a directory")
    if fails and compare is None:
        raise pytest.UsageError("--nhbench-compare-fail: needs --nhbench-compare DIR")
    session.compare_fail = tuple(_parse_compare_fail(text) for text in fails)
    stats = config.getoption("nhbench_compare_stat", None) or []
    if stats and compare is None:
        raise pytest.UsageError("--nhbench-compare-stat: needs --nhbench-compare DIR")
    session.compare_stat = _parse_compare_stat(stats)
    return session


def _parse_compare_stat(texts: list[str]) -> tuple[str, ...]:
    from .._compare import COMPARED_STATISTICS

    known = [name for name, _ in COMPARED_STATISTICS]
    chosen: list[str] = []
    for text in texts:
        for word in str(text).split(","):
            word = word.strip().lower()
            if word == "all":
                chosen += known
            elif word in known:
                chosen.append(word)
            else:
                raise pytest.UsageError(
                    f"--nhbench-compare-stat {text!r}: {word or 'nothing'} is not a compared "
                    f"statistic (one of {', '.join(known)}, or all)")
    return tuple(dict.fromkeys(chosen))


def _parse_compare_fail(text: str) -> _CompareFail:
    from ..options import StopRule, parse_duration

    metric, sep, limit = str(text).strip().rpartition(":")
    if not sep or not metric or not limit.strip():
        raise pytest.UsageError(
            f"--nhbench-compare-fail {text!r}: expected METRIC:LIMIT such as p99:10% or "
            f"p99:1ms")
    try:
        rule = StopRule.for_metric(metric)
    except ValueError as exc:
        raise pytest.UsageError(f"--nhbench-compare-fail {exc}") from None
    if rule.metric not in _COMPARABLE:
        raise pytest.UsageError(
            f"--nhbench-compare-fail {text!r}: {metric} cannot be compared (use a latency "
            f"statistic, rps, error_rate, errors, blocked or achieved/requested; a counter "
            f"is an SLO rule: @pytest.mark.{MARKER}('{metric}==0'))")
    limit = limit.strip()
    try:
        if limit.endswith("%"):
            relative = float(limit[:-1]) / 100.0
            absolute = None
        elif rule.metric == "latency":
            relative, absolute = None, parse_duration(limit)
        else:
            relative, absolute = None, float(limit)
    except ValueError:
        relative = absolute = math.nan
    value = relative if relative is not None else absolute
    if value is None or not math.isfinite(value) or value < 0:
        unit = "a duration (1ms) or" if rule.metric == "latency" else "a number or"
        raise pytest.UsageError(
            f"--nhbench-compare-fail {text!r}: the limit must be {unit} a percentage (10%), "
            f"not negative")
    return _CompareFail(str(text).strip(), rule, relative, absolute)


# --------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------


@pytest.fixture
def nhbench_server() -> Iterator[Callable[..., TestServer]]:
    """A factory: ``nhbench_server(**TestServer options)`` returns a started `TestServer`
    (in this process), stopped when the test ends."""
    servers: list[TestServer] = []

    def start(**options: Any) -> TestServer:
        from .._server import TestServer

        server = TestServer(**options)
        server.start()
        servers.append(server)
        return server

    yield start
    for server in reversed(servers):
        server.stop()


@pytest.fixture(scope="session")
def nhbench_server_session() -> Iterator[Callable[..., TestServer]]:
    """The session-wide `nhbench_server`: the same options give the same started server for
    the whole session (started on first use, stopped at the end)."""
    servers: dict[str, TestServer] = {}

    def start(**options: Any) -> TestServer:
        from .._server import TestServer

        key = repr(sorted(options.items()))
        if key not in servers:
            server = TestServer(**options)
            server.start()
            servers[key] = server
        return servers[key]

    yield start
    for server in reversed(list(servers.values())):
        server.stop()


@pytest.fixture
def nhbench_run(request: pytest.FixtureRequest) -> Callable[..., Result]:
    """``nhbench.run`` (same signature) that records every result against the current test:
    the ``nhbench_slo`` marker, --nhbench-save, --nhbench-compare, the terminal summary and
    the JUnit properties all see it. --nhbench-duration-scale multiplies its duration."""
    session = request.config.stash[_SESSION]
    item = request.node
    loads = item.stash.setdefault(_LOADS, [])

    def run(uri: Any = None, /, *, on_progress: Callable[..., object] | None = None,
            **options: Any) -> Result:
        from .._run import Benchmark
        from ..options import make_options

        resolved = make_options(uri, **options)
        if session.scale != 1.0 and resolved.duration is not None:
            scaled = resolved.duration * session.scale
            # --until's bound is its duration: both scale, or they would disagree.
            bound = {"max_duration": scaled} if resolved.until else {}
            resolved = make_options(resolved, duration=scaled, **bound)
        if (session.save_dir is not None or session.compare_stat) \
                and resolved.stats_interval is None:
            # A result saved or compared statistically keeps interval histograms, which
            # the block bootstrap resamples (docs/trust.md).
            from .._compare import comparison_stats_interval

            resolved = make_options(resolved, stats_interval=comparison_stats_interval(
                resolved.effective_duration))
        result = Benchmark(resolved).run(on_progress)
        loads.append(_Load(item.nodeid, len(loads), result))
        return result

    return run


# --------------------------------------------------------------------------------------------
# After each test
# --------------------------------------------------------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, object, object]:
    markers = list(pyfuncitem.iter_markers(MARKER))
    rules: list[StopRule] = []
    if markers:
        from .._exceptions import OptionsError
        from .._slo import parse_slo_rules

        try:
            rules = parse_slo_rules([rule for marker in markers for rule in _marker_rules(marker)])
        except OptionsError as exc:
            pytest.fail(f"@pytest.mark.{MARKER}: {exc}", pytrace=False)
    try:
        outcome = yield
    except BaseException:
        if _LOADS in pyfuncitem.stash:
            _after_test(pyfuncitem, rules)
        raise
    if _LOADS in pyfuncitem.stash or rules:
        failures = _after_test(pyfuncitem, rules)
        if rules and not pyfuncitem.stash.get(_LOADS, []):
            failures.insert(0, f"{MARKER}: the test produced no result to check (run the load "
                               f"with the nhbench_run fixture)")
        if failures:
            pytest.fail("\n".join(failures), pytrace=False)
    return outcome


def _marker_rules(marker: pytest.Mark) -> list[object]:
    """The marker's rules: its arguments, then ``checks={"NAME": "99.9%"}`` as one
    ``check:NAME>=99.9%`` rule per response check (docs/checks.md); a bare number is a
    fraction (0.999). Any other keyword is refused by name."""
    from .._exceptions import OptionsError

    unknown = sorted(set(marker.kwargs) - {"checks"})
    if unknown:
        raise OptionsError(f"unknown keyword {unknown[0]!r} (only checks= is taken)")
    rules: list[object] = list(marker.args)
    checks = marker.kwargs.get("checks", {})
    if not isinstance(checks, dict):
        raise OptionsError(f"checks= takes a dict of check name to pass share "
                           f"({{'body_ok': '99.9%'}}), not {checks!r}")
    for name, share in checks.items():
        rules.append(f"check:{name}>={share}")
    return rules


def _after_test(item: pytest.Function, rules: list[StopRule]) -> list[str]:
    """Evaluate, compare, record and save the test's results; the failure messages."""
    from .._slo import check_slo

    session = item.config.stash[_SESSION]
    loads = item.stash.get(_LOADS, [])
    failures: list[str] = []
    breached = 0
    for load in loads:
        if rules:
            load.outcome = check_slo(load.result, *rules)
            if not load.outcome:
                breached += 1
                failures.append(f"{_load_title(load, len(loads))}\n{load.outcome}")
    if breached:
        failures.insert(0, f"{MARKER}: {breached} of {len(loads)} load"
                           f"{'s' if len(loads) != 1 else ''} breached the SLO")
    if session.compare_dir is not None and loads:
        failures += _compare(session, item.nodeid, loads)
    _record_properties(item, loads)
    session.loads.extend(loads)
    if session.save_dir is not None and loads:
        failures += _save(session, item.nodeid, loads)
    return failures


def _load_title(load: _Load, count: int) -> str:
    options = load.result.options
    rate = f"{load.result.requested_rps:g} rps" if options.rps else "as fast as possible"
    return f"load {load.index + 1} of {count}: {options.uri} at {rate}"


def _record_properties(item: pytest.Function, loads: list[_Load]) -> None:
    """JUnit XML properties (``item.user_properties``), one set per load:
    ``nhbench.N.p99`` (seconds), ``nhbench.N.achieved_rps``, ``nhbench.N.slo``..."""
    for load in loads:
        result = load.result
        prefix = f"nhbench.{load.index}."
        values: list[tuple[str, object]] = [
            ("uri", result.options.uri),
            ("requested_rps", result.requested_rps),
            ("achieved_rps", round(result.achieved_rps, 3)),
            ("duration", result.duration),
            ("requests", result.counters["upstream_rq_total"]),
            ("errors", result.error_count),
            ("error_rate", result.error_rate),
        ]
        for point in (50.0, 90.0, 99.0, 99.9):
            values.append((f"p{point:g}", _latency(result, point)))
        values.append(("max", _latency(result, 100.0)))
        if load.outcome is not None:
            values.append(("slo", "pass" if load.outcome else "fail"))
            for verdict in load.outcome:
                values.append((f"slo.{verdict.expression}",
                               f"{'pass' if verdict.passed else 'fail'} ({verdict.measured})"))
        if load.compared != "-":
            values.append(("compare", load.compared))
        if result.groups is not None:
            # The largest groups (as many as the summary line names), by name.
            from .._live import SHOWN_GROUPS

            values.append(("groups.by", result.groups.by))
            for group in sorted(result.groups.groups, key=lambda g: -g.requests)[:SHOWN_GROUPS]:
                values += [(f"group.{group.name}.requests", group.requests),
                           (f"group.{group.name}.errors", group.errors),
                           (f"group.{group.name}.p99", _group_p99(group))]
        item.user_properties.extend((prefix + name, value) for name, value in values)


def _group_p99(group: GroupResult) -> float | None:
    try:
        return group.latency.p(99.0) if group.latency.count else None
    except (KeyError, ValueError):
        return None


def _latency(result: Result, point: float) -> float | None:
    try:
        return result.latency.p(point)
    except (KeyError, ValueError):
        return None


# --------------------------------------------------------------------------------------------
# Saving and comparing
# --------------------------------------------------------------------------------------------


def file_name(nodeid: str) -> str:
    """The file --nhbench-save writes a test's results to: the test id with every run of
    characters outside ``A-Za-z0-9_.-`` replaced by ``_``, cut at 120 characters plus a
    hash of the full id when longer, and ``.json``."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid).strip("._-") or "test"
    if len(safe) > _NAME_LIMIT:
        safe = f"{safe[:_NAME_LIMIT]}-{_digest(nodeid)}"
    return safe + ".json"


def _digest(nodeid: str) -> str:
    return hashlib.sha1(nodeid.encode("utf-8")).hexdigest()[:10]


def _session_file_name(session: _Session, nodeid: str) -> str:
    # Two ids that sanitize alike in one session ("t[a/b]", "t[a_b]"): the second gets its
    # hash, so that neither overwrites the other.
    name = file_name(nodeid)
    owner = session.names.setdefault(name, nodeid)
    if owner != nodeid:
        name = f"{name[:-5]}-{_digest(nodeid)}.json"
        session.names.setdefault(name, nodeid)
    return name


def _save(session: _Session, nodeid: str, loads: list[_Load]) -> list[str]:
    from .._io import write_text

    assert session.save_dir is not None
    document = {
        "format": SAVE_FORMAT,
        "test": nodeid,
        "results": [json.loads(load.result.model_dump_json()) for load in loads],
        "slo": [load.outcome.to_dict() if load.outcome is not None else None
                for load in loads],
    }
    path = session.save_dir / _session_file_name(session, nodeid)
    if path.is_symlink():
        # The save directory may be shared (a CI cache, /tmp): a link planted at one of its
        # file names would make this run overwrite whatever the link points to.
        return [f"--nhbench-save: {str(path)!r} is a symbolic link; not writing through it "
                "(remove it)"]
    try:
        write_text(path, json.dumps(document, indent=1) + "\n")
    except OSError as exc:
        return [f"--nhbench-save: {exc}"]
    return []


def _load_baseline(path: Path, nodeid: str) -> list[Result] | str:
    """The baseline results of a test, or why there are none."""
    from .._input import InputError, read_input_text
    from .._result import Result

    if not path.exists() and not path.is_symlink():
        return "no baseline"
    try:
        document = json.loads(read_input_text(path, "baseline", str(path)))
        if not isinstance(document, dict) or document.get("format") != SAVE_FORMAT:
            return f"{path} is not a --nhbench-save file"
        if document.get("test") != nodeid:
            return f"{path} holds test {document.get('test')!r}"
        return [Result.model_validate(entry) for entry in document.get("results") or ()]
    except RecursionError:
        return f"cannot read {path}: nested too deeply"
    except (OSError, ValueError) as exc:
        # ValueError covers the reader's refusals (a FIFO, a device, over the size limit),
        # JSON syntax and pydantic validation errors.
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"cannot read {first}" if isinstance(exc, InputError) else \
            f"cannot read {path}: {first}"


def _compare(session: _Session, nodeid: str, loads: list[_Load]) -> list[str]:
    from .._slo import ResultMeasures

    assert session.compare_dir is not None
    baseline = _load_baseline(session.compare_dir / _session_file_name(session, nodeid), nodeid)
    if isinstance(baseline, str):
        for load in loads:
            load.compared = baseline
        # A missing baseline is a new test, not a regression; an unreadable one is a problem
        # the user must see, since it silently disables the comparison.
        return [] if baseline == "no baseline" else [f"--nhbench-compare: {baseline}"]
    failures = []
    for load in loads:
        if load.index >= len(baseline):
            load.compared = "no baseline"
            continue
        before, after = ResultMeasures(baseline[load.index]), ResultMeasures(load.result)
        for limit in session.compare_fail:
            text = _regression(limit, limit.rule.value(before), limit.rule.value(after))
            if text:
                load.regressions.append(text)
        verdicts = ""
        if session.compare_stat:
            load.comparison = load.result.compare(baseline[load.index])
            chosen = [s for s in load.comparison if s.name in session.compare_stat]
            for statistic in chosen:
                if statistic.verdict == "regressed":
                    load.regressions.append(
                        f"{statistic.name}: regressed, {statistic.interval_text()} "
                        f"({load.comparison.confidence * 100:g}% confidence interval; "
                        f"--nhbench-compare-stat)")
            verdicts = "; ".join(f"{s.name} {s.verdict} {s.interval_text()}" for s in chosen)
        load.compared = ("REGRESSED" if load.regressions else "ok") + (
            f": {verdicts}" if verdicts else "")
        if load.regressions:
            failures.append(f"{_load_title(load, len(loads))}: regressed against the "
                            f"baseline in {session.compare_dir}:\n  "
                            + "\n  ".join(load.regressions)
                            + (f"\n{load.comparison}" if load.comparison is not None
                               else ""))
    return failures


def _regression(limit: _CompareFail, before: float | None, after: float | None) -> str | None:
    """The regression in words, or None when `after` is within `limit` of `before`."""
    from ..options import format_rule_value

    if before is None or after is None:
        return None
    higher_is_better = limit.rule.metric in _HIGHER_IS_BETTER
    worse_by = (before - after) if higher_is_better else (after - before)
    allowed = (abs(before) * limit.relative if limit.relative is not None
               else limit.absolute or 0.0)
    if worse_by <= allowed:
        return None
    change = (f"{(after - before) / before * 100:+.1f}%" if before else "from 0")
    shown = format_rule_value(limit.rule, after), format_rule_value(limit.rule, before)
    return (f"{limit.rule.expression}: {shown[0]} against {shown[1]} in the baseline "
            f"({change}; --nhbench-compare-fail {limit.text})")


# --------------------------------------------------------------------------------------------
# The summary at the end of the session
# --------------------------------------------------------------------------------------------


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is None or not session.loads:
        return
    from .._format import format_latency

    compare = session.compare_dir is not None
    header = ["test", "rps asked", "achieved", "p50", "p99", "errors", "SLO", "validity"]
    if compare:
        header.append("baseline")
    rows = [header]
    counts: dict[str, int] = {}
    for load in session.loads:
        counts[load.nodeid] = counts.get(load.nodeid, 0) + 1
    for load in session.loads:
        result = load.result
        name = load.nodeid + (f" #{load.index + 1}" if counts[load.nodeid] > 1 else "")
        verdict = "-" if load.outcome is None else ("pass" if load.outcome else "FAIL")
        row = [
            name,
            f"{result.requested_rps:g}" if result.options.rps else "max",
            f"{result.achieved_rps:.1f}",
            format_latency(_latency(result, 50.0)),
            format_latency(_latency(result, 99.0)),
            str(result.error_count),
            verdict,
            "-" if result.validity is None else result.validity.verdict,
        ]
        if compare:
            row.append(load.compared)
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    terminalreporter.write_sep("=", "nhbench")
    for row in rows:
        cells = [row[0].ljust(widths[0])]
        cells += [cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)]
        terminalreporter.write_line("  ".join(cells).rstrip())
    # A grouped load's groups, one bounded line each (the largest, then how many more).
    from .._live import format_groups

    for load in session.loads:
        groups = load.result.groups
        if groups is not None and groups.groups:
            name = load.nodeid + (f" #{load.index + 1}" if counts[load.nodeid] > 1 else "")
            terminalreporter.write_line(f"{name}: groups by {groups.by}: " + format_groups(
                (g.name, g.requests, g.errors, _group_p99(g)) for g in groups.groups))
    terminalreporter.write_line(
        "p50/p99: benchmark_http_client.scheduled_to_response (coordinated-omission corrected)"
        + ("; a group's p99: its request_to_response" if any(
            load.result.groups is not None for load in session.loads) else ""))
    # Why a load is not to be trusted (docs/trust.md "Validity"), one line per reason.
    for load in session.loads:
        validity = load.result.validity
        if validity is not None and validity.verdict != "valid":
            for reason in validity.reasons:
                terminalreporter.write_line(f"{load.nodeid}: {reason}")
