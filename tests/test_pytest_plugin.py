"""The pytest plugin (nhbench.testing._plugin, docs/pytest.md), run for real with pytester:
inner pytest sessions whose tests start nhbench's test server and send short, low-rate
loads. Nothing here depends on timing: a failing SLO is an impossible one (``p99<1ns``), a
regression is a server delay that multiplies the latency many times over."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from nhbench import Result
from nhbench.testing._plugin import file_name

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "docs" / "examples" / "test_slo_example.py"


def test_the_documented_example_runs_and_its_failing_slo_says_why(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_slo_example=EXAMPLE.read_text(encoding="utf-8"))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=1)
    text = result.stdout.str()
    # The failure lists every rule with measured against threshold, says which latency a
    # bare percentile is, and adds the compact percentile table.
    result.stdout.fnmatch_lines([
        "*_ test_deliberately_failing_slo _*",
        "nhbench_slo: 1 of 1 load breached the SLO",
        "load 1 of 1: http://127.0.0.1:*/ at 50 rps",
        "SLO failed: 1 of 2 rules: p99<1ns (measured *)",
        "*verdict*rule*measured*threshold*metric",
        "*FAIL*p99<1ns*< 1ns*p99 of benchmark_http_client.scheduled_to_response "
        "(coordinated-omission corrected)",
        "*pass*error_rate<0.1%*0%*< 0.1%*error rate*",
        "*latency*samples*min*p50*p90*p99*p99.9*p99.99*max",
        "*benchmark_http_client.scheduled_to_response (CO-corrected)*25*",
        "*load: 50 rps requested, * achieved, 0 errors, 0.5 s",
    ])
    # No traceback of the plugin's internals: the message is the whole report.
    assert "_plugin.py" not in text
    # The terminal summary: one row per load (test_several_loads ran two).
    result.stdout.fnmatch_lines([
        "*= nhbench =*",
        "test*rps asked*achieved*p50*p99*errors*SLO*validity",
        "test_slo_example.py::test_latency_objective*100*pass*",
        "test_slo_example.py::test_several_loads #1*50*pass*",
        "test_slo_example.py::test_several_loads #2*100*pass*",
        "test_slo_example.py::test_structured_verdict*100*-*",
        "test_slo_example.py::test_deliberately_failing_slo*50*FAIL*",
    ])


def test_marker_rules_apply_to_every_load_and_need_one(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.nhbench_slo("errors==0")
        def test_no_load():
            pass

        @pytest.mark.nhbench_slo("p99<5")
        def test_bad_rule(nhbench_run):
            raise AssertionError("must not run")

        @pytest.mark.nhbench_slo("p99<10s")
        class TestClass:
            @pytest.mark.nhbench_slo("benchmark.http_2xx>=1000000")
            def test_second_load_breaches(self, nhbench_server, nhbench_run):
                url = nhbench_server().url
                nhbench_run(url, rps=20, duration="0.5s")
                nhbench_run(url, rps=40, duration="0.5s")

        def test_unmarked_loads_never_fail(nhbench_server, nhbench_run):
            nhbench_run(nhbench_server().url, rps=20, duration="0.5s")

        def test_own_failure_is_not_replaced(nhbench_server, nhbench_run):
            nhbench_run(nhbench_server().url, rps=20, duration="0.5s")
            assert False, "the test's own failure"
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-rf")
    result.assert_outcomes(passed=1, failed=4)
    result.stdout.fnmatch_lines([
        "*nhbench_slo: the test produced no result to check (run the load with the "
        "nhbench_run fixture)",
        "*@pytest.mark.nhbench_slo: SLO rule 'p99<5': a latency needs a unit: ns, us, µs, "
        "ms or s",
    ])
    text = result.stdout.str()
    assert "must not run" not in text
    # Both markers (class and method) apply, to both loads.
    assert "nhbench_slo: 2 of 2 loads breached the SLO" in text
    # Counted in the failure reports only: under CI=true pytest does not truncate the short
    # summary (-rf), which then repeats each message in full.
    failures = text.split("short test summary info")[0]
    assert failures.count("FAIL     benchmark.http_2xx>=1000000") == 2
    assert "load 2 of 2: " in text
    assert "the test's own failure" in text


def test_save_writes_one_json_file_per_test(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.parametrize("rps", [20, 30])
        @pytest.mark.nhbench_slo("errors==0")
        def test_rates(nhbench_server, nhbench_run, rps):
            nhbench_run(nhbench_server().url, rps=rps, duration="0.5s")
        """
    )
    out = tmp_path / "saved" / "nested"
    result = pytester.runpytest("-p", "no:cacheprovider", f"--nhbench-save={out}")
    result.assert_outcomes(passed=2)
    files = sorted(path.name for path in out.iterdir())
    assert files == ["test_save_writes_one_json_file_per_test.py_test_rates_20.json",
                     "test_save_writes_one_json_file_per_test.py_test_rates_30.json"]
    for rps, name in zip((20, 30), files, strict=True):
        document = json.loads((out / name).read_text(encoding="utf-8"))
        assert document["format"] == "nhbench-pytest/1"
        assert document["test"] == (
            f"test_save_writes_one_json_file_per_test.py::test_rates[{rps}]")
        [saved] = [Result.model_validate(entry) for entry in document["results"]]
        assert saved.options.rps == rps and saved.counters["benchmark.http_2xx"] > 0
        assert document["slo"][0]["passed"] is True
        assert document["slo"][0]["rules"][0]["rule"] == "errors==0"


