"""Hostile cases for the test server's HTTP/3 (``--http3``, csrc/server/server_h3.c).

Garbage datagrams, truncated client Initials, streams opened and never finished (reset, or
the client going silent), oversized header blocks and more connections than allowed: the
server neither crashes nor hangs, counts what it refused (quic_packets_dropped,
h3_streams_reset, bad_requests, connections_refused), sends nothing back to garbage, and
keeps answering a well-behaved client (aioquic's, tests/support/h3_client.py) afterwards.
With ``--tls-client-ca``, clients without a certificate, with a forged one (self-signed with
the CA's name), an expired one or one whose key does not match, each sending a request as
soon as it can: none is ever answered, and the good client with its certificate still is.
The misbehaving clients are built here on aioquic's sans-I/O API (``QuicConnection``,
``H3Connection``), which lets a test stop half-way where a normal client would not.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from support.peers import peer_env
from support.polling import wait_until

from nhbench import TestServer

CLIENT = Path(__file__).resolve().parent.parent / "support" / "h3_client.py"

pytestmark = pytest.mark.timeout(120)


def good_client_works(server: TestServer, *args: str) -> None:
    proc = subprocess.run([sys.executable, str(CLIENT), "--cacert", server.ca_cert, *args,
                           server.url], capture_output=True, text=True, timeout=60,
                          env=peer_env())
    assert proc.returncode == 0, (proc.stdout, proc.stderr[-2000:])
    assert json.loads(proc.stdout)["status"] == 200


def quic_address(server: TestServer) -> tuple[str, int]:
    return server.address


def initial_datagram() -> bytes:
    """A real client Initial (aioquic's), as the first datagram of a connection."""
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    quic = QuicConnection(configuration=config)
    quic.connect(("127.0.0.1", 4433), now=time.monotonic())
    (data, _), *_ = quic.datagrams_to_send(now=time.monotonic())
    return data


class RawH3:
    """One QUIC + HTTP/3 connection driven by hand over a UDP socket."""

    def __init__(self, server: TestServer, cert: tuple[str, str] | None = None,
                 share_port: bool = False) -> None:
        config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
        config.load_verify_locations(server.ca_cert)
        if cert is not None:
            config.load_cert_chain(*cert)
        config.server_name = "localhost"
        self.addr = quic_address(server)
        self.quic = QuicConnection(configuration=config)
        self.h3 = H3Connection(self.quic)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        if share_port:
            # Another socket may send from this port too (SO_REUSEPORT); connected, this one
            # still gets every datagram the server sends to the port.
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            self.sock.bind(("127.0.0.1", 0))
            self.sock.connect(self.addr)
        self.sock.settimeout(0.05)
        self.statuses: dict[int, int] = {}
        self.quic.connect(self.addr, now=time.monotonic())
        self.flush()

    def flush(self) -> None:
        for data, addr in self.quic.datagrams_to_send(now=time.monotonic()):
            self.sock.sendto(data, addr)

    def pump(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                data, _ = self.sock.recvfrom(65536)
            except TimeoutError:
                timer = self.quic.get_timer()
                if timer is None:  # the connection is over
                    return
                self.quic.handle_timer(now=time.monotonic())
                self.flush()
                continue
            self.quic.receive_datagram(data, self.addr, now=time.monotonic())
            event = self.quic.next_event()
            while event is not None:
                for h3_event in self.h3.handle_event(event):
                    if isinstance(h3_event, HeadersReceived):
                        for name, value in h3_event.headers:
                            if name == b":status":
                                self.statuses[h3_event.stream_id] = int(value)
                event = self.quic.next_event()
            self.flush()

    def open(self, extra: list[tuple[bytes, bytes]] | None = None, end: bool = True,
             method: bytes = b"GET") -> int:
        sid = self.quic.get_next_available_stream_id()
        self.h3.send_headers(sid, [(b":method", method), (b":scheme", b"https"),
                                   (b":authority", b"localhost"), (b":path", b"/"),
                                   *(extra or [])], end_stream=end)
        self.flush()
        return sid

    def close(self) -> None:
        self.sock.close()

    def same_port(self) -> socket.socket:
        """Another UDP socket on this client's address and port (both use SO_REUSEPORT), as
        a forger on the client's path would send from."""
        forger = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        forger.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        forger.bind(self.sock.getsockname())
        return forger

    def answered(self, sid: int, seconds: float = 5.0) -> int | None:
        end = time.monotonic() + seconds
        while sid not in self.statuses and time.monotonic() < end:
            self.pump(0.1)
        return self.statuses.get(sid)


def test_a_forged_initial_from_a_live_clients_address_does_not_cut_it_off() -> None:
    # The server finds connections by the client's address; an Initial naming a new
    # connection ID from that address starts a connection beside the first (a port given
    # to a new socket). Forged, from a live client's address and port, it must not take
    # the client's packets: they name its own connection.
    with TestServer("127.0.0.1:0", tls_self_signed=True, http3=True) as server:
        victim = RawH3(server, share_port=True)
        try:
            assert victim.answered(victim.open()) == 200
            with victim.same_port() as forger:
                for _ in range(3):
                    forger.sendto(initial_datagram(), quic_address(server))
                # And garbage, long headers (the ones looked at by ID) among it, from there.
                rng = random.Random(11)
                for size in (1, 6, 7, 30, 1200, 1400) * 20:
                    junk = bytes([0x80 | rng.getrandbits(8)]) + rng.randbytes(size - 1)
                    forger.sendto(junk, quic_address(server))
            assert wait_until(lambda: server.stats()["quic_connections_beside"] == 3, timeout=10)
            assert [victim.answered(victim.open()) for _ in range(3)] == [200, 200, 200]
        finally:
            victim.close()
        stats = server.stats()
    assert stats["connections_http3"] == 4 and stats["requests"] == 4


def test_an_initial_beside_a_client_over_max_connections_is_refused_not_counted_beside() -> None:
    # The one place is the live client's: an Initial from its port starts nothing, and
    # counts as refused, not as a connection begun beside it.
    with TestServer("127.0.0.1:0", tls_self_signed=True, http3=True, max_connections=1) as server:
        victim = RawH3(server, share_port=True)
        try:
            assert victim.answered(victim.open()) == 200
            with victim.same_port() as forger:
                forger.sendto(initial_datagram(), quic_address(server))
            assert wait_until(lambda: server.stats()["connections_refused"] == 1, timeout=10)
            assert victim.answered(victim.open()) == 200
        finally:
            victim.close()
        stats = server.stats()
    assert stats["quic_connections_beside"] == 0 and stats["connections_http3"] == 1


def test_garbage_datagrams_are_dropped_and_never_answered() -> None:
    rng = random.Random(7)
    with TestServer("127.0.0.1:0", tls_self_signed=True, http3=True) as server:
        host, port = quic_address(server)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sent = 0
            for _ in range(2000):
                size = rng.choice((1, 5, 20, 100, 1199, 1200, 1400, 1500))
                data = bytes(rng.getrandbits(8) for _ in range(size))
                sock.sendto(data, (host, port))
                sent += 1
                if sent % 200 == 0:
                    time.sleep(0.01)  # not a test of the socket buffer
            sock.sendto(b"", (host, port))
            assert wait_until(lambda: server.stats()["quic_packets_dropped"] >= 1900,
                              timeout=20), server.stats()
            sock.settimeout(0.5)
            with pytest.raises(TimeoutError):
                sock.recvfrom(65536)  # no reply of any kind: nothing to amplify
        good_client_works(server)
        stats = server.stats()
    assert stats["connections_http3"] == 1  # the good client's only
    assert stats["requests"] == 1


def test_truncated_initials_make_no_connection_that_lasts() -> None:
    initial = initial_datagram()
    assert len(initial) >= 1200
    with TestServer("127.0.0.1:0", tls_self_signed=True, http3=True,
                    idle_timeout=2) as server:
        host, port = quic_address(server)
        cuts = (1, 6, 30, 200, 600, 1199, len(initial) - 1, len(initial) - 200)
        for cut in cuts:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                sock.sendto(initial[:cut], (host, port))
        # Each is dropped; the ones long enough to look like an Initial may begin a
        # connection, which never completes its handshake and goes at the idle time-out.
        assert wait_until(lambda: server.stats()["quic_packets_dropped"] >= len(cuts) - 2,
                          timeout=10), server.stats()
        assert wait_until(lambda: server.stats()["connections_active"] == 0, timeout=20)
        stats = server.stats()
        assert stats["tls_handshakes"] == 0
        assert stats["tls_handshake_errors"] == stats["connections_http3"]
        good_client_works(server)


def test_streams_reset_or_abandoned_are_counted_and_released() -> None:
    with TestServer("127.0.0.1:0", tls_self_signed=True, http3=True, idle_timeout=2) as server:
        client = RawH3(server)
        client.pump(1.0)
        # Twenty POSTs whose bodies never come, then reset by the client.
        sids = [client.open(end=False, method=b"POST",
                            extra=[(b"content-length", b"100")]) for _ in range(20)]
        client.pump(0.3)
        for sid in sids:
            client.quic.reset_stream(sid, 0x10C)  # H3_REQUEST_CANCELLED
        client.flush()
        client.pump(0.5)
        assert wait_until(lambda: server.stats()["h3_streams_reset"] >= 20, timeout=10), \
            server.stats()
        # Twenty more left open; then the client goes silent without a CONNECTION_CLOSE.
        for _ in range(20):
            client.open(end=False, method=b"POST", extra=[(b"content-length", b"100")])
        client.pump(0.3)
        good_client_works(server)
        client.close()
        assert wait_until(lambda: server.stats()["connections_active"] == 0, timeout=20)
        stats = server.stats()
    assert stats["requests"] == 1  # the good client's; no abandoned request was answered
    assert stats["h3_protocol_errors"] == 0


def test_oversized_header_blocks_get_431() -> None:
    with TestServer("127.0.0.1:0", tls_self_signed=True, http3=True,
                    max_header_bytes=8192) as server:
        client = RawH3(server)
        try:
            client.pump(1.0)
            big = client.open([(b"x-big", b"v" * 20000)])
            many = client.open([(f"x-{i}".encode(), b"1") for i in range(1500)])
            client.pump(2.0)
        finally:
            client.close()
        assert client.statuses == {big: 431, many: 431}
        stats = server.stats()
        assert stats["bad_requests"] == 2 and stats["status"]["431"] == 2
        # Far over max_header_bytes (200 KB in one block): decoded field by field (no
        # dynamic QPACK table is offered, so the block is as large as what was sent) and
        # not kept past the limit; the answer is still 431 and the connection goes on.
        huge = RawH3(server)
        try:
            huge.pump(1.0)
            sid = huge.open([(f"x-huge-{i}".encode(), b"v" * 5000) for i in range(40)])
            after = huge.open()
            huge.pump(2.0)
        finally:
            huge.close()
        assert huge.statuses == {sid: 431, after: 200}
        assert server.stats()["h3_protocol_errors"] == 0
        good_client_works(server)


def test_more_connections_than_allowed_are_refused_and_counted() -> None:
    # The limit is on connections open at once: a slow swarm (a loaded machine) may see
    # some of its first connections go at the idle time-out and others take their places,
    # so the open count is sampled all along rather than the total checked at the end.
    most_open = 0

    async def swarm(server: TestServer, n: int) -> None:
        nonlocal most_open
        clients = [RawH3(server) for _ in range(n)]
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            for c in clients:
                c.pump(0.01)
                most_open = max(most_open, server.stats()["connections_active"])
            await asyncio.sleep(0)
        for c in clients:
            c.close()

    with TestServer("127.0.0.1:0", tls_self_signed=True, http3=True, max_connections=10,
                    idle_timeout=2) as server:
        asyncio.run(swarm(server, 40))
        stats = server.stats()
        assert stats["connections_refused"] >= 1 and stats["quic_packets_dropped"] >= 1
        assert 1 <= most_open <= 10
        assert stats["connections_http3"] < 40
        # The silent swarm goes at the idle time-out; then there is room again.
        assert wait_until(lambda: server.stats()["connections_active"] == 0, timeout=20)
        good_client_works(server)


@pytest.mark.skipif(os.cpu_count() is None, reason="no CPU count")
def test_many_connections_from_our_client_are_all_served() -> None:
    import nhbench

    with TestServer("127.0.0.1:0", tls_self_signed=True, http3=True, workers=2) as server:
        result = nhbench.run(server.url, protocol="http3", cacert=server.ca_cert, duration=2,
                             rps=400, connections=100, prefetch_connections=True)
        ok = result.counters.get("benchmark.http_2xx", 0)
        assert wait_until(lambda: server.stats()["requests"] >= ok, timeout=10)
        stats: dict[str, Any] = server.stats()
    assert ok >= 600 and result.error_count == 0
    assert stats["requests"] == ok
    assert stats["connections_http3"] >= 50


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from support.pki import make_pki

    return make_pki(tmp_path_factory.mktemp("h3-hostile-pki"))


@pytest.mark.parametrize("which", ["none", "forged", "expired", "other_ca", "stray_key"])
def test_bad_client_certificates_over_quic_are_never_answered(pki: Any, which: str) -> None:
    cert = {
        "none": None,
        "forged": (pki.forged_cert, pki.forged_key),
        "expired": (pki.expired_cert, pki.key),
        "other_ca": (pki.other_ca_cert, pki.other_ca_key),
        "stray_key": (pki.cert, pki.stray_key),  # a CertificateVerify that cannot verify
    }[which]
    with TestServer("127.0.0.1:0", tls_self_signed=True, http3=True, tls_client_ca=pki.ca,
                    workers=1) as server:
        clients = [RawH3(server, cert) for _ in range(5)]
        for c in clients:
            # A request queued before the handshake: it goes out with the client's Finished
            # (its first 1-RTT packet) and must not be served.
            c.open()
            c.pump(0.8)
        for c in clients:
            assert c.statuses == {}, c.statuses
            c.close()
        assert wait_until(lambda: server.stats()["connections_active"] == 0, timeout=20)
        stats = server.stats()
        assert stats["requests"] == 0 and stats["tls_clients_verified"] == 0
        assert stats["tls_handshake_errors"] == 5
        if which != "stray_key":  # a bad signature is decrypt_error, not a certificate alert
            assert stats["tls_clients_refused"] == 5
        good_client_works(server, "--cert", pki.cert, "--key", pki.key)
        assert wait_until(lambda: server.stats()["requests"] == 1, timeout=10)
        assert server.stats()["tls_clients_verified"] == 1
