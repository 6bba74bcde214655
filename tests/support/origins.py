"""Module-scoped origins for the proxy and tunnel tests: nhbench's test server in plain HTTP
and with a self-signed certificate (registered for every test file by conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import nhbench


@pytest.fixture(scope="module")
def tls_origin() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer(tls_self_signed=True) as server:
        yield server


@pytest.fixture(scope="module")
def plain_origin() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer() as server:
        yield server
