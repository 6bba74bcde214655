"""Nighthawk's yaml, dotted, csv and prometheus output formats (nhbench.outputs).

Three kinds of evidence: Nighthawk's own goldens (its test input, json.gold, rendered in each
format equals its golden byte for byte); a hand-built document whose outputs are written
out by hand below (each number derived in the comments, not by calling the formatters); and
a real run against the test server, rendered in each format and read back by that format's
own consumer (PyYAML, the csv module, prometheus_client's parser). The yaml emitter is also
checked against yaml-cpp itself, the library Nighthawk's yaml comes from.
"""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from nhbench.outputs import FORMATS
from nhbench.outputs._csv import format_csv
from nhbench.outputs._dotted import format_dotted
from nhbench.outputs._nhfields import duration_micros, fmt_double, protobuf_double
from nhbench.outputs._prometheus import format_prometheus
from nhbench.outputs._yaml import format_yaml

DATA = Path(__file__).parent / "data" / "nighthawk"
YAMLCPP_SOURCE = Path(__file__).parent / "support" / "yamlcpp_emit.cc"

FORMATTERS = {
    "yaml": format_yaml,
    "dotted": format_dotted,
    "csv": format_csv,
    "prometheus": format_prometheus,
}


def _golden(name: str) -> str:
    # Nighthawk's test replaces the version placeholders of its goldens with the build's
    # version; json.gold, the input, says 0.3.0.
    text = (DATA / f"output_formatter.{name}.gold").read_text()
    for key, value in (("major", "0"), ("minor", "3"), ("patch", "0")):
        text = text.replace(f"@version_{key}@", value)
    return text


# (a) Nighthawk's goldens ---------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FORMATTERS))
def test_nighthawk_golden(name: str) -> None:
    document = json.loads((DATA / "output_formatter.json.gold").read_text())
    assert FORMATTERS[name](document) == _golden(name)


def test_formats_are_registered() -> None:
    for name in FORMATTERS:
        assert name in FORMATS


# Number rendering, value by value ------------------------------------------------------------


@pytest.mark.parametrize("value, text", [
    # fmt's "{}": shortest round trip, no ".0", exponent below 1e-4 and from 1e16.
    (15.5, "15.5"), (780.0, "780"), (1.1180339887498949, "1.118033988749895"),
    (1e15, "1000000000000000"), (1e16, "1e+16"), (0.0001, "0.0001"), (1e-05, "1e-05"),
    (-0.0, "-0"), (math.inf, "inf"), (math.nan, "nan"),
])
def test_fmt_double(value: float, text: str) -> None:
    assert fmt_double(value) == text


@pytest.mark.parametrize("value, text", [
    # protobuf's SimpleDtoa: %.15g when it reads back, else %.17g.
    (0.1, "0.1"), (0.3 - 0.2, "0.099999999999999978"), (1.1180339887498949, "1.1180339887498949"),
    (15.5, "15.5"), (1.0, "1"), (1e16, "1e+16"), (math.nan, "NaN"), (-math.inf, "-Infinity"),
])
def test_protobuf_double(value: float, text: str) -> None:
    assert protobuf_double(value) == text


@pytest.mark.parametrize("duration, micros", [
    ("0s", 0), ("0.000816497s", 816), ("1.000000999s", 1000000), ("1001.5s", 1001500000),
    ("-1.0000015s", -1000001), ("-0.5s", -500000), ("3s", 3000000),
])
def test_duration_micros_truncates_toward_zero(duration: str, micros: int) -> None:
    assert duration_micros(duration) == micros


@pytest.mark.parametrize("bad", ["1", "1.5", "s", "1.0000000001s", "+1s", "1e3s", 1.5])
def test_duration_rejects_what_proto3_json_does_not_write(bad: object) -> None:
    with pytest.raises(ValueError, match='^d: must be a Duration such as "0.002s"'):
        duration_micros(bad, "d")


# (b) A hand-built document -------------------------------------------------------------------

