"""Fortio's text report and JSON result for ``nhbench fortio load`` (nhbench.compat's
_fortio_output), judged by real Fortio 1.66.5 on the same runs.

Real Fortio and nhbench load the same test server (HTTP with 503s, gRPC ping, tcp:// and
udp:// echo); then: our JSON has real Fortio's fields in Fortio's order with the same JSON
types; Fortio's own Go types decode it strictly (tests/support/fortio_decode, built offline
from the module cache); ``fortio report`` lists and serves it and Fortio's chart code (its
fortio_chart.js, run by node) draws it; the text report has real Fortio's line structure
(numbers masked) and its ``# target`` and ``Code`` lines carry our exact values and counts;
``nhbench.load_result`` reads the JSON back to the same counts.

Skipped, with the reason, where fortio, go (or Fortio's module in its cache) or node is
absent.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.peers import build_fortio_decoder
from support.peers import fortio_report as serve_fortio_report

import nhbench
from nhbench.compat._fortio_output import (
    FortioRun,
    _fortio_bucket,
    fortio_banner,
    fortio_id,
    fortio_json,
    fortio_json_text,
    fortio_report,
)
from nhbench.compat._gofmt import go_duration, go_f, go_g, go_json_float

FORTIO = shutil.which("fortio") or "/root/go/bin/fortio"
NODE = shutil.which("node") or "/usr/bin/node"
LATENCY = "benchmark_http_client.request_to_response"
PERCENTILES = (50.0, 75.0, 90.0, 99.0, 99.9)

needs_fortio = pytest.mark.skipif(not os.access(FORTIO, os.X_OK), reason="fortio is not "
                                  "installed (go install fortio.org/fortio@v1.66.5)")
needs_node = pytest.mark.skipif(not os.access(NODE, os.X_OK), reason="node is not installed")

# What scripts that read Fortio's text take from it: the percentile lines and the status
# code lines (Fortio's repository has no parser of its own; these follow its Printf layouts,
# "# target %g%% %.6g" and "Code %3d : %d (%.1f %%)").
TARGET = re.compile(r"^# target (\d+(?:\.\d+)?)% (-?[\d.]+(?:e[+-]\d+)?)$", re.M)
CODE = re.compile(r"^Code\s+(-?\d+)\s*:\s*(\d+)\s+\((\d+\.\d) %\)$", re.M)


# ---- Go's formatting, against values Go 1.26 printed -------------------------------------------

@pytest.mark.parametrize(("value", "expected"), [
    # value: %g | %.8g | %.4g | %.9g | %.6g | %.2f | json.Marshal | time.Duration(int64)
    (0.0, "0|0|0|0|0|0.00|0|0s"),
    (75.0, "75|75|75|75|75|75.00|75|75ns"),
    (1e-07, "1e-07|1e-07|1e-07|1e-07|1e-07|0.00|1e-7|0s"),
    (0.000132131, "0.000132131|0.000132131|0.0001321|0.000132131|0.000132131|0.00|"
                  "0.000132131|0s"),
    (49.95421082141424, "49.95421082141424|49.954211|49.95|49.9542108|49.9542|49.95|"
                        "49.95421082141424|49ns"),
    (1234567.0, "1.234567e+06|1234567|1.235e+06|1234567|1.23457e+06|1234567.00|1234567|"
                "1.234567ms"),
    (123456.0, "123456|123456|1.235e+05|123456|123456|123456.00|123456|123.456µs"),
    (1e21, "1e+21|1e+21|1e+21|1e+21|1e+21|1000000000000000000000.00|1e+21|"),
    (1000916623.0, "1.000916623e+09|1.0009166e+09|1.001e+09|1.00091662e+09|1.00092e+09|"
                   "1000916623.00|1000916623|1.000916623s"),
    (90e9, "9e+10|9e+10|9e+10|9e+10|9e+10|90000000000.00|90000000000|1m30s"),
    (3600e9, "3.6e+12|3.6e+12|3.6e+12|3.6e+12|3.6e+12|3600000000000.00|3600000000000|1h0m0s"),
    (0.00005, "5e-05|5e-05|5e-05|5e-05|5e-05|0.00|0.00005|0s"),
])
def test_numbers_print_as_go_prints_them(value: float, expected: str) -> None:
    ours = [go_g(value), go_g(value, 8), go_g(value, 4), go_g(value, 9), go_g(value, 6),
            go_f(value, 2), go_json_float(value)]
    ours.append(go_duration(int(value)) if value < 2**63 else "")
    assert "|".join(ours) == expected


@pytest.mark.parametrize(("value", "divider", "offset", "bucket"), [
    (0.0, 0.001, 0.0, 0),          # at or below 0: the first bucket
    (0.0005, 0.001, 0.0, 1),       # (0, 1]
    (0.001, 0.001, 0.0, 1),        # exactly on an end: that bucket, not the next
    (0.0010001, 0.001, 0.0, 2),
    (0.013, 0.001, 0.0, 13),       # (12, 14]
    (0.0021, 0.0001, 0.0, 17),     # 21 units: (20, 25], the 17th end
    (150.0, 0.001, 0.0, 56),       # past 100000 units: the last bucket
    (0.006, 0.001, 0.005, 1),      # the offset is taken off first
])
def test_values_land_in_fortios_buckets(value, divider, offset, bucket) -> None:
    assert _fortio_bucket(value, offset, divider) == bucket


# ---- the same runs by Fortio and by nhbench ----------------------------------------------------

def fortio_load(*args: str, json_file: Path) -> str:
    """Real Fortio's report text (stderr, its log lines left out)."""
    done = subprocess.run([FORTIO, "load", "-json", str(json_file), *args],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return "".join(line for line in done.stderr.splitlines(keepends=True)
                   if not line.startswith('{"ts"'))


class Case:
    def __init__(self, result: nhbench.Result, run: FortioRun, fortio_text: str,
                 fortio_file: Path, directory: Path, status: dict[str, int]) -> None:
        self.result, self.run, self.fortio_text = result, run, fortio_text
        self.fortio = json.loads(fortio_file.read_text())
        self.status = status
        self.text = fortio_banner(run) + fortio_report(result, run)
        self.document = fortio_json(result, run)
        self.file = directory / f"{fortio_id(result, run)}.json"
        self.file.write_text(fortio_json_text(result, run))


KINDS = ("http", "grpc", "tcp", "udp")


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> Iterator[dict[str, Case]]:
    if not os.access(FORTIO, os.X_OK):
        pytest.skip("fortio is not installed (go install fortio.org/fortio@v1.66.5)")
    directory = tmp_path_factory.mktemp("fortio-out")
    out: dict[str, Case] = {}
    with nhbench.TestServer(tcp_echo=["127.0.0.1:0"], udp_echo=["127.0.0.1:0"]) as server:
        host, port = server.address
        tcp = "tcp://{}:{}".format(*server.tcp_echo_addresses[0])
        udp = "udp://{}:{}".format(*server.udp_echo_addresses[0])
        url = f"http://{host}:{port}/?status=503:30"
        common = dict(percentiles=PERCENTILES, resolution=0.001)
        plans = {
            # The seed's resolution: -r 0.0001 (buckets of 0.1 ms and up).
            "http": (["-qps", "40", "-t", "1s", "-c", "2", "-r", "0.0001",
                      "-allow-initial-errors", url],
                     dict(uri=url, rps=40, duration=1.0, connections=2),
                     FortioRun("HTTP", url, f"{url[7:]} , host", 40, 1.0, 0, 2, warmup=2,
                               percentiles=PERCENTILES, resolution=0.0001)),
            "grpc": (["-qps", "40", "-n", "20", "-c", "2", "-grpc", "-ping", f"{host}:{port}"],
                     dict(uri=f"http://{host}:{port}", grpc=True, ping=True, rps=40,
                          requests=20, connections=2),
                     FortioRun("GRPC Ping", f"{host}:{port}", f"{host}:{port} , host", 40,
                               None, 20, 2, **common)),
            "tcp": (["-qps", "40", "-n", "20", "-c", "2", tcp],
                    dict(uri=tcp, rps=40, requests=20, connections=2),
                    FortioRun("TCP", tcp, f"{tcp} , host", 40, None, 20, 2, **common)),
            "udp": (["-qps", "40", "-n", "20", "-c", "2", udp],
                    dict(uri=udp, rps=40, requests=20, connections=2),
                    FortioRun("UDP", udp, f"{udp} , host", 40, None, 20, 2, **common)),
        }
        for kind, (fortio_args, options, run) in plans.items():
            fortio_file = directory / f"fortio-{kind}.data"
            text = fortio_load(*fortio_args, json_file=fortio_file)
            before = dict(server.stats()["status"])
            result = nhbench.run(**options, no_default_failure_predicates=True,
                                 allow_no_success=True)
            after = server.stats()["status"]
            status = {code: int(n) - int(before.get(code, 0)) for code, n in after.items()}
            out[kind] = Case(result, run, text, fortio_file, directory, status)
    yield out


def json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


# Fields nhbench has no data for: null where Fortio writes per-connection socket counts and
# its connection time histogram.
NULL_FIELDS = {"Sockets", "ConnectionStats"}


def compare_shape(ours: Any, theirs: Any, path: str) -> None:
    if isinstance(theirs, dict) and isinstance(ours, dict):
        if path.endswith(("RetCodes", "IPCountMap", "Metadata")):
            return  # maps: their keys are data
        assert list(ours) == list(theirs), path
        for key in theirs:
            compare_shape(ours[key], theirs[key], f"{path}.{key}")
    elif isinstance(theirs, list) and isinstance(ours, list):
        for item in ours if theirs else ():  # lists of buckets: each has Fortio's shape
            compare_shape(item, theirs[0], f"{path}[]")
    elif path.rsplit(".", 1)[-1] not in NULL_FIELDS or ours is not None:
        assert json_kind(ours) == json_kind(theirs), path


@needs_fortio
@pytest.mark.parametrize("kind", KINDS)
def test_json_has_fortios_fields_in_fortios_order(cases, kind) -> None:
    case = cases[kind]
    assert list(case.document) == list(case.fortio)
    compare_shape(case.document, case.fortio, kind)
    assert case.document["RunType"] == case.fortio["RunType"]


@needs_fortio
@pytest.mark.parametrize("kind", KINDS)
def test_json_counts_are_the_runs(cases, kind) -> None:
    case = cases[kind]
    latency = case.result.stat(LATENCY)
    histogram = case.document["DurationHistogram"]
    assert histogram["Count"] == latency.count > 0
    assert sum(bucket["Count"] for bucket in histogram["Data"]) == latency.count
    assert histogram["Data"][0]["Start"] == latency.min
    assert histogram["Data"][-1]["End"] == latency.max
    assert histogram["Data"][-1]["Percent"] == 100
    # Every bucket ends on one of Fortio's ends for -r (the last on the max).
    ends = {case.run.resolution * end for end in
            (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16, 18, 20, 25, 30, 35, 40, 45, 50,
             60, 70, 80, 90, 100, 120, 140, 160, 180, 200, 250, 300, 350, 400, 450, 500, 600,
             700, 800, 900, 1000, 2000, 3000, 4000, 5000, 7500, 10000, 20000, 30000, 40000,
             50000, 75000, 100000)}
    assert {bucket["End"] for bucket in histogram["Data"][:-1]} <= ends
    for bucket in histogram["Data"][1:]:  # the table's end just below the bucket's end
        assert bucket["Start"] == max(end for end in ends if end < bucket["End"])
    assert [p["Percentile"] for p in histogram["Percentiles"]] == list(PERCENTILES)
    for point in histogram["Percentiles"]:
        assert point["Value"] == latency.p(point["Percentile"])
    codes = case.document["RetCodes"]
    if kind == "http":
        assert codes == {code: n for code, n in case.status.items() if n}
        errors = case.document["ErrorsDurationHistogram"]
        assert errors["Count"] == case.status.get("503", 0) > 0
        assert case.document["SocketCount"] == case.result.counters["upstream_cx_total"]
    elif kind == "grpc":
        assert codes == {"SERVING": 20}
    else:
        assert codes == {"OK": 20}
        assert case.document["BytesSent"] == case.result.counters["upstream_cx_tx_bytes_total"]


@pytest.mark.parametrize("kind", KINDS)
def test_fortios_go_types_decode_it_strictly(cases, kind, decoder) -> None:
    case = cases[kind]
    done = subprocess.run([str(decoder), str(case.file)], capture_output=True, text=True,
                          check=True, timeout=60)
    line = json.loads(done.stdout)
    assert "Error" not in line, line["Error"]
    assert line["Type"] == case.document["RunType"]
    assert line["Count"] == line["Buckets"] == case.document["DurationHistogram"]["Count"]
    assert line["Errors"] == case.document["ErrorsDurationHistogram"]["Count"]
    assert line["RetCodes"] == case.document["RetCodes"]


@pytest.fixture(scope="module")
def decoder(tmp_path_factory) -> Path:
    built = build_fortio_decoder(tmp_path_factory.mktemp("fortio-decode"))
    if built is None:
        pytest.skip("go or fortio.org/fortio@v1.66.5 (in the Go module cache) is absent")
    return built


@pytest.mark.parametrize(("offset", "divider"), [(0.0, 0.001), (0.0, 0.0001), (0.005, 0.001),
                                                 (0.0, 1e-05)])
def test_our_buckets_are_fortios(decoder, offset, divider) -> None:
    """Fortio's own stats.Histogram places the same values, bucket ends included, in the same
    buckets as ours."""
    values = [offset + divider * end * scale for end in (0, 1, 5, 11, 12, 13, 20, 45, 100, 999,
                                                         1000, 1001, 7500, 99999, 100000)
              for scale in (1.0, 0.999, 1.001)] + [0.0, 1e-9, 0.00123456, 0.0421, 2.5, 61.0]
    done = subprocess.run([str(decoder), "-buckets", repr(offset), repr(divider),
                           *map(repr, values)], capture_output=True, text=True, check=True,
                          timeout=60)
    assert [_fortio_bucket(v, offset, divider) for v in values] == json.loads(done.stdout)


def test_the_decoder_refuses_what_fortio_would(cases, decoder, tmp_path) -> None:
    """The judge can fail: an unknown field, and a count written as a float."""
    document = dict(cases["http"].document)
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({**document, "Extra": 1}))
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({**document, "SocketCount": 1.5}))
    done = subprocess.run([str(decoder), str(unknown), str(wrong)], capture_output=True,
                          text=True, check=True, timeout=60)
    first, second = (json.loads(line) for line in done.stdout.splitlines())
    assert first["Error"] == 'json: unknown field "Extra"'
    assert "SocketCount" in second["Error"] and "int64" in second["Error"]


