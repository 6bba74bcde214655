"""Fortio's ``-grpc -cacert CA host:port`` is a TLS gRPC run, as in Fortio.

Fortio's fgrpc.Dial uses TLS when a CA is given or the destination starts with https://;
nhbench used to take the bare host:port as grpc:// (cleartext) and drop the CA silently, so
the run "worked" against a plain-text port. Real processes: ``nhbench run`` against the
test server, once with TLS (its self-signed CA) and once without; the server's counters
say what reached it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import nhbench
from tests.test_cli_errors import assert_one_line_error, nhbench_cli


@pytest.fixture(scope="module")
def tls_server() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer(tls_self_signed=True) as server:
        yield server


@pytest.fixture(scope="module")
def plain_server() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer() as server:
        yield server


def _settled(server: nhbench.TestServer) -> dict[str, int]:
    import time

    # The server counts a call when its response is written; the client may see it first.
    stats = server.stats()
    for _ in range(50):
        time.sleep(0.05)
        again = server.stats()
        if again == stats:
            break
        stats = again
    return stats


@pytest.mark.timeout(120)
@pytest.mark.parametrize("form", ["{host}:{port}", "http://{host}:{port}",
                                  "https://{host}:{port}"])
def test_grpc_with_cacert_runs_over_tls(tls_server: nhbench.TestServer, form: str) -> None:
    host, port = tls_server.address
    before = _settled(tls_server)
    proc = nhbench_cli("run", "-grpc", "-cacert", tls_server.ca_cert,
                       form.format(host=host, port=port), "-n", "10", "--rps", "50",
                       "--output-format", "json")
    assert proc.returncode == 0, proc.stderr
    after = _settled(tls_server)
    assert after["requests"] - before["requests"] == 10
    assert after["tls_handshakes"] > before["tls_handshakes"]
    assert "benchmark.grpc_status_0" in proc.stdout


@pytest.mark.timeout(120)
@pytest.mark.parametrize("form", ["{host}:{port}", "http://{host}:{port}"])
def test_grpc_with_cacert_never_falls_back_to_cleartext(
    plain_server: nhbench.TestServer, tls_server: nhbench.TestServer, form: str,
) -> None:
    host, port = plain_server.address
    before = _settled(plain_server)
    proc = nhbench_cli("run", "-grpc", "-cacert", tls_server.ca_cert,
                       form.format(host=host, port=port), "-n", "10", "--rps", "50")
    # The handshake fails against a plain-text port (the server answers the ClientHello
    # with a 400): a failed run, and no gRPC call reached the server.
    assert proc.returncode == 1, proc.stderr
    assert "TLS handshake failed" in proc.stderr
    after = _settled(plain_server)
    assert after["grpc_calls"] == before["grpc_calls"]
    assert after["connections_http2"] == before["connections_http2"]
    assert after["status"].get("200", 0) == before["status"].get("200", 0)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # grpc:// says cleartext: a CA or -k with it would be dropped.
        (("grpc://127.0.0.1:9", "--cacert", "{ca}"), "--cacert: only applies to grpcs://"),
        (("-grpc", "127.0.0.1:9", "-k"), "--insecure: only applies to grpcs://"),
        # Fortio's REST API has grpc-secure=on; its command line has no such flag.
        (("-grpc", "127.0.0.1:9", "-grpc-secure"), "unrecognized arguments: -grpc-secure"),
    ],
)
def test_tls_settings_on_cleartext_grpc_are_refused(
    tls_server: nhbench.TestServer, args: tuple[str, ...], expected: str,
) -> None:
    proc = nhbench_cli("run", *(a.format(ca=tls_server.ca_cert) for a in args), "-n", "1")
    assert_one_line_error(proc, expected)