# Two workers and the global result. The latency statistic has five percentiles of which
# Nighthawk's picking (first at or above 0, .5, .75, .8, .9, .95, .99, .999, 1 and above the
# last one picked) keeps all five: 0, 0.5, then 0.9 for .75, 0.990625 for .8, 1 for .9. The
# size statistic's list 0, 0.8, 1 gives 0, then 0.8 for .5, then 1 for .75. Durations carry
# sub-microsecond digits that must be truncated, and the blocking statistic's 1001 s shows
# the csv's seconds-modulo-1000 quirk. worker_1 has a count as a JSON number and no other
# field at all, which must read as the proto's zeros.
_BLOCKING = {
    "id": "sequencer.blocking", "count": "2", "percentiles": [],
    "mean": "1001.5s", "pstdev": "0.5s", "min": "1001s", "max": "1002s",
}
HAND: dict[str, Any] = {
    "results": [
        {
            "name": "worker_0",
            "statistics": [_BLOCKING],
            "counters": [{"name": "upstream_rq_total", "value": "3"}],
            "execution_duration": "2s",
        },
        {
            "name": "worker_1",
            "statistics": [{"id": "sequencer.blocking", "count": 0}],
            "counters": [{"name": "upstream_rq_total", "value": 2}],
            "execution_duration": "2s",
        },
        {
            "name": "global",
            "statistics": [
                {
                    "id": "benchmark_http_client.request_to_response",
                    "count": "5",
                    "percentiles": [
                        {"percentile": 0, "count": "1", "duration": "0.001000999s"},
                        {"percentile": 0.5, "count": "3", "duration": "0.002000500s"},
                        {"percentile": 0.9, "count": "4", "duration": "0.004s"},
                        {"percentile": 0.990625, "count": "5", "duration": "0.0101s"},
                        {"percentile": 1, "count": "5", "duration": "0.0101s"},
                    ],
                    "mean": "0.0039s", "pstdev": "0.003383785s",
                    "min": "0.001000999s", "max": "0.0101s",
                },
                {
                    # Sizes 10, 10, 10, 10, 1000: mean 208, pstdev sqrt(156816) = 396.
                    "id": "benchmark_http_client.response_body_size",
                    "count": "5",
                    "percentiles": [
                        {"percentile": 0, "count": "1", "raw_value": 10},
                        {"percentile": 0.8, "count": "4", "raw_value": 10.9},
                        {"percentile": 1, "count": "5", "raw_value": 1000},
                    ],
                    "raw_mean": 208.0, "raw_pstdev": 396.0, "raw_min": "10", "raw_max": "1000",
                },
                _BLOCKING,
            ],
            "counters": [
                {"name": "benchmark.http_2xx", "value": "5"},
                {"name": "upstream_rq_total", "value": "5"},
            ],
            "execution_duration": "2s",
        },
    ],
}

_R2R = "global.benchmark_http_client.request_to_response"
_SIZE = "global.benchmark_http_client.response_body_size"
HAND_DOTTED = f"""\
worker_0.sequencer.blocking.samples: 2
worker_0.sequencer.blocking.mean: 1001500000
worker_0.sequencer.blocking.pstdev: 500000
worker_0.sequencer.blocking.min: 1001000000
worker_0.sequencer.blocking.max: 1002000000
worker_0.upstream_rq_total:3
worker_1.sequencer.blocking.samples: 0
worker_1.sequencer.blocking.mean: 0
worker_1.sequencer.blocking.pstdev: 0
worker_1.sequencer.blocking.min: 0
worker_1.sequencer.blocking.max: 0
worker_1.upstream_rq_total:2
{_R2R}.samples: 5
{_R2R}.mean: 3900
{_R2R}.pstdev: 3383
{_R2R}.min: 1000
{_R2R}.max: 10100
{_R2R}.permilles-0.count: 1
{_R2R}.permilles-0.microseconds: 1000
{_R2R}.permilles-500.count: 3
{_R2R}.permilles-500.microseconds: 2000
{_R2R}.permilles-900.count: 4
{_R2R}.permilles-900.microseconds: 4000
{_R2R}.permilles-991.count: 5
{_R2R}.permilles-991.microseconds: 10100
{_R2R}.permilles-1000.count: 5
{_R2R}.permilles-1000.microseconds: 10100
{_SIZE}.samples: 5
{_SIZE}.mean: 208
{_SIZE}.pstdev: 396
{_SIZE}.min: 10
{_SIZE}.max: 1000
{_SIZE}.permilles-0.count: 1
{_SIZE}.permilles-0.value: 10
{_SIZE}.permilles-800.count: 4
{_SIZE}.permilles-800.value: 10
{_SIZE}.permilles-1000.count: 5
{_SIZE}.permilles-1000.value: 1000
global.sequencer.blocking.samples: 2
global.sequencer.blocking.mean: 1001500000
global.sequencer.blocking.pstdev: 500000
global.sequencer.blocking.min: 1001000000
global.sequencer.blocking.max: 1002000000
global.benchmark.http_2xx:5
global.upstream_rq_total:5
"""