def test_file_names_are_sanitized_and_bounded() -> None:
    assert file_name("tests/a.py::test_x[p99 <5ms/1]") == "tests_a.py_test_x_p99_5ms_1.json"
    long = "t.py::test[" + "x" * 500 + "]"
    name = file_name(long)
    assert len(name) < 150 and name.endswith(".json") and name != file_name(long + "y")


def test_duration_scale_scales_every_load(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import nhbench

        def test_scaled(nhbench_server, nhbench_run):
            url = nhbench_server().url
            assert nhbench_run(url, rps=20, duration="2s").options.duration == 0.5
            options = nhbench.Options(uri=url, rps=20, duration=4)
            assert nhbench_run(options).options.duration == 1.0
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--nhbench-duration-scale=0.25")
    result.assert_outcomes(passed=1)


def test_compare_fails_a_regression_against_the_saved_baseline(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    # The server's delay comes from a file, so that the same test id measures a fast
    # baseline and then a slow server: a 50 ms delay against sub-millisecond responses.
    delay_file = tmp_path / "delay"
    pytester.makepyfile(
        f"""
        from pathlib import Path

        def test_load(nhbench_server, nhbench_run):
            delay = Path({str(delay_file)!r}).read_text()
            nhbench_run(nhbench_server(static_delay=delay).url, rps=20, duration="0.5s")

        def test_new(nhbench_server, nhbench_run):
            nhbench_run(nhbench_server().url, rps=20, duration="0.5s")
        """
    )
    baseline = tmp_path / "baseline"
    delay_file.write_text("0s")
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "test_load",
                                f"--nhbench-save={baseline}")
    result.assert_outcomes(passed=1, deselected=1)

    delay_file.write_text("50ms")
    result = pytester.runpytest("-p", "no:cacheprovider", f"--nhbench-compare={baseline}",
                                "--nhbench-compare-fail=p50:100%",
                                "--nhbench-compare-fail=error_rate:0.01")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "load 1 of 1: http://127.0.0.1:*/ at 20 rps: regressed against the baseline in *",
        "  p50: 5* ms against * in the baseline (+*%; --nhbench-compare-fail p50:100%)",
        "*test_load*20*-*REGRESSED",
        "*test_new*20*-*no baseline",
    ])
    # The regression is p50 only: the error rate did not move.
    assert "error_rate:" not in result.stdout.str()

    # Against a baseline that had the same delay, the same limit passes.
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "test_load",
                                f"--nhbench-save={baseline}")
    result.assert_outcomes(passed=1, deselected=1)
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "test_load",
                                f"--nhbench-compare={baseline}", "--nhbench-compare-fail=p50:100%")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["*test_load*20*-*ok"])


