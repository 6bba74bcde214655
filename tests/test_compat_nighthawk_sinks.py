"""``nhbench nighthawk client --stats-sinks`` and ``--stats-flush-interval[-duration]``
(docs/telemetry.md, docs/compat.md): Envoy's StatsdSink with an address pushes to a real
statsd server on a UDP socket and adds up to the result; everything Nighthawk would take that
nhbench cannot honour is refused by name, in one line, with nothing sent."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
from support.metric_sinks import StatsdServer

import nhbench


def nighthawk(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nhbench", "nighthawk", "client", *args],
                          capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)


def statsd_sink(port: int, **extra: str) -> str:
    # Nighthawk's own --help spelling: relaxed JSON, bare-word keys.
    fields = "".join(f",{key}:{value}" for key, value in extra.items())
    return ('{name:"envoy.stat_sinks.statsd",typed_config:{"@type":"type.googleapis.com/'
            f'envoy.config.metrics.v3.StatsdSink",address:{{socket_address:{{address:'
            f'"127.0.0.1",port_value:{port}}}}}{fields}}}}}')


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        sock.settimeout(0)
        yield sock


def test_stats_sinks_push_nighthawks_names(server: nhbench.TestServer) -> None:
    with StatsdServer("udp") as udp:
        proc = nighthawk("--output-format", "json", "--rps", "200", "--duration", "2",
                         "--stats-sinks", statsd_sink(udp.port, prefix='"nh"'),
                         "--stats-flush-interval-duration", "0.5s", server.url)
        assert proc.returncode == 0, proc.stderr
        document = json.loads(proc.stdout)
        counters = {c["name"]: int(c["value"])
                    for c in document["results"][-1]["counters"]}
        lines = udp.lines()
    sums: dict[str, int] = {}
    for line in lines:
        if line.kind == "c":
            sums[line.name] = sums.get(line.name, 0) + int(line.value)
    assert sums["nh.cluster.nhbench.upstream_rq_total"] == counters["upstream_rq_total"] == 400
    assert sums["nh.cluster.nhbench.benchmark.http_2xx"] == counters["benchmark.http_2xx"]
    flushes = [line for line in lines if line.name == "nh.nhbench.rps"]
    assert len(flushes) == 4


def test_the_default_flush_interval_is_nighthawks(server: nhbench.TestServer) -> None:
    # No flush interval given: 5 s, so a 2 s run pushes once, at its end.
    with StatsdServer("udp") as udp:
        proc = nighthawk("--output-format", "json", "--rps", "100", "--duration", "2",
                         "--stats-sinks", statsd_sink(udp.port), server.url)
        assert proc.returncode == 0, proc.stderr
        lines = udp.lines()
    assert len([line for line in lines if line.name == "envoy.nhbench.rps"]) == 1
    assert sum(int(line.value) for line in lines
               if line.name == "envoy.cluster.nhbench.upstream_rq_total") == 200


SINK = ('{name:"envoy.stat_sinks.statsd",typed_config:{"@type":"type.googleapis.com/'
        'envoy.config.metrics.v3.StatsdSink",%s}}')


@pytest.mark.parametrize(("argv", "message"), [
    (["--stats-sinks", SINK % 'tcp_cluster_name:"statsd"'],
     "--stats-sinks #1: typed_config.tcp_cluster_name: 'statsd' names a cluster of Envoy's "
     "bootstrap"),
    (["--stats-sinks", SINK % 'address:{socket_address:{address:"127.0.0.1",port_value:8125,'
      'protocol:"TCP"}}'], "protocol: TCP: Envoy's statsd sink sends UDP"),
    (["--stats-sinks", SINK % 'address:{socket_address:{address:"localhost",port_value:8125}}'],
     "must be an IP address (got 'localhost')"),
    (["--stats-sinks", SINK % 'address:{pipe:{path:"/tmp/x"}}'],
     "typed_config.address: unknown field 'pipe'"),
    (["--stats-sinks", SINK % 'address:{socket_address:{address:"127.0.0.1",port_value:0}}'],
     "port_value: must be 1 to 65535"),
    (["--stats-sinks", SINK % 'address:{socket_address:{address:"127.0.0.1",port_value:1}},'
      'buffer_size:3'], "typed_config: unknown field 'buffer_size'"),
    (["--stats-sinks", '{name:"envoy.stat_sinks.dog_statsd"}'], "DogStatsD"),
    (["--stats-sinks", '{name:"x",typed_config:{"@type":"type.googleapis.com/envoy.extensions.'
      'stat_sinks.open_telemetry.v3.SinkConfig"}}'], "nhbench run --otlp-endpoint"),
    (["--stats-sinks", '{name:"envoy.stat_sinks.statsd"}'], "needs typed_config"),
    (["--stats-sinks", "{name:"], "--stats-sinks #1: not JSON"),
    (["--stats-sinks", SINK % 'address:{socket_address:{address:"127.0.0.1",port_value:1}},'
      'prefix:"a"', "--stats-sinks", SINK % 'address:{socket_address:{address:"127.0.0.1",'
      'port_value:2}},prefix:"b"'], "the sinks have different prefixes (a, b)"),
    (["--stats-flush-interval", "2"], "if --stats-flush-interval or "
     "--stats-flush-interval-duration is set, then --stats-sinks must also be set"),
    (["--stats-sinks", SINK % 'address:{socket_address:{address:"127.0.0.1",port_value:1}}',
      "--stats-flush-interval", "2", "--stats-flush-interval-duration", "1s"],
     "mutually exclusive"),
    (["--stats-sinks", SINK % 'address:{socket_address:{address:"127.0.0.1",port_value:1}}',
      "--stats-flush-interval", "301"], "--stats-flush-interval: must be >= 1 and <= 300"),
    (["--stats-sinks", SINK % 'address:{socket_address:{address:"127.0.0.1",port_value:1}}',
      "--stats-flush-interval-duration", "-1s"], "is out of range"),
    (["--stats-sinks", SINK % 'address:{socket_address:{address:"127.0.0.1",port_value:1}}',
      "--stats-flush-interval-duration", "0.01s"],
     "--stats-flush-interval-duration: must be 0s or at least 0.1s here (got '0.01s')"),
])
def test_what_cannot_be_honoured_is_refused(listener: socket.socket, argv: list[str],
                                             message: str) -> None:
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
    proc = nighthawk("--output-format", "json", *argv, url)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
    with pytest.raises(BlockingIOError):
        listener.accept()