# ---- fortio report --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def report(cases) -> Iterator[str]:
    with serve_fortio_report(FORTIO, cases["http"].file.parent) as url:
        yield url


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:
        body: bytes = response.read()
    return body


# Fortio's chart code as the browse page runs it: its title and chart data for a result.
CHART = """
const fs = require('fs'), vm = require('vm');
// Chart.js itself is not needed to build the data; the file sets one default on it.
const context = {Math, Date, console, Chart: {defaults: {global: {}}}};
vm.createContext(context);
vm.runInContext(fs.readFileSync(process.argv[2], 'utf8'), context);
const res = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));
context.res = res;
const out = vm.runInContext('fortioResultToJsChartData(res)', context);
console.log(JSON.stringify(out));
"""


@needs_fortio
@needs_node
@pytest.mark.parametrize("kind", KINDS)
def test_fortio_report_lists_serves_and_draws_it(cases, report, kind, tmp_path) -> None:
    case = cases[kind]
    page = get(report).decode()
    assert f">{case.file.stem}<" in page or f'"{case.file.stem}"' in page
    served = get(f"{report}data/{case.file.name}")
    assert served == case.file.read_bytes()
    script = re.search(r'src="([^"]*fortio_chart\.js)"', page)
    assert script, "the browse page loads no fortio_chart.js"
    chart_js = tmp_path / "fortio_chart.js"
    chart_js.write_bytes(get(report.rstrip("/") + script.group(1)
                             if script.group(1).startswith("/") else report + script.group(1)))
    (tmp_path / "chart.js").write_text(CHART)
    done = subprocess.run([NODE, str(tmp_path / "chart.js"), str(chart_js), str(case.file)],
                          capture_output=True, text=True, check=True, timeout=60)
    chart = json.loads(done.stdout)
    document = case.document
    where = document.get("URL") or document["Destination"]
    assert chart["title"][0].startswith(f"{document['Labels']} - {where} - ")
    count = document["DurationHistogram"]["Count"]
    errors = document["ErrorsDurationHistogram"]["Count"]
    assert f" {document['NumThreads']} connections for {document['RequestedDuration']} " in (
        chart["title"][1])
    assert chart["title"][1].endswith(
        "no error" if not errors else f"{round(100 * errors / count, 2):g}% errors")
    bars = chart["dataH"][::2]  # two points a bar: start and end
    assert sum(point["y"] for point in bars if point["y"]) == count
    assert chart["dataP"][-1]["y"] == 100


