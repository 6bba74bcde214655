"""The skip condition and the count check shared by the suites that run nhbench's client against nginx (the
origin is `benchmarks.nginx_origin`, which generates its TLS certificate with the openssl
command)."""

from __future__ import annotations

import shutil
from collections.abc import Callable

import pytest

import nhbench
from benchmarks.nginx_origin import NginxOrigin, nginx_binary

needs_nginx_and_openssl = pytest.mark.skipif(
    nginx_binary() is None or shutil.which("openssl") is None,
    reason="nginx and the openssl command are needed (apt-get install nginx-light openssl)",
)


def run_counted_by_nginx(origin: NginxOrigin, run: Callable[..., nhbench.Result], url: str,
                         http_version: str, **options: object) -> nhbench.Result:
    """Run nhbench (`run` is the suite's own, with its CPU pinning) at one of nginx's
    listeners and check what the two sides must agree on: a successful run of more than 100
    responses, each request released once, sent once and logged by nginx once with
    `http_version` ("HTTP/1.1", "HTTP/2.0"). The result is returned for the suite's own
    checks."""
    mark = origin.mark()
    result = run(url, **options)
    c = result.counters
    lines = origin.since(mark)
    assert result.success, result.error
    assert c["benchmark.http_2xx"] > 100
    assert len(lines) == c["benchmark.http_2xx"] == c["upstream_rq_total"] == c["sequencer.released"]
    assert {line[2] for line in lines} == {http_version}
    return result