def test_statistical_compare_gives_the_verdict_with_its_interval(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    # The same test id measures a fast baseline, then a server 5 ms slower, then the fast
    # one again: regressed with the interval, then no significant change (A/A) for p50.
    delay_file = tmp_path / "delay"
    pytester.makepyfile(
        f"""
        from pathlib import Path

        def test_load(nhbench_server, nhbench_run, request):
            delay = Path({str(delay_file)!r}).read_text()
            result = nhbench_run(nhbench_server(static_delay=delay).url, rps=200,
                                 duration="2s")
            # --nhbench-save and --nhbench-compare-stat keep interval histograms.
            if request.config.getoption("nhbench_save") or \
                    request.config.getoption("nhbench_compare_stat"):
                assert result.options.stats_interval == 0.1
                assert len(result.timeline) >= 15
            else:
                assert result.options.stats_interval is None
        """
    )
    baseline = tmp_path / "baseline"
    delay_file.write_text("0s")
    result = pytester.runpytest("-p", "no:cacheprovider", f"--nhbench-save={baseline}")
    result.assert_outcomes(passed=1)
    saved = Result.model_validate(
        json.loads(next(baseline.iterdir()).read_text())["results"][0])
    assert saved.timeline and all(r.hdr_histogram for r in saved.timeline)

    delay_file.write_text("5ms")
    result = pytester.runpytest("-p", "no:cacheprovider", f"--nhbench-compare={baseline}",
                                "--nhbench-compare-stat=p50,mean")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "load 1 of 1: http://127.0.0.1:*/ at 200 rps: regressed against the baseline in *",
        # (fnmatch reads [...] as a set of characters: ? stands for each bracket)
        "  p50: regressed, +*% ?+*%, +*%? (95% confidence interval; --nhbench-compare-stat)",
        "  mean: regressed, +*% ?+*%, +*%? (95% confidence interval; --nhbench-compare-stat)",
        "1 baseline run against 1 candidate run; circular block bootstrap*",
        "*test_load*REGRESSED: p50 regressed +*% ?+*%, +*%?; mean regressed*",
    ])

    # Without --nhbench-compare-stat the same comparison passes (no limit given).
    result = pytester.runpytest("-p", "no:cacheprovider", f"--nhbench-compare={baseline}")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_load*ok"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nhbench-compare-stat=p99"], "--nhbench-compare-stat: needs --nhbench-compare DIR"),
        (["--nhbench-compare=.", "--nhbench-compare-stat=p99,p42"],
         "p42 is not a compared statistic (one of p50, p90, p99, p99.9, mean, rate, "
         "error_rate, or all)"),
        (["--nhbench-duration-scale=0"], "--nhbench-duration-scale: must be a finite number > 0"),
        (["--nhbench-duration-scale=fast"], "--nhbench-duration-scale: must be a finite number"),
        (["--nhbench-compare-fail=p99:10%"], "--nhbench-compare-fail: needs --nhbench-compare DIR"),
        (["--nhbench-compare=.", "--nhbench-compare-fail=p99"], "expected METRIC:LIMIT"),
        (["--nhbench-compare=.", "--nhbench-compare-fail=p99:soon"], "must be a duration (1ms)"),
        (["--nhbench-compare=.", "--nhbench-compare-fail=rps:-5%"], "must be a number or"),
        (["--nhbench-compare=.", "--nhbench-compare-fail=latency:10%"], "unknown metric 'latency'"),
        (["--nhbench-compare=.", "--nhbench-compare-fail=benchmark.http_5xx:1"],
         "a counter is an SLO rule"),
        (["--nhbench-compare=missing-dir"], "--nhbench-compare: 'missing-dir' is not a directory"),
    ],
)
def test_bad_options_are_one_line_usage_errors(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1 and message in errors[0], result.stderr.str()


def test_results_are_junit_properties(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.nhbench_slo("p99<1ns", "errors==0")
        def test_breach(nhbench_server, nhbench_run):
            nhbench_run(nhbench_server().url, rps=50, duration="0.5s")
        """
    )
    xml = tmp_path / "junit.xml"
    result = pytester.runpytest("-p", "no:cacheprovider", f"--junitxml={xml}")
    result.assert_outcomes(failed=1)
    [case] = ET.parse(xml).getroot().iter("testcase")
    properties = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert properties["nhbench.0.requested_rps"] == "50.0"
    assert properties["nhbench.0.requests"] == "25"
    assert properties["nhbench.0.errors"] == "0"
    assert float(properties["nhbench.0.p99"] or 0) > 0
    assert properties["nhbench.0.slo"] == "fail"
    assert (properties["nhbench.0.slo.p99<1ns"] or "").startswith("fail (")
    assert properties["nhbench.0.slo.errors==0"] == "pass (0)"
    failure = case.find("failure")
    assert failure is not None and "p99<1ns" in (failure.get("message") or "")


def test_a_grouped_load_shows_its_groups(pytester: pytest.Pytester, tmp_path: Path) -> None:
    # Two servers behind a round robin, grouped by the header each answers: the summary has a
    # line of the load's groups (name, requests, share, p99) and the JUnit XML its figures;
    # the marker's group rule reads one of them.
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.nhbench_slo("group:alpha:errors==0")
        def test_grouped(nhbench_server, nhbench_run):
            a = nhbench_server(response_headers={"x-served-by": "alpha"})
            b = nhbench_server(response_headers={"x-served-by": "beta"})
            nhbench_run(None, multi_target_endpoint=[f"127.0.0.1:{a.address[1]}",
                                                     f"127.0.0.1:{b.address[1]}"],
                        multi_target_path="/", connections=2, requests=40, rps=100,
                        group_by="header:x-served-by")
        """
    )
    xml = tmp_path / "junit.xml"
    result = pytester.runpytest("-p", "no:cacheprovider", f"--junitxml={xml}")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "*= nhbench =*",
        "test_a_grouped_load_shows_its_groups.py::test_grouped: groups by header:x-served-by: "
        "alpha 20 (50%) p99 *, beta 20 (50%) p99 *",
        "*a group's p99: its request_to_response",
    ])
    [case] = ET.parse(xml).getroot().iter("testcase")
    properties = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert properties["nhbench.0.groups.by"] == "header:x-served-by"
    assert properties["nhbench.0.group.alpha.requests"] == "20"
    assert properties["nhbench.0.group.beta.errors"] == "0"
    assert float(properties["nhbench.0.group.beta.p99"] or 0) > 0


