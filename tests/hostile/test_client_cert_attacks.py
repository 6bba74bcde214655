"""Client certificates under attack, both ends.

The client: a bad --cert/--key (a key that is not the certificate's, garbage PEM, an
encrypted key with no or a wrong passphrase, half a pair, Nighthawk's tls_certificates with
an inline password) is refused before anything starts: exit 2, one line naming the option,
and not one connection reaches the target (a counting listener stands in for it).

The server with --tls-client-ca: clients with no certificate, one from another CA, an
expired one, a forged one (self-signed with the CA's name) and garbage in place of a
handshake are refused at the handshake and counted in tls_clients_refused; none gets a
response, and afterwards a good client is still verified and answered. The hostile clients
are Python's ssl module and raw sockets, not nhbench's own client.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.pki import PASSPHRASE, Pki, make_pki

import nhbench

pytestmark = [pytest.mark.hostile, pytest.mark.core]

PACKAGE_PARENT = str(Path(nhbench.__file__).resolve().parent.parent)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


class CountingListener:
    """A TCP listener that only counts the connections made to it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.accepted = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.sock.getsockname()[1]}/"

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2)
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[CountingListener]:
    target = CountingListener()
    try:
        yield target
    finally:
        target.close()


def nhbench_run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, **(env or {}))
    full["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT, full.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "nhbench", *args], capture_output=True,
                          text=True, timeout=60, env=full, stdin=subprocess.DEVNULL, check=False)


def _bad_inputs(pki: Pki) -> dict[str, tuple[list[str], dict[str, str], str]]:
    """Each case: the flags, the environment, what the one error line must say."""
    tls_context = json.dumps({"common_tls_context": {"tls_certificates": [{
        "certificate_chain": {"filename": pki.cert}, "private_key": {"filename": pki.key},
        "password": {"inline_string": PASSPHRASE}}]}})
    return {
        "mismatch": (["--cert", pki.cert, "--key", pki.stray_key], {},
                     "key: the key in"),
        "garbage_cert": (["--cert", pki.garbage, "--key", pki.key], {},
                         "--cert: OpenSSL cannot read the PEM certificate"),
        "garbage_key": (["--cert", pki.cert, "--key", pki.garbage], {},
                        "key: no PEM private key"),
        "encrypted_no_passphrase": (["--cert", pki.cert, "--key", pki.key_encrypted], {},
                                    "is encrypted and no passphrase was given"),
        "wrong_passphrase": (["--cert", pki.cert, "--key", pki.key_encrypted,
                              "--key-passphrase-env", "NHB_PASS"], {"NHB_PASS": "wrong"},
                             "key: the passphrase does not decrypt"),
        "passphrase_env_unset": (["--cert", pki.cert, "--key", pki.key_encrypted,
                                  "--key-passphrase-env", "NHB_UNSET_PASS"], {},
                                 "NHB_UNSET_PASS is not set"),
        "cert_only": (["--cert", pki.cert], {}, "--cert: needs --key"),
        "key_only": (["--key", pki.key], {}, "--key: needs --cert"),
        "missing_file": (["--cert", "/nonexistent/c.pem", "--key", pki.key], {},
                         "cert: no such file"),
        "inline_password": (["--tls-context", tls_context], {},
                            "password.inline_string is not supported"),
    }


CASES = ["mismatch", "garbage_cert", "garbage_key", "encrypted_no_passphrase",
         "wrong_passphrase", "passphrase_env_unset", "cert_only", "key_only", "missing_file",
         "inline_password"]


@pytest.mark.parametrize("case", CASES)
def test_bad_client_certificate_refused_before_anything_is_sent(
        pki: Pki, listener: CountingListener, case: str) -> None:
    flags, env, message = _bad_inputs(pki)[case]
    done = nhbench_run("run", listener.url, "--duration", "1", "--rps", "10", *flags, env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert listener.accepted == 0


# ---- the server's side ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(pki: Pki) -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer(tls_self_signed=True, tls_client_ca=pki.ca, workers=1,
                            subprocess=True, admin="127.0.0.1:0") as srv:
        yield srv


def _get(server: nhbench.TestServer, cert: str | None, key: str | None) -> bytes:
    """One GET over Python's TLS with the given client certificate; the bytes answered
    (empty when the server ended the connection)."""
    context = ssl.create_default_context(cafile=str(server.ca_cert))
    if cert is not None and key is not None:
        context.load_cert_chain(cert, key)
    host, port = server.address
    with socket.create_connection((host, port), timeout=5) as raw:
        try:
            with context.wrap_socket(raw, server_hostname="localhost") as tls:
                tls.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                out = b""
                while chunk := tls.recv(65536):
                    out += chunk
                return out
        except (ssl.SSLError, ConnectionError):
            return b""


def _attackers(pki: Pki) -> dict[str, tuple[str | None, str | None]]:
    d = Path(pki.ca).parent
    return {
        "no_certificate": (None, None),
        "other_ca": (pki.other_ca_cert, pki.other_ca_key),
        "expired": (pki.expired_cert, pki.key),
        "forged_issuer_name": (str(d / "forged.pem"), str(d / "forged-key.pem")),
    }


@pytest.mark.parametrize("attack", ["no_certificate", "other_ca", "expired",
                                    "forged_issuer_name"])
def test_server_refuses_a_bad_client_certificate(server: nhbench.TestServer, pki: Pki,
                                                 attack: str) -> None:
    cert, key = _attackers(pki)[attack]
    before = server.stats()
    answered = _get(server, cert, key)
    after = server.stats()
    assert b"HTTP/1.1" not in answered
    assert after["requests"] == before["requests"]
    assert after["tls_clients_refused"] - before["tls_clients_refused"] == 1
    assert after["tls_clients_verified"] == before["tls_clients_verified"]
    # The server is unharmed: a good client is verified and answered.
    assert _get(server, pki.cert, pki.key).startswith(b"HTTP/1.1 200")
    assert server.stats()["tls_clients_verified"] == after["tls_clients_verified"] + 1


def test_server_survives_garbage_for_a_handshake(server: nhbench.TestServer, pki: Pki) -> None:
    before = server.stats()
    host, port = server.address
    for junk in (b"\x16\x03\x01\x00\x05hello", os.urandom(4096), b"GET / HTTP/1.1\r\n\r\n"):
        with socket.create_connection((host, port), timeout=5) as raw:
            raw.sendall(junk)
            raw.shutdown(socket.SHUT_WR)
            while raw.recv(65536):
                pass
    after = server.stats()
    assert after["requests"] == before["requests"]
    assert after["tls_clients_verified"] == before["tls_clients_verified"]
    assert after["tls_handshake_errors"] - before["tls_handshake_errors"] == 3
    assert _get(server, pki.cert, pki.key).startswith(b"HTTP/1.1 200")


@pytest.mark.parametrize("command", ["curl", "load"])
def test_fortio_front_end_refuses_a_mismatched_key(pki: Pki, listener: CountingListener,
                                                   command: str) -> None:
    done = nhbench_run("fortio", command, "-cacert", pki.ca, "-cert", pki.cert, "-key",
                       pki.stray_key, listener.url)
    assert done.returncode == 2, done.stderr
    assert "does not match the certificate" in done.stderr
    assert listener.accepted == 0
