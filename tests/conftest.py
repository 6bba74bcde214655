"""Shared fixtures.

`server` starts the real embedded test server (it needs the compiled extension);
the pure-Python tests do not use it and run without the extension.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="session")
def _private_cache_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The result browser keeps its index under $XDG_CACHE_HOME (nhbench.browse._scan):
    the tests' browsers, in process and in the processes they start, write theirs into a
    directory of the session, not into the user's cache."""
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache-home"))
    yield
    if before is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = before


@pytest.fixture
def server() -> Iterator[nhbench.TestServer]:  # noqa: F821 - imported lazily
    """An in-process test server on 127.0.0.1 with a free port, stopped after the test.

    Function-scoped on purpose: each test gets a server whose counters start at zero, so
    tests can compare the client's counters with the server's own request count.
    """
    import nhbench

    with nhbench.TestServer() as test_server:
        yield test_server

@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback TCP port where every connection is refused for the whole test: bound and
    never listened on (support/sockets.py `reserved_port`), unlike port 1 or a port bound
    and closed, which a parallel test may take."""
    from support.sockets import reserved_port

    with reserved_port() as port:
        yield port


# The session-scoped `sshd` fixture (a real OpenSSH server), the proxy tests' origins and
# the DNS server of the DNS-per-connection tests, for every test file.
pytest_plugins = ["support.sshd_fixture", "support.origins", "support.dns_server"]