def test_server_fixtures(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import socket

        SEEN = []

        def test_function_scope(nhbench_server):
            first, second = nhbench_server(), nhbench_server(response_body_size=7)
            assert first.running and second.running and first.url != second.url
            SEEN.append(first)

        def test_stopped_after_the_test():
            assert not SEEN[0].running

        def test_session_scope_a(nhbench_server_session):
            SEEN.append(nhbench_server_session(response_body_size=3))
            assert nhbench_server_session(response_body_size=3) is SEEN[-1]

        def test_session_scope_b(nhbench_server_session):
            assert nhbench_server_session(response_body_size=3) is SEEN[-1]
            assert SEEN[-1].running
        """
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=4)


def test_loading_the_plugin_imports_no_core_and_breaks_no_plain_suite(tmp_path: Path) -> None:
    # A fresh interpreter, as pytest starts in any environment where nhbench is installed: a
    # suite that does not use the plugin (strict markers, warnings as errors) runs as before,
    # and neither the C core nor the sweep side is imported.
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    script = (
        "import sys, pytest\n"
        # The one warning an editable (development) install of nhbench gives; see the
        # filterwarnings of pyproject.toml. A wheel install has no such module.
        "EDITABLE = ('ignore:Module already imported so cannot be rewritten; '\n"
        "            '_editable_skbc_nhbench:pytest.PytestAssertRewriteWarning')\n"
        f"code = pytest.main([{str(tmp_path)!r}, '-q', '-p', 'no:cacheprovider',\n"
        "                    '--strict-markers', '-W', 'error', '-W', EDITABLE])\n"
        "heavy = [m for m in ('nhbench._core', 'nhbench.sweep', 'nhbench.campaign', 'paramiko',\n"
        "         'rich', 'pandas', 'jinja2') if m in sys.modules]\n"
        "print('PLUGIN', 'nhbench.testing._plugin' in sys.modules, 'HEAVY', heavy)\n"
        "sys.exit(int(code))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PLUGIN True HEAVY []" in proc.stdout, proc.stdout


def test_hostile_files_in_the_save_and_compare_directories(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """A link planted in a shared save directory is not written through, and a baseline
    that is a FIFO, /dev/zero (through a link) or nested past the parser fails its test in
    one line instead of hanging pytest or growing without bound."""
    pytester.makepyfile(
        test_h="""
        def test_a(nhbench_server, nhbench_run):
            nhbench_run(nhbench_server().url, rps=20, duration="0.3s")
        """
    )
    name = file_name("test_h.py::test_a")
    save = tmp_path / "save"
    save.mkdir()
    victim = tmp_path / "victim.conf"
    victim.write_text("keep me\n")
    (save / name).symlink_to(victim)
    result = pytester.runpytest("-p", "no:cacheprovider", f"--nhbench-save={save}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*--nhbench-save: *is a symbolic link; not writing through it*"])
    assert victim.read_text() == "keep me\n"

    baselines = {
        "fifo": ("is a FIFO (named pipe), not a regular file", None),
        "zero": ("is a character device, not a regular file", Path("/dev/zero")),
        "deep": ("nested too deeply", None),
    }
    for kind, (message, target) in baselines.items():
        directory = tmp_path / f"compare-{kind}"
        directory.mkdir()
        path = directory / name
        if kind == "fifo":
            os.mkfifo(path)
        elif target is not None:
            path.symlink_to(target)
        else:
            path.write_text("[" * 50_000 + "]" * 50_000)
        result = pytester.runpytest("-p", "no:cacheprovider", f"--nhbench-compare={directory}",
                                    "--nhbench-compare-fail=p99:10%")
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines([f"*--nhbench-compare: cannot read *{message}*"])