# ---- the text ----------------------------------------------------------------------------------

NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[+-]\d+)?")


def structure(text: str, *, fortio: bool) -> list[str]:
    """The report's lines with numbers masked; bucket rows after the first of a table, the
    lines nhbench leaves out (Fortio's) or adds (ours) dropped."""
    lines, skipping = [], False
    for line in text.splitlines():
        if fortio:
            if line.startswith("Connection time histogram"):
                skipping = True
            if line.startswith("Sockets used"):
                skipping = False
            if skipping or line.startswith(("Sleep times", "# Socket and IP used", "[",
                                            "Successfully wrote")):
                continue
        elif line.startswith("# nhbench"):
            continue
        if line.startswith("> "):
            continue
        line = re.sub(r"^Fortio \S+ running", "Fortio V running", line)
        lines.append(NUMBER.sub("N", line))
    return lines


@needs_fortio
@pytest.mark.parametrize("kind", KINDS)
def test_text_has_fortios_line_structure(cases, kind) -> None:
    case = cases[kind]
    theirs = structure(case.fortio_text, fortio=True)
    ours = structure(case.text, fortio=False)
    if kind == "http":
        assert "Code N : N (N %)" in ours
    assert ours == theirs


@needs_fortio
def test_target_and_code_lines_carry_our_numbers(cases) -> None:
    case = cases["http"]
    latency = case.result.stat(LATENCY)
    targets = TARGET.findall(case.text)
    # The first five are the function time; the error cases' follow.
    assert [float(p) for p, _ in targets[:5]] == list(PERCENTILES)
    for percent, value in targets[:5]:
        assert float(value) == pytest.approx(latency.p(float(percent)), rel=1e-5)
    codes = {code: int(n) for code, n, _ in CODE.findall(case.text)}
    assert codes == {code: n for code, n in case.status.items() if n}
    total = sum(codes.values())
    for _code, n, percent in CODE.findall(case.text):
        assert float(percent) == pytest.approx(100 * int(n) / total, abs=0.05)
    assert f"All done {latency.count} calls (plus 2 warmup) " in case.text
    # The corrected latency is there, where no Fortio parser looks.
    corrected = case.result.stat("benchmark_http_client.scheduled_to_response")
    assert f"# nhbench corrected p99 {go_g(corrected.p(99), 6)}\n" in case.text