# Only the global result, its statistics with samples in document order; rates are 5 / 2 s.
HAND_CSV = """\
Nighthawk - A layer 7 protocol benchmarking tool.

Request start to response end (5 samples)
Min,Mean,Max,Pstdev
0s 001ms 000us,0s 003ms 900us,0s 010ms 100us,0s 003ms 383us
Percentile,Count,Value(microseconds),Value
0.5,3,2000,0s 002ms 000us
0.9,4,4000,0s 004ms 000us
0.990625,5,10100,0s 010ms 100us

Response body size in bytes (5 samples)
Min,Mean,Max,Pstdev
10,208,1000,396
Percentile,Count,Value(microseconds),Value
0.8,4,0,10

Blocking. Results are skewed when significant numbers are reported here. (2 samples)
Min,Mean,Max,Pstdev
1s 000ms 000us,1s 500ms 000us,2s 000ms 000us,0s 500ms 000us

Counter,Value,Per second
benchmark.http_2xx,5,2.50
upstream_rq_total,5,2.50

"""

# Families sorted by "<name> <type>" bytes ("2xx" before "client", " summary" before
# "_max"); sums are mean x count: 3900 x 5, 208 x 5, 1001500000 x 2.
_P2R = "nighthawk_benchmark_http_client_request_to_response"
_PSZ = "nighthawk_benchmark_http_client_response_body_size"
_PBL = "nighthawk_sequencer_blocking"
HAND_PROMETHEUS = f"""\
# TYPE nighthawk_benchmark_http_2xx counter
nighthawk_benchmark_http_2xx{{scope="global"}} 5
# TYPE {_P2R} summary
{_P2R}{{scope="global",quantile="0"}} 1000
{_P2R}{{scope="global",quantile="0.5"}} 2000
{_P2R}{{scope="global",quantile="0.9"}} 4000
{_P2R}{{scope="global",quantile="0.990625"}} 10100
{_P2R}{{scope="global",quantile="1"}} 10100
{_P2R}_count{{scope="global"}} 5
{_P2R}_sum{{scope="global"}} 19500
# TYPE {_P2R}_max counter
{_P2R}_max{{scope="global"}} 10100
# TYPE {_P2R}_mean counter
{_P2R}_mean{{scope="global"}} 3900
# TYPE {_P2R}_min counter
{_P2R}_min{{scope="global"}} 1000
# TYPE {_P2R}_pstdev counter
{_P2R}_pstdev{{scope="global"}} 3383
# TYPE {_PSZ} summary
{_PSZ}{{scope="global",quantile="0"}} 10
{_PSZ}{{scope="global",quantile="0.8"}} 10
{_PSZ}{{scope="global",quantile="1"}} 1000
{_PSZ}_count{{scope="global"}} 5
{_PSZ}_sum{{scope="global"}} 1040
# TYPE {_PSZ}_max counter
{_PSZ}_max{{scope="global"}} 1000
# TYPE {_PSZ}_mean counter
{_PSZ}_mean{{scope="global"}} 208
# TYPE {_PSZ}_min counter
{_PSZ}_min{{scope="global"}} 10
# TYPE {_PSZ}_pstdev counter
{_PSZ}_pstdev{{scope="global"}} 396
# TYPE {_PBL}_count counter
{_PBL}_count{{scope="worker_0"}} 2
{_PBL}_count{{scope="worker_1"}} 0
{_PBL}_count{{scope="global"}} 2
# TYPE {_PBL}_max counter
{_PBL}_max{{scope="worker_0"}} 1002000000
{_PBL}_max{{scope="worker_1"}} 0
{_PBL}_max{{scope="global"}} 1002000000
# TYPE {_PBL}_mean counter
{_PBL}_mean{{scope="worker_0"}} 1001500000
{_PBL}_mean{{scope="worker_1"}} 0
{_PBL}_mean{{scope="global"}} 1001500000
# TYPE {_PBL}_min counter
{_PBL}_min{{scope="worker_0"}} 1001000000
{_PBL}_min{{scope="worker_1"}} 0
{_PBL}_min{{scope="global"}} 1001000000
# TYPE {_PBL}_pstdev counter
{_PBL}_pstdev{{scope="worker_0"}} 500000
{_PBL}_pstdev{{scope="worker_1"}} 0
{_PBL}_pstdev{{scope="global"}} 500000
# TYPE {_PBL}_sum counter
{_PBL}_sum{{scope="worker_0"}} 2003000000
{_PBL}_sum{{scope="worker_1"}} 0
{_PBL}_sum{{scope="global"}} 2003000000
# TYPE nighthawk_upstream_rq_total counter
nighthawk_upstream_rq_total{{scope="worker_0"}} 3
nighthawk_upstream_rq_total{{scope="worker_1"}} 2
nighthawk_upstream_rq_total{{scope="global"}} 5
"""


