"""Full TLS handshakes per second against nginx with ``ssl_verify_client on``: the cost of
client authentication (docs/benchmarks.md, "Mutual TLS handshakes").

Every request on a new connection (``max_requests_per_connection=1``) with session
resumption off, so every request is a full handshake; nginx on one CPU, the client on
another, EC P-256 keys everywhere (server, CA, client). Three rows:

* nhbench with a client certificate: nginx verifies it (ECDSA verify of the chain and of
  CertificateVerify; the client signs CertificateVerify) and answers 200;
* nhbench without one: nginx still asks, the client sends an empty Certificate, nginx
  completes the handshake and answers 400;
* h2load without one (h2load cannot send a client certificate): the same handshake as the
  row above, from an independent client, one request per connection (-n = -c).

Run: ``python benchmarks/mtls_handshakes.py [--seconds 5] [--connections 8]``.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import tempfile
from pathlib import Path

import nhbench
from benchmarks.nginx_origin import NginxOrigin


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_client_pki(d: Path) -> tuple[str, str, str]:
    """(CA, client certificate, client key), EC P-256."""
    for name in ("ca", "client"):
        _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out",
                 str(d / f"{name}-key.pem"))
    _openssl("req", "-x509", "-new", "-key", str(d / "ca-key.pem"), "-out", str(d / "ca.pem"),
             "-days", "2", "-subj", "/CN=bench ca")
    _openssl("req", "-new", "-key", str(d / "client-key.pem"), "-out", str(d / "client.csr"),
             "-subj", "/CN=bench client")
    _openssl("x509", "-req", "-in", str(d / "client.csr"), "-CA", str(d / "ca.pem"), "-CAkey",
             str(d / "ca-key.pem"), "-CAcreateserial", "-out", str(d / "client.pem"), "-days",
             "2")
    return str(d / "ca.pem"), str(d / "client.pem"), str(d / "client-key.pem")


def _nginx_cpu(master: int) -> float:
    """CPU seconds (user + system) used so far by nginx's master and its workers."""
    tick = os.sysconf("SC_CLK_TCK")
    pids = [master]
    children = Path(f"/proc/{master}/task/{master}/children")
    if children.exists():
        pids += [int(p) for p in children.read_text().split()]
    total = 0.0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _own_cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=8)
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    client_cpu, server_cpu = str(cpus[0]), cpus[-1]
    with tempfile.TemporaryDirectory() as tmp:
        ca, cert, key = make_client_pki(Path(tmp))
        with NginxOrigin(listeners=("tls",), client_ca=ca, cpu=server_cpu, access_log=False,
                         tuned=True) as origin:
            common = dict(cacert=origin.cacert, duration=args.seconds, rps=100_000,
                          connections=args.connections, max_requests_per_connection=1,
                          tls_session_reuse=False, tls_max_version="1.3",
                          cpus=client_cpu, no_default_failure_predicates=True)
            rows = []
            # Warm-up, not counted: the first run in a process also builds the options'
            # validators, which would be charged to the first row's client CPU.
            nhbench.run(origin.url("tls"), **{**common, "duration": 0.5}, cert=cert, key=key)  # type: ignore[arg-type]
            for label, extra in (("nhbench, client certificate (200)", {"cert": cert,
                                                                        "key": key}),
                                 ("nhbench, no certificate (400)", {})):
                server0, client0 = _nginx_cpu(origin.pid), _own_cpu(resource.RUSAGE_SELF)
                result = nhbench.run(origin.url("tls"), **common, **extra)  # type: ignore[arg-type]
                server1, client1 = _nginx_cpu(origin.pid), _own_cpu(resource.RUSAGE_SELF)
                c = result.counters
                handshakes = c.get("ssl.handshake", 0) or 1
                rows.append((label, handshakes / args.seconds, c.get("benchmark.http_2xx", 0),
                             c.get("benchmark.http_4xx", 0),
                             (client1 - client0) / handshakes * 1e6,
                             (server1 - server0) / handshakes * 1e6))
            h2load = shutil.which("h2load")
            if h2load:
                n = min(int(rows[-1][1] * args.seconds) or 1000, 4000)
                server0, client0 = _nginx_cpu(origin.pid), _own_cpu(resource.RUSAGE_CHILDREN)
                done = subprocess.run(
                    ["taskset", "-c", client_cpu, h2load, "--h1", "-n", str(n), "-c", str(n),
                     "-t", "1", "--connect-to", f"127.0.0.1:{origin.ports['tls']}",
                     origin.url("tls")], capture_output=True, text=True, check=False)
                server1, client1 = _nginx_cpu(origin.pid), _own_cpu(resource.RUSAGE_CHILDREN)
                rate = re.search(r"finished in ([\d.]+)(m?s)", done.stdout)
                if rate:
                    took = float(rate.group(1)) / (1000 if rate.group(2) == "ms" else 1)
                    rows.append(("h2load, no certificate (400)", n / took, 0, n,
                                 (client1 - client0) / n * 1e6, (server1 - server0) / n * 1e6))
    print(f"{'client':36} {'handshakes/s':>12} {'2xx':>7} {'4xx':>7} "
          f"{'client CPU us/hs':>16} {'nginx CPU us/hs':>15}")
    for label, rate, ok, bad, client_us, server_us in rows:
        print(f"{label:36} {rate:12.0f} {ok:7d} {bad:7d} {client_us:16.0f} {server_us:15.0f}")


if __name__ == "__main__":
    main()
