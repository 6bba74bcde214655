"""Shared fixtures.

`server` starts the real embedded test server (it needs the compiled extension);
the pure-Python tests do not use it and run without the extension.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest


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