def test_hand_built_dotted() -> None:
    assert format_dotted(HAND) == HAND_DOTTED


def test_hand_built_csv() -> None:
    assert format_csv(HAND) == HAND_CSV


def test_hand_built_prometheus() -> None:
    assert format_prometheus(HAND) == HAND_PROMETHEUS


# The yaml rules, one value each: quoting (": " ends a plain scalar; "&" and a leading "@"
# or "-" followed by a blank are not plain in yaml-cpp 0.8, which Envoy builds; the empty
# string and null-like words are quoted), doubles as protobuf prints them (%.15g unless that
# does not read back, then %.17g; whole doubles without ".0"), empty collections in flow
# style, a mapping inside a sequence inline, a sequence inside a sequence on the next line.
HAND_YAML_DOCUMENT: dict[str, Any] = {
    "options": {
        "labels": ["a: b", "x&y", "a:b", "- x", "-x", ""],
        "uri": "http://127.0.0.1:1/?a=1&b=2",
        "connections": 2,
        "duration": "2s",
        "jitter_uniform": "0s",
        "request_headers": [],
        "stats_sinks": [{}],
        "nested": [[1, "null"], []],
        "@type": "Null",
    },
    "doubles": [0.1, 0.3 - 0.2, 3.0, 1e-05, 1e16, math.nan, -math.inf, True, None],
    "empty": {},
}
HAND_YAML = """\
options:
  labels:
    - "a: b"
    - "x&y"
    - a:b
    - "- x"
    - -x
    - ""
  uri: "http://127.0.0.1:1/?a=1&b=2"
  connections: 2
  duration: 2s
  jitter_uniform: 0s
  request_headers:
    []
  stats_sinks:
    - {}
  nested:
    -
      - 1
      - "null"
    -
      []
  "@type": "Null"
doubles:
  - 0.1
  - 0.099999999999999978
  - 3
  - 1e-05
  - 1e+16
  - NaN
  - -Infinity
  - true
  - ~
empty:
  {}"""


def test_hand_built_yaml() -> None:
    assert format_yaml(HAND_YAML_DOCUMENT) == HAND_YAML


def test_yaml_of_a_document_that_is_not_an_object() -> None:
    with pytest.raises(ValueError, match="^document: must be an object$"):
        format_yaml(["results"])  # type: ignore[arg-type]