def test_socket_failures_are_code_minus_one(closed_port) -> None:
    result = nhbench.run(f"http://127.0.0.1:{closed_port}/", requests=6, rps=0,
                         connections=2, no_default_failure_predicates=True,
                         allow_no_success=True)
    failed = result.error_count
    assert failed > 0
    run = FortioRun("HTTP", f"http://127.0.0.1:{closed_port}/", "refused", 0, None, 6, 2,
                    PERCENTILES, 0.001)
    text = fortio_report(result, run)
    assert CODE.findall(text) == [("-1", str(failed), "100.0")]
    assert "Aggregated Function Time : no data\n" in text
    assert fortio_json(result, run)["RetCodes"] == {"-1": failed}


# ---- reading it back -------------------------------------------------------------------------

@needs_fortio
def test_load_result_reads_our_json_back(cases) -> None:
    case = cases["http"]
    loaded = nhbench.load_result(case.file)
    assert loaded.stat(LATENCY).count == case.result.stat(LATENCY).count
    for name in ("benchmark.http_200", "benchmark.http_503", "benchmark.http_2xx",
                 "benchmark.http_5xx", "upstream_cx_total"):
        assert loaded.counters[name] == case.result.counters[name], name
    assert loaded.stat(LATENCY).p(99) == pytest.approx(case.result.stat(LATENCY).p(99))
    assert loaded.options.uri == case.run.url


