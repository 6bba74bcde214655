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

# Only the global result; the empty-free statistics in document order; rates are 5 / 2 s.
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


@pytest.mark.parametrize("bad, field", [
    ({"results": [{"name": "global", "statistics": [{"id": "x", "count": "3", "mean": "3"}]}]}, "mean: "),
    ({"results": [{"name": "global", "counters": [{"name": "c", "value": "x"}]}]}, "value: "),
    ({"results": [{"name": "global", "statistics": [{"id": "x", "count": "3", "percentiles": [{"percentile": "p"}]}]}]},
     "percentile: "),
    ({"results": "global"}, "results: "),
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