@pytest.mark.parametrize("bad, field", [
    ({"results": [{"name": "global", "statistics": [{"id": "x", "count": "3", "mean": "3"}]}]}, "mean: "),
    ({"results": [{"name": "global", "counters": [{"name": "c", "value": "x"}]}]}, "value: "),
    ({"results": [{"name": "global", "statistics": [{"id": "x", "count": "3", "percentiles": [{"percentile": "p"}]}]}]},
     "percentile: "),
    ({"results": "global"}, "results: "),
    (["results"], "document: "),
])
@pytest.mark.parametrize("name", ["dotted", "csv", "prometheus"])
def test_malformed_documents_raise_value_error_naming_the_field(
    name: str, bad: dict[str, Any], field: str
) -> None:
    # transform reports this as its one-line error; a document that is not Nighthawk's
    # must not come out as a traceback or as a half-written text.
    with pytest.raises(ValueError) as caught:
        FORMATTERS[name](bad)
    assert str(caught.value).startswith(field)


# (c) A real run, read back by each format's own consumer ---------------------------------------


@pytest.fixture(scope="module")
def real_run() -> tuple[str, dict[str, Any], dict[str, str]]:
    """One short run with two workers against the test server: its Nighthawk document and
    its text in each format (rendered through FORMATS, as ``--output-format`` does)."""
    import nhbench
    from nhbench.outputs._nighthawk import nighthawk_output

    with nhbench.TestServer() as server:
        result = nhbench.run(server.url, rps=200, duration="1s", concurrency=2)
    document = nighthawk_output(result)
    texts = {name: FORMATS[name](result) for name in FORMATTERS}
    return server.url, document, texts


def _global(document: Mapping[str, Any]) -> Mapping[str, Any]:
    (result,) = [r for r in document["results"] if r["name"] == "global"]
    return result