def test_a_field_fortio_lacks_is_refused() -> None:
    run = FortioRun("TCP", "tcp://127.0.0.1:1", "", 0, None, 1, 1, PERCENTILES, 0.001,
                    json_fields={"FollowRedirects": True})
    with nhbench.TestServer(tcp_echo=["127.0.0.1:0"]) as server:
        tcp = "tcp://{}:{}".format(*server.tcp_echo_addresses[0])
        result = nhbench.run(tcp, requests=2, rps=0, connections=1)
    with pytest.raises(ValueError, match="^FollowRedirects: not a field of Fortio's TCP"):
        fortio_json(result, run)


def test_sockets_and_bytes_count_the_warm_up_connections(server) -> None:
    """Fortio counts every socket a connection used, its warm-up call's included (and an
    echo client's bytes over its life); nhbench keeps the warm-up's counters apart."""
    result = nhbench.run(server.url, rps=40, duration=0.5, connections=2,
                         prefetch_connections=True, simple_warmup=True)
    opened = server.stats()["connections_total"]
    assert result.warmup is not None and opened == 2
    run = FortioRun("HTTP", server.url, "", 40, 0.5, 0, 2, PERCENTILES, 0.001, warmup=2)
    assert f"Sockets used: {opened} (for perfect keepalive, would be 2)\n" in (
        fortio_report(result, run))
    assert fortio_json(result, run)["SocketCount"] == opened


