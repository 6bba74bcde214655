"""Client certificates for the mutual-TLS suites, made with the openssl command: a CA, a
client certificate it issued and its key (plain and encrypted PKCS#8), a client
certificate from another CA, an expired one, a forgery (self-signed with the CA's own name
as subject and issuer), a key that is no certificate's, and a file of garbage PEM."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

PASSPHRASE = "correct horse"


@dataclass(frozen=True)
class Pki:
    ca: str
    cert: str
    key: str
    key_encrypted: str
    other_ca_cert: str
    other_ca_key: str
    expired_cert: str
    forged_cert: str
    forged_key: str
    stray_key: str
    garbage: str


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _ec_key(path: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out",
             str(path))


def _ca(d: Path, name: str) -> None:
    _ec_key(d / f"{name}-key.pem")
    _openssl("req", "-x509", "-new", "-key", str(d / f"{name}-key.pem"), "-out",
             str(d / f"{name}.pem"), "-days", "2", "-subj", f"/CN={name}")


def _issue(d: Path, ca: str, key: str, out: str, days: str) -> None:
    csr = d / f"{out}.csr"
    _openssl("req", "-new", "-key", str(d / key), "-out", str(csr), "-subj", "/CN=nhbench client")
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(d / f"{ca}.pem"), "-CAkey",
             str(d / f"{ca}-key.pem"), "-CAcreateserial", "-out", str(d / out), "-days", days)


def make_pki(d: Path) -> Pki:
    """Everything above in directory `d` (EC P-256 keys: handshakes stay cheap)."""
    _ca(d, "ca")
    _ca(d, "other-ca")
    _ec_key(d / "client-key.pem")
    _issue(d, "ca", "client-key.pem", "client.pem", "2")
    _openssl("pkcs8", "-topk8", "-in", str(d / "client-key.pem"), "-out",
             str(d / "client-key-enc.pem"), "-passout", f"pass:{PASSPHRASE}")
    _ec_key(d / "other-key.pem")
    _issue(d, "other-ca", "other-key.pem", "other.pem", "2")
    _issue(d, "ca", "client-key.pem", "expired.pem", "-1")  # notAfter a day ago
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", str(d / "forged-key.pem"), "-out", str(d / "forged.pem"),
             "-days", "2", "-subj", "/CN=ca")
    _ec_key(d / "stray-key.pem")
    (d / "garbage.pem").write_text(
        "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n")
    return Pki(ca=str(d / "ca.pem"), cert=str(d / "client.pem"), key=str(d / "client-key.pem"),
               key_encrypted=str(d / "client-key-enc.pem"), other_ca_cert=str(d / "other.pem"),
               other_ca_key=str(d / "other-key.pem"), expired_cert=str(d / "expired.pem"),
               forged_cert=str(d / "forged.pem"), forged_key=str(d / "forged-key.pem"),
               stray_key=str(d / "stray-key.pem"), garbage=str(d / "garbage.pem"))