def _same_scalars(loaded: Any, expected: Any, where: str = "") -> None:
    """`loaded` (yaml.BaseLoader: every scalar a string) holds `expected`'s values: Nighthawk's
    yaml drops the JSON's quotes, so a JSON string "3" and a JSON number 3 both come back as
    the text 3; compare each scalar by the value it stands for."""
    if isinstance(expected, Mapping):
        assert isinstance(loaded, dict), where
        assert list(loaded) == list(expected), where
        for key, value in expected.items():
            _same_scalars(loaded[key], value, f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(loaded, list) and len(loaded) == len(expected), where
        for index, value in enumerate(expected):
            _same_scalars(loaded[index], value, f"{where}[{index}]")
    elif expected is None:
        assert loaded == "~", where
    elif isinstance(expected, bool):
        assert loaded == str(expected).lower(), where
    elif isinstance(expected, int):
        assert int(loaded) == expected, where
    elif isinstance(expected, float):
        assert loaded == "NaN" if math.isnan(expected) else float(loaded) == expected, where
    else:
        assert loaded == expected, where


def test_real_run_yaml_reads_back(real_run: tuple[str, dict[str, Any], dict[str, str]]) -> None:
    url, document, texts = real_run
    _same_scalars(yaml.load(texts["yaml"], Loader=yaml.BaseLoader), document)
    # A YAML 1.1 reader resolves the plain scalars to numbers (the 64-bit integers included)
    # and leaves durations as strings.
    loaded = yaml.safe_load(texts["yaml"])
    assert [r["name"] for r in loaded["results"]] == ["worker_0", "worker_1", "global"]
    counters = {c["name"]: c["value"] for c in _global(loaded)["counters"]}
    assert counters["upstream_rq_total"] == int(
        {c["name"]: c["value"] for c in _global(document)["counters"]}["upstream_rq_total"]
    )
    assert counters["upstream_rq_total"] > 0
    assert url in texts["yaml"]


def test_real_run_dotted_reads_back(
    real_run: tuple[str, dict[str, Any], dict[str, str]],
) -> None:
    _, document, texts = real_run
    values: dict[str, str] = {}
    for line in texts["dotted"].splitlines():
        # Statistics are "key: value", counters "key:value" (Nighthawk's own inconsistency).
        key, sep, value = line.rpartition(":")
        assert sep, line
        # A key repeats only where two percentiles round to the same permille (0.9999 and 1
        # are both "permilles-1000"), as in Nighthawk; the line is otherwise unique.
        assert key not in values or ".permilles-" in key, line
        values.setdefault(key, value.strip())
        float(values[key])  # every value is a number
    for result in document["results"]:
        for counter in result["counters"]:
            assert values[f"{result['name']}.{counter['name']}"] == str(int(counter["value"]))
        for statistic in result["statistics"]:
            prefix = f"{result['name']}.{statistic['id']}"
            assert values[f"{prefix}.samples"] == str(int(statistic["count"]))
            assert {f"{prefix}.{f}" for f in ("mean", "pstdev", "min", "max")} <= set(values)
    r2r = "global.benchmark_http_client.request_to_response"
    assert f"{r2r}.permilles-500.microseconds" in values
    assert f"{r2r}.permilles-1000.count" in values


def test_real_run_csv_reads_back(real_run: tuple[str, dict[str, Any], dict[str, str]]) -> None:
    _, document, texts = real_run
    rows = list(csv.reader(io.StringIO(texts["csv"])))
    assert rows[0] == ["Nighthawk - A layer 7 protocol benchmarking tool."]
    start = rows.index(["Counter", "Value", "Per second"])
    counters = rows[start + 1 : rows.index([], start)]
    expected = _global(document)["counters"]
    assert [(name, int(value)) for name, value, _ in counters] == [
        (c["name"], int(c["value"])) for c in expected
    ]
    seconds = float(_global(document)["execution_duration"].rstrip("s"))
    for _, value, rate in counters:
        assert float(rate) == pytest.approx(int(value) / seconds, abs=0.01)
    headings = [row[0] for row in rows if len(row) == 1 and row[0].endswith(" samples)")]
    with_samples = [s for s in _global(document)["statistics"] if int(s["count"]) > 0]
    assert len(headings) == len(with_samples)
    assert "Request start to response end (" in "".join(headings)
    # Each percentile table runs from its header to the blank row; its percentiles lie
    # strictly inside (0, 1) and increase, its counts are whole numbers.
    tables = [i for i, row in enumerate(rows) if row[:1] == ["Percentile"]]
    assert tables
    for start in tables:
        table = rows[start + 1 : rows.index([], start)]
        percentiles = [float(row[0]) for row in table]
        assert all(0 < p < 1 for p in percentiles) and percentiles == sorted(set(percentiles))
        assert all(len(row) == 4 and int(row[1]) >= 0 for row in table)


def test_real_run_prometheus_reads_back(
    real_run: tuple[str, dict[str, Any], dict[str, str]],
) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    _, document, texts = real_run
    samples = {}
    for family in text_string_to_metric_families(texts["prometheus"]):
        for sample in family.samples:
            # prometheus_client names a counter's samples "<family>_total"; compare without.
            name = sample.name.removesuffix("_total") if family.type == "counter" else sample.name
            key = (name, tuple(sorted(sample.labels.items())))
            assert key not in samples
            samples[key] = sample.value
    names = [r["name"] for r in document["results"]]
    for result in document["results"]:
        scope = (("scope", result["name"]),)
        for counter in result["counters"]:
            name = "nighthawk_" + counter["name"].replace(".", "_")
            assert samples[(name.removesuffix("_total"), scope)] == int(counter["value"])
        for statistic in result["statistics"]:
            name = "nighthawk_" + statistic["id"].replace(".", "_")
            assert samples[(f"{name}_count", scope)] == int(statistic["count"])
    r2r = "nighthawk_benchmark_http_client_request_to_response"
    quantiles = {
        dict(labels)["quantile"] for (name, labels) in samples
        if name == r2r and dict(labels)["scope"] == "global"
    }
    assert {"0", "0.5", "0.75", "1"} <= quantiles
    assert {dict(labels)["scope"] for (_, labels) in samples} == set(names)


# yaml-cpp itself ---------------------------------------------------------------------------------


def _yamlcpp_version() -> tuple[int, ...] | None:
    if shutil.which("g++") is None or shutil.which("pkg-config") is None:
        return None
    proc = subprocess.run(["pkg-config", "--modversion", "yaml-cpp"], capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        return None
    return tuple(int(part) for part in proc.stdout.strip().split(".")[:2])


@pytest.fixture(scope="module")
def yamlcpp(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple[int, ...]]:
    """tests/support/yamlcpp_emit.cc built against the system's yaml-cpp (Debian:
    libyaml-cpp-dev), with the library's version."""
    version = _yamlcpp_version()
    if version is None:
        pytest.skip("needs g++ and yaml-cpp (apt-get install g++ libyaml-cpp-dev pkg-config)")
    binary = tmp_path_factory.mktemp("yamlcpp") / "yamlcpp_emit"
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "yaml-cpp"],
                           capture_output=True, text=True, check=True).stdout.split()
    subprocess.run(["g++", "-O1", "-o", str(binary), str(YAMLCPP_SOURCE), *flags], check=True)
    return binary, version