@needs_fortio
@pytest.mark.parametrize(("args", "qps", "duration", "exactly", "connections"), [
    (["-qps", "40", "-t", "300ms", "-c", "2"], 40, 0.3, 0, 2),
    (["-qps", "0", "-n", "7", "-c", "2"], 0, None, 7, 2),
    (["-qps", "-1", "-t", "300ms", "-c", "3"], -1, 0.3, 0, 3),
    (["-qps", "10", "-n", "3", "-c", "4"], 10, None, 3, 4),  # Fortio lowers -c to n/2
    (["-qps", "100", "-t", "30ms", "-c", "2"], 100, 0.03, 0, 2),  # 3 calls: one thread
    (["-qps", "12.5", "-n", "9", "-c", "2"], 12.5, None, 9, 2),  # one call left over
])
def test_banner_is_fortios(server, tmp_path, args, qps, duration, exactly, connections) -> None:
    """The lines before the run are a function of the command line: byte for byte Fortio's
    (its version aside), thread lowering and left-over calls included."""
    text = fortio_load(*args, server.url, json_file=tmp_path / "f.json")
    theirs = text.splitlines()[:2]
    run = FortioRun("HTTP", server.url, "", qps, duration, exactly, connections, PERCENTILES,
                    0.001)
    ours = fortio_banner(run).splitlines()
    assert [re.sub(r"^Fortio \S+", "Fortio V", line) for line in ours] == [
        re.sub(r"^Fortio \S+", "Fortio V", line) for line in theirs]
    assert ours[0].startswith("Fortio nhbench-")
    fortio = json.loads((tmp_path / "f.json").read_text())
    result = nhbench.run(server.url, requests=exactly or 2, rps=0, connections=1)
    document = fortio_json(result, run)
    for key in ("RequestedQPS", "RequestedDuration", "NumThreads", "Exactly"):
        assert document[key] == fortio[key], key


