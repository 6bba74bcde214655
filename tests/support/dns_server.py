"""A real DNS server for the tests of DNS per connection (docs/engine.md "DNS per
connection"), and nhbench run through the system's resolver pointed at it.

The server is dnslib's, UDP and TCP, on a loopback address of its own, port 53; nhbench runs
in a mount namespace of its own (``unshare -m``) whose /etc/resolv.conf names that server, so
the rest of the machine's resolution is untouched. The server answers from a script per name
(a list of answers served in turn, the last one repeated) and logs each A query, so a test
knows which address each connection was given and can compare that with what each origin
served. Fixtures `dns` and `origins` (two test servers on one port, at 127.0.0.1 and
127.0.0.2), registered for every test file by conftest.py.
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import nhbench
from support.cli import cli_env

try:
    from dnslib import QTYPE, RCODE, RR, A
    from dnslib.server import BaseResolver, DNSLogger, DNSServer
except ImportError:  # the test extra has it; without it the `dns` fixture skips
    BaseResolver = object

NAME = "svc.nhbench.test"

#: One entry of a name's script: a list of IPv4 addresses (an A answer, maybe empty),
#: "NXDOMAIN", "SERVFAIL", "DROP" (no answer at all) or ("DELAY", seconds, addresses).
Answer = list[str] | str | tuple[str, float, list[str]]


class ScriptedResolver(BaseResolver):  # type: ignore[misc,valid-type]
    """Answers A queries from a script per name, in turn; AAAA queries with the last A
    query's failure, else with no records (the name has no IPv6 address)."""

    def __init__(self) -> None:
        self.scripts: dict[str, list[Answer]] = {}
        self.given: list[Answer] = []  # what each A query for a scripted name got
        self.lock = threading.Lock()
        self.last: Answer = []

    def resolve(self, request: Any, handler: Any) -> Any:
        reply = request.reply()
        name = str(request.q.qname).rstrip(".").lower()
        with self.lock:
            script = self.scripts.get(name)
            if script is None:
                reply.header.rcode = RCODE.NXDOMAIN
                return reply
            if request.q.qtype == QTYPE.A:
                answer = script.pop(0) if len(script) > 1 else script[0]
                self.given.append(answer)
                self.last = answer
            else:
                answer = self.last if isinstance(self.last, str) else []
        if answer == "DROP":
            return None
        if isinstance(answer, tuple):
            time.sleep(answer[1])
            answer = answer[2]
        if isinstance(answer, str):
            reply.header.rcode = getattr(RCODE, answer)
            return reply
        for address in answer:
            reply.add_answer(RR(request.q.qname, QTYPE.A, rdata=A(address), ttl=0))
        return reply


class Dns:
    """The running server: script its answers for NAME, read what it gave, run nhbench."""

    def __init__(self, resolver: ScriptedResolver, resolv_conf: Path) -> None:
        self.resolver = resolver
        self.resolv_conf = resolv_conf

    def script(self, *answers: Answer) -> None:
        with self.resolver.lock:
            self.resolver.scripts[NAME] = list(answers)
            self.resolver.given.clear()

    @property
    def given(self) -> list[Answer]:
        with self.resolver.lock:
            return list(self.resolver.given)

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """``nhbench run ARGS`` in a mount namespace that resolves through this server."""
        script = 'mount --bind "$1" /etc/resolv.conf && shift && exec "$@"'
        return subprocess.run(
            ["unshare", "-m", "sh", "-c", script, "sh", str(self.resolv_conf),
             sys.executable, "-m", "nhbench", "run", *args],
            capture_output=True, text=True, timeout=timeout, env=cli_env(),
            stdin=subprocess.DEVNULL, check=False)


def _namespaces_work() -> bool:
    try:
        done = subprocess.run(["unshare", "-m", "sh", "-c", "mount --bind /dev/null /dev/null"],
                              capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@pytest.fixture(scope="module")
def dns(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dns]:
    if BaseResolver is object:
        pytest.skip("needs dnslib (the test extra)")
    if not _namespaces_work():
        pytest.skip("needs a private mount namespace (unshare -m: root or user namespaces)")
    resolver = ScriptedResolver()
    quiet = DNSLogger("-recv,-send,-request,-reply,-truncated,-data")
    servers: list[Any] = []
    address = ""
    for _ in range(20):
        # Port 53 on a loopback address of its own: resolv.conf cannot name another port.
        # TCP too: an answer too large for a UDP datagram is truncated and asked again on it.
        address = f"127.53.{random.randrange(1, 255)}.{random.randrange(1, 255)}"
        try:
            for tcp in (False, True):
                servers.append(DNSServer(resolver, address=address, port=53, logger=quiet,
                                         tcp=tcp))
            break
        except OSError:
            for server in servers:
                server.server.server_close()
            servers = []
    if not servers:
        pytest.skip("no loopback address free for a DNS server on port 53")
    for server in servers:
        server.start_thread()
    conf = tmp_path_factory.mktemp("dns") / "resolv.conf"
    conf.write_text(f"nameserver {address}\noptions timeout:1 attempts:1\n")
    try:
        yield Dns(resolver, conf)
    finally:
        for server in servers:
            server.stop()
            server.server.server_close()


@pytest.fixture(scope="module")
def origins() -> Iterator[tuple[nhbench.TestServer, nhbench.TestServer]]:
    """Two test servers on one port, at 127.0.0.1 and 127.0.0.2."""
    with nhbench.TestServer(listen="127.0.0.1:0") as first:
        port = first.address[1]
        with nhbench.TestServer(listen=f"127.0.0.2:{port}") as second:
            yield first, second


def served(origins: tuple[nhbench.TestServer, ...]) -> list[int]:
    """The requests each origin has served so far."""
    return [o.stats()["requests"] for o in origins]


def origin_url(origins: tuple[nhbench.TestServer, nhbench.TestServer]) -> str:
    """http://NAME:PORT/, the origins' port under the scripted name."""
    return f"http://{NAME}:{origins[0].address[1]}/"