def _yamlcpp_emit(binary: Path, json_text: str) -> str:
    return subprocess.run([str(binary)], input=json_text, capture_output=True, text=True,
                          check=True).stdout


def _json_text(document: Any) -> str:
    # Protobuf's JSON writes non-ASCII text as UTF-8, not as \u escapes (which yaml-cpp's
    # reader cannot join into one character when they are a surrogate pair).
    return json.dumps(document, ensure_ascii=False)


def _floats_as_text(node: Any) -> Any:
    """The document with every double replaced by a string of its repr, for both emitters:
    the comparison with yaml-cpp is about layout and quoting (the JSON text json.dumps
    writes for a double is Python's, not protobuf's, which the goldens check)."""
    if isinstance(node, Mapping):
        return {key: _floats_as_text(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_floats_as_text(value) for value in node]
    return repr(node) if isinstance(node, float) else node


def test_yaml_equals_yamlcpp_on_nighthawks_json(yamlcpp: tuple[Path, tuple[int, ...]]) -> None:
    binary, _ = yamlcpp
    text = (DATA / "output_formatter.json.gold").read_text()
    assert format_yaml(json.loads(text)) == _yamlcpp_emit(binary, text)


def test_yaml_equals_yamlcpp_on_a_real_run(
    yamlcpp: tuple[Path, tuple[int, ...]],
    real_run: tuple[str, dict[str, Any], dict[str, str]],
) -> None:
    binary, _ = yamlcpp
    document = _floats_as_text(real_run[1])
    assert format_yaml(document) == _yamlcpp_emit(binary, _json_text(document))


# Strings at the edges of yaml-cpp's plain-scalar rules, as values and as keys.
_EDGE_STRINGS = [
    "", " ", "a ", " a", "a b", "~", "null", "Null", "NULL", "nul", "true", "yes", "3", "-3",
    "0.5s", "-", "--", "- a", "-a", "?", "? a", "?a", ":", ": a", ":a", "a:", "a: b", "a:b",
    "a :b", "#", "a#b", "a #b", "a\t#b", ",a", "a,b", "[a", "a]", "{a", "a}", "&a", "a&b",
    "*a", "!a", "a!", "|a", ">a", "'a", "a'b", '"a', 'a"b', "%a", "@a", "`a", "a\\b",
    "a\nb", "a\tb", "a\rb", "a\r\nb", "\x01", "a\x7f", "a\x1fb", "\x85", "a\x85", "\x80a",
    "\xa0", "a\xa0", "\ufeffa", "\xe9t\xe9", "\u2028", "\U0001f600", "--- a", "...",
    "http://127.0.0.1:8080/?a=1&b=2", "2009-02-13T23:31:31.567Z", "a" * 300,
]


def test_yaml_equals_yamlcpp_on_edge_strings(yamlcpp: tuple[Path, tuple[int, ...]]) -> None:
    binary, version = yamlcpp
    strings = _EDGE_STRINGS
    if version < (0, 8):
        # yaml-cpp 0.8 (Envoy's) also refuses "&" and a lone "\r" in a plain scalar; an
        # older system library writes those plain, so they are checked by hand above.
        strings = [s for s in strings if "&" not in s and "\r" not in s]
    document = {
        "values": strings,
        "keys": {s: index for index, s in enumerate(strings)},
        "in_maps": [{"k": s} for s in strings],
    }
    assert format_yaml(document) == _yamlcpp_emit(binary, _json_text(document))