@needs_fortio
@pytest.mark.parametrize("qps", ["8", "0"])
def test_banner_until_interrupted_is_fortios(server, qps, tmp_path) -> None:
    """-t 0: Fortio runs until ^C; its banner says so (read from a run stopped by SIGINT),
    and so does its JSON's RequestedDuration."""
    process = subprocess.Popen([FORTIO, "load", "-qps", qps, "-t", "0", "-c", "2", "-json",
                                str(tmp_path / "f.json"), server.url],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        theirs = []
        for line in process.stderr:
            if not line.startswith('{"ts"'):
                theirs.append(re.sub(r"^Fortio \S+", "Fortio V", line.rstrip("\n")))
            if line.startswith("Starting at"):
                break
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    run = FortioRun("HTTP", server.url, "", float(qps), None, 0, 2, PERCENTILES, 0.001)
    ours = [re.sub(r"^Fortio \S+", "Fortio V", line)
            for line in fortio_banner(run).splitlines()]
    assert ours == theirs
    fortio = json.loads((tmp_path / "f.json").read_text())
    result = nhbench.run(server.url, requests=2, rps=0, connections=1)
    document = fortio_json(result, run)
    for key in ("RequestedQPS", "RequestedDuration", "NumThreads"):
        assert document[key] == fortio[key], key


@pytest.mark.parametrize("kind", KINDS)
def test_json_text_is_what_fortios_marshal_writes(cases, decoder, kind) -> None:
    """Our file, decoded into Fortio's types and written back by Go's json.MarshalIndent
    (what Fortio's -json does), is the same bytes: Go's number, time and string forms."""
    case = cases[kind]
    done = subprocess.run([str(decoder), "-marshal", str(case.file)], capture_output=True,
                          text=True, check=True, timeout=60)
    assert done.stdout == case.file.read_text()


@needs_fortio
@pytest.mark.parametrize("qps", ["20", "0"])
def test_banner_names_the_access_logger_as_fortio(server, tmp_path, qps) -> None:
    log = tmp_path / "access.json"
    text = fortio_load("-qps", qps, "-n", "4", "-c", "2", "-access-log-file", str(log),
                       server.url, json_file=tmp_path / "f.json")
    info = json.loads((tmp_path / "f.json").read_text())["AccessLoggerInfo"]
    assert info == f"mode json to {log}"
    run = FortioRun("HTTP", server.url, "", float(qps), None, 4, 2, PERCENTILES, 0.001,
                    json_fields={"AccessLoggerInfo": info})
    assert fortio_banner(run).splitlines()[1] == text.splitlines()[1]
