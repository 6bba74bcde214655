"""A table of malformed invocations of every command: each is refused cleanly.

Every row runs ``python -m nhbench ...`` as a real subprocess in a fresh, empty working
directory and asserts: the exit status (2 for invalid input; 1 only for rows marked as
genuine runtime failures, such as a port that is already in use), exactly one non-empty
line on stderr starting with ``nhbench: error:`` and containing the expected text, nothing
on stdout, no "Traceback" anywhere, the working directory still empty, the shared input
files unchanged, and for rows about an output path, nothing at that path afterwards.

No row may send load: every one must be refused before a connection is opened (rows use
127.0.0.1:{closed}, a port bound and never listened on for the whole module, where every
connection is refused, so a row that slipped through would fail differently, with a failure
predicate and exit 1, and the one-line check would catch it).
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.nhbench_runs import MAIN_IMPORTS, Invocation, run_many

import nhbench

PACKAGE_PARENT = str(Path(nhbench.__file__).resolve().parent.parent)
URL = "http://127.0.0.1:{closed}/"  # formatted with the `closed_port` of the module
TLS_URL = "https://127.0.0.1:{closed}/"
OPENSSL = shutil.which("openssl")
# Imported once for all rows (support/nhbench_runs.py): `sweep` and `report` import the
# campaign, hosts (paramiko) and report modules, about 0.5 s a row otherwise.
PRELOAD = (*MAIN_IMPORTS, "nhbench.sweep", "nhbench.report")


@dataclass(frozen=True)
class Row:
    args: tuple[str, ...]
    expect: str
    status: int = 2  # 1 only for genuine runtime failures
    target: str | None = None  # an output path that must not exist afterwards
    needs: str | None = None  # "openssl" or "blockdev": skipped without it

    @property
    def id(self) -> str:
        text = " ".join(self.args).replace("{in}/", "").replace("\r", "\\r").replace("\n", "\\n")
        return text[:90]


def r(*args: str, expect: str, status: int = 2, target: str | None = None,
      needs: str | None = None) -> Row:
    return Row(tuple(args), expect, status, target, needs)


def run(*args: str) -> tuple[str, ...]:
    return ("run", URL, *args)


def tls(*args: str) -> tuple[str, ...]:
    return ("run", TLS_URL, *args)


SWEEP = ("sweep", URL, "--rps", "10", "--duration", "1s")

ROWS: list[Row] = [
    # ---- commands and flags ------------------------------------------------------------
    r(expect="missing command"),
    r("bogus", expect="invalid choice: 'bogus'"),
    # The URI may be left out for --multi-target-endpoint, so the model says it.
    r("run", expect="URI: is required"),
    r("run", URL, "--bogus", expect="unrecognized arguments: --bogus"),
    r("run", URL, "--conn", "5", expect="unrecognized arguments"),
    r("run", URL, "--rps", expect="expected one argument"),
    r("server", "--bogus", expect="unrecognized arguments: --bogus"),
    # argparse read "-hX..." as -h plus grouped flags: help printed, exit 0, nothing sent.
    # Fortio's words: refused as what they are (compat._native reads the front-end's table).
    r(*run("-httpbufferkb", "256"), expect="-httpbufferkb: a Fortio flag (Buffer size of the "
      "optimized HTTP client) that nhbench does not honour"),
    r(*run("-httpccch"), expect="-httpccch: a Fortio flag"),
    r(*run("-http-port", "8080"), expect="-http-port: a Fortio flag"),
    *(r(*run(flag, "5"), expect=f"unrecognized arguments: {flag}")
      for flag in ("-hc", "-hn", "-hk", "-hH", "-hp", "-hX", "-hello", "-kc")),
    r("server", "-httpbufferkb", "256", expect="-httpbufferkb: a Fortio flag"),
    r("server", "extra", expect="unrecognized arguments: extra"),
    r("sweep", URL, "--bogus", expect="unrecognized arguments: --bogus"),
    r("report", expect="the following arguments are required: DIR"),
    r("report", "a", "b", expect="unrecognized arguments: b"),
    # ---- URLs --------------------------------------------------------------------------
    r("run", "", expect="URI:"),
    r("run", "ftp://127.0.0.1/", expect="URI: unsupported scheme 'ftp://'"),
    r("run", "ws://127.0.0.1/", expect="URI: unsupported scheme"),
    r("run", "127.0.0.1:80", expect="URI: must start with http://"),
    r("run", "http//127.0.0.1/", expect="URI: must start with http://"),
    r("run", "http://", expect="URI: malformed URL: no host"),
    r("run", "http:///path", expect="URI: malformed URL: no host"),
    r("run", "https://", expect="URI: malformed URL: no host"),
    r("run", "http://:80/", expect="URI:"),
    r("run", "http://127.0.0.1:abc/", expect="URI: malformed URL"),
    r("run", "http://127.0.0.1:0/", expect="URI: port must be in 1..65535"),
    r("run", "http://127.0.0.1:65536/", expect="URI: malformed URL"),
    r("run", "http://127.0.0.1:-1/", expect="URI: malformed URL"),
    r("run", "http://127.0.0.1:99999999999999999999/", expect="URI: malformed URL"),
    r("run", "http://[::1]:0/", expect="URI: port must be in 1..65535"),
    r("run", "unix:/tmp/nhbench-x.sock", expect="URI: "),
    r("run", "http://::1/", expect="URI: malformed URL"),
    r("run", "http://::1:8080/", expect="URI: malformed URL"),
    r("run", "http://[::1/", expect="URI: malformed URL"),
    r("run", "http://[127.0.0.1]/", expect="URI:"),
    r("run", "http://u:p@127.0.0.1/", expect="URI: user information in the URL is not supported"),
    r("run", "http://user@127.0.0.1/", expect="URI: user information"),
    r("run", "http://127.0.0.1/a b", expect="URI: must not contain spaces"),
    r("run", "http://127.0.0.1/\r\nX: y", expect="URI:"),
    r("run", "http://127.0.0.1/\x7f", expect="URI:"),
    r("run", "https://127.0.0.1/", "--h2c", expect="--h2c: is HTTP/2 without TLS"),
    r("run", URL, "--insecure", expect="--insecure: only applies to https:// URIs"),
    r("run", URL, "--sni", "example.com", expect="--sni:"),
    r("run", URL, "--cacert", "{in}/ca.pem", expect="--cacert:"),
    # ---- rates and counts --------------------------------------------------------------
    r(*run("--rps", "-1"), expect="--rps: must be >= 0"),
    r(*run("--rps=-1"), expect="--rps: must be >= 0"),
    r(*run("--rps", "nan"), expect="--rps: must be a finite number"),
    r(*run("--rps", "inf"), expect="--rps: must be a finite number"),
    r(*run("--rps=-inf"), expect="--rps:"),
    r(*run("--rps", "lots"), expect="--rps: must be a number"),
    r(*run("--rps", ""), expect="--rps:"),
    r(*run("--rps", "0x10"), expect="--rps: must be a number"),
    r(*run("--rps", "1e400"), expect="--rps:"),
    # Defect 3: above Nighthawk's bound of 1e6 per worker (1e12 used to run forever).
    r(*run("--rps", "1e12"), expect="--rps:"),
    r(*run("--rps", "1000001"), expect="--rps:"),
    r(*run("--connections", "0"), expect="--connections: must be >= 1"),
    r(*run("--connections", "-5"), expect="--connections:"),
    r(*run("--connections", "1.5"), expect="--connections: must be an integer"),
    r(*run("--connections", "99999999999"), expect="--connections: must be >= 1 and <= "),
    r(*run("--concurrency", "zero"), expect="--concurrency: must be 'auto' or an integer"),
    r(*run("--concurrency", "0"), expect="--concurrency:"),
    r(*run("--concurrency", "100000"), expect="--concurrency:"),
    r(*run("--burst-size", "-1"), expect="--burst-size:"),
    r(*run("--max-pending-requests", "-1"), expect="--max-pending-requests:"),
    r(*run("--max-requests-per-connection", "abc"), expect="--max-requests-per-connection:"),
    r(*run("--request-body-size", "-1"), expect="--request-body-size:"),
    r(*run("--request-body-size", "1e99"), expect="--request-body-size:"),
    r(*run("--max-active-requests", "0"), expect="--max-active-requests: must be >= 1"),
    r("run", URL, "--protocol", "http2", "--max-concurrent-streams", "0",
      expect="--max-concurrent-streams:"),
    r(*run("--protocol", "http3"),
      expect="--protocol: http3 runs over QUIC, whose handshake is TLS 1.3: the URI must be https://"),
    r(*run("--h2c", "--protocol", "http1"), expect="--h2c: mutually exclusive with --protocol"),
    r(*run("--sequencer-idle-strategy", "nap"), expect="--sequencer-idle-strategy: must be"),
    r(*run("--output-format", "xml"), expect="--output-format: must be one of"),
    r(*run("--address-family", "v5"), expect="--address-family:"),
    r(*run("--request-method", "FETCH"), expect="--request-method: must be one of"),
    r(*run("--request-method", "GET\r\nX: y"), expect="--request-method: must be one of"),
    # ---- CPU lists ---------------------------------------------------------------------
    r(*run("--cpus", "a"), expect="--cpus:"),
    r(*run("--cpus", "3-1"), expect="--cpus: range '3-1' goes backwards"),
    r(*run("--cpus", "1-"), expect="--cpus:"),
    r(*run("--cpus=-1"), expect="--cpus:"),
    r(*run("--cpus", ","), expect="--cpus:"),
    r(*run("--cpus", "0-1-2"), expect="--cpus:"),
    r(*run("--cpus", "1.5"), expect="--cpus:"),
    r(*run("--cpus", "100000"), expect="--cpus: CPU 100000 "),
    r("server", "--cpus", "a", expect="--cpus:"),
    r("server", "--cpus", "100000", expect="--cpus:"),
    # Defect 2: the range is checked before it is expanded (a billion-entry list before).
    r(*run("--cpus", "0-999999999"), expect="--cpus: CPUs "),
    r("server", "--cpus", "0-999999999", expect="--cpus: CPUs "),
    # ---- durations (ours: 5, 5s, 500ms, 2m; Go's compound 1h2m3s and protobuf's
    # fractional seconds; negative; overflow) --------------------------------------------
    r(*run("--duration", "5x"), expect="--duration: must be a duration such as 5, 5s"),
    r(*run("--duration", "0"), expect="--duration: must be > 0"),
    # A word that starts with a dash and a digit is a value, and reaches the validator.
    r(*run("--duration", "-1s"), expect="--duration: must be > 0"),
    r(*run("--duration=-1s"), expect="--duration: must be > 0"),
    r(*run("--duration=-0.5"), expect="--duration: must be > 0"),
    r(*run("--duration", "1h2x"), expect="--duration: must be a duration"),
    r(*run("--duration", "1.2.3s"), expect="--duration: must be a duration"),
    r(*run("--duration", "PT5S"), expect="--duration: must be a duration"),
    r(*run("--duration", "5 seconds"), expect="--duration: must be a duration"),
    r(*run("--duration", "1e400"), expect="--duration: must be a duration"),
    r(*run("--duration", "nan"), expect="--duration:"),
    r(*run("--duration", "inf"), expect="--duration:"),
    r(*run("--duration", "9999999999h"), expect="--duration: must be > 0 and <= 31536000"),
    r(*run("--duration", "5", "--no-duration"),
      expect="--no-duration: mutually exclusive with --duration"),
    r(*run("--timeout", "0"), expect="--timeout:"),
    r(*run("--timeout", "9999999999h"), expect="--timeout:"),
    r(*run("--request-timeout", "soon"), expect="--request-timeout:"),
    r(*run("--drain-timeout", "9999999999h"), expect="--drain-timeout: must be >= 0 and <="),
    r(*run("--start-delay", "1e9h"), expect="--start-delay:"),
    r("server", "--static-delay", "soon", expect="--static-delay: must be a duration"),
    r("server", "--static-delay", "9999999999h", expect="--static-delay: must be >= 0 and <="),
    r("server", "--idle-timeout", "1h2mx", expect="--idle-timeout:"),
    r("server", "--idle-timeout", "1h-2m", expect="--idle-timeout:"),
    r("server", "--idle-timeout", "h1", expect="--idle-timeout:"),
    r("server", "--idle-timeout", "9999999999h59m", expect="--idle-timeout: must be >= 0"),
    r("server", "--header-timeout=-1s", expect="--header-timeout:"),
    r("server", "--stall-every", "1s", "--stall-for", "9999999999h", expect="--stall-for:"),
    r("server", "--max-echo-delay", "x", expect="--max-echo-delay:"),
    r(*SWEEP[:-2], "--duration", "9999999999h", expect="--duration:"),
    r("sweep", URL, "--steps", "1,2", "--cooldown", "9999999999h",
      expect="--cooldown: must be <= 86400"),
    r("sweep", URL, "--rps", "1", "--cooldown=-1s", expect="--cooldown: must be >= 0"),
    # ---- percentiles and predicates ----------------------------------------------------
    r(*run("--percentiles", "50,200"), expect="--percentiles: must be percentages"),
    r(*run("--percentiles", "-1"), expect="--percentiles:"),
    r(*run("--percentiles", "abc"), expect="--percentiles:"),
    r(*run("--percentiles", ""), expect="--percentiles:"),
    r(*run("--percentiles", "50,,90"), expect="--percentiles:"),
    r(*run("--percentiles", "nan"), expect="--percentiles:"),
    r(*run("--percentiles", ",".join(f"{n / 100:g}" for n in range(1, 1002))),
      expect="--percentiles: at most 1000 percentiles (got 1001)"),
    r(*run("--failure-predicate", "benchmark.http_5xx"),
      expect="--failure-predicate: must be 'counter:threshold'"),
    r(*run("--failure-predicate", "benchmark.http_5xx:-1"), expect="--failure-predicate:"),
    r(*run("--failure-predicate", "benchmark.http_5xx:abc"), expect="--failure-predicate:"),
    r(*run("--failure-predicate", ":1"), expect="--failure-predicate:"),
    r(*run("--termination-predicate", "nope:1"),
      expect="--termination-predicate: unknown counter 'nope'"),
    r(*run("--termination-predicate", "benchmark.http_2xx:1.5"),
      expect="--termination-predicate:"),
    # ---- headers -----------------------------------------------------------------------
    r(*run("--request-header", "X-Bad"), expect="--request-header: must be 'name: value'"),
    r(*run("--request-header", ": v"), expect="--request-header:"),
    r(*run("--request-header", " : v"), expect="--request-header:"),
    r(*run("--request-header", "X: a\r\nY: b"), expect="--request-header: must not contain"),
    r(*run("--request-header", "X\nY: v"), expect="--request-header:"),
    r(*run("--request-header", "Bad Name: v"), expect="--request-header:"),
    r(*run("--request-header", "X: \x01"), expect="--request-header:"),
    r(*run("--request-header", "X: \u65e5\u672c"), expect="--request-header:"),
    r("server", "--response-header", "bad", expect="--response-header: must be 'name: value'"),
    r("server", "--response-header", "X: a\r\nY: b", expect="--response-header:"),
    r("server", "--response-header", '{{"header": 1', expect="--response-header:"),
    # ---- TLS files and settings --------------------------------------------------------
    r(*tls("--cacert", "/nonexistent.pem"), expect="--cacert: no such file or directory"),
    r(*tls("--cacert", "{in}/garbage.pem"),
      expect="--cacert: OpenSSL cannot load CA certificates from"),
    r(*tls("--cacert", "{in}/empty.pem"), expect="--cacert: OpenSSL cannot load CA certificates"),
    r(*tls("--cacert", "{in}/bad-cert.pem"), expect="--cacert: OpenSSL cannot load CA"),
    r(*tls("--cacert", "{in}/key.pem"), expect="--cacert: OpenSSL cannot load CA",
      needs="openssl"),
    r(*tls("--tls-session-reuse", "maybe"), expect="--tls-session-reuse: must be true or false"),
    r(*tls("--tls-ciphers", "NOPE-NOTHING"), expect="--tls-ciphers: OpenSSL knows none"),
    r(*tls("--tls-ciphersuites", "a b"), expect="--tls-ciphersuites:"),
    r(*tls("--tls-groups", "a;b"), expect="--tls-groups:"),
    r(*tls("-k", "--tls-groups", "nosuchgroup"),
      expect="the core rejected the configuration: tls groups"),
    r(*tls("--tls-min-version", "1.1"), expect="--tls-min-version:"),
    r(*tls("--tls-min-version", "abc"), expect="--tls-min-version:"),
    r(*tls("--tls-min-version", "1.3", "--tls-max-version", "1.2"),
      expect="--tls-max-version: must not be below"),
    r(*tls("--alpn", ""), expect="--alpn:"),
    r(*tls("--alpn", "h2,,x"), expect="--alpn:"),
    r(*tls("--sni", "bad name"), expect="--sni:"),
    r("server", "--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key",
      expect="--tls-cert:"),
    r("server", "--tls-cert", "{in}/dir", "--tls-key", "{in}/key.pem", expect="--tls-cert:",
      needs="openssl"),
    r("server", "--tls-cert", "{in}/garbage.pem", "--tls-key", "{in}/key.pem",
      expect="--tls-cert: no PEM certificate", needs="openssl"),
    r("server", "--tls-cert", "{in}/cert.pem", "--tls-key", "{in}/garbage.pem",
      expect="--tls-key: no PEM private key", needs="openssl"),
    r("server", "--tls-cert", "{in}/bad-cert.pem", "--tls-key", "{in}/key.pem",
      expect="--tls-key: OpenSSL cannot use the certificate", needs="openssl"),
    r("server", "--tls-cert", "{in}/cert.pem", "--tls-key", "{in}/other-key.pem",
      expect="does not match the certificate", needs="openssl"),
    r("server", "--tls-cert", "{in}/cert.pem", expect="--tls-cert: needs --tls-key",
      needs="openssl"),
    r("server", "--tls-self-signed", "--tls-cert", "{in}/cert.pem", "--tls-key",
      "{in}/key.pem", expect="--tls-self-signed:", needs="openssl"),
    r("server", "--tls-self-signed", "--tls-san", "bad name!", expect="--tls-san:"),
    r("server", "--tls-self-signed", "--alpn", "h3", expect="--alpn:"),
    r("server", "--max-concurrent-streams", "0", expect="--max-concurrent-streams:"),
    # ---- the test server's other options -----------------------------------------------
    r("server", "--listen", "127.0.0.1", expect="--listen: must be HOST:PORT"),
    r("server", "--listen", "127.0.0.1:70000", expect="--listen: port must be in 0..65535"),
    r("server", "--listen", "127.0.0.1:-1", expect="--listen:"),
    r("server", "--listen", "[::1", expect="--listen:"),
    r("server", "--listen", "", expect="--listen:"),
    # Not an address of this machine: bind() refuses it at start, a runtime failure.
    r("server", "--listen", "10.1.2.3:0", expect="address not available", status=1),
    r("server", "--workers", "0", expect="--workers: must be >= 1 and <= 1024"),
    r("server", "--workers", "abc", expect="--workers:"),
    r("server", "--admin", "127.0.0.1", expect="--admin:"),
    r("server", "--tcp-echo", "x", expect="--tcp-echo:"),
    r("server", "--udp-echo", "127.0.0.1:99999", expect="--udp-echo:"),
    r("server", "--response-body-size", "-1", expect="--response-body-size: must be >= 0"),
    r("server", "--response-body-size", "1e12", expect="--response-body-size:"),
    r("server", "--max-payload-kb", "-1", expect="--max-payload-kb:"),
    r("server", "--max-header-bytes", "0", expect="--max-header-bytes:"),
    r("server", "--max-body-bytes", "lots", expect="--max-body-bytes:"),
    r("server", "--echo-default-params", "status=999", expect="--echo-default-params:"),
    r("server", "--echo-default-params", "delay=abc", expect="--echo-default-params:"),
    r("server", "--echo-default-params", "bogus=1", expect="--echo-default-params:"),
    r("server", "--concurrency-based-linear-delay", "1s", expect="--concurrency-based-linear"),
    # ---- ports in use: a genuine runtime failure (exit 1), and no address file left ----
    r("server", "--listen", "127.0.0.1:{port}", "--address-file", "a.json",
      expect="could not start", status=1, target="a.json"),
    r("server", "--admin", "127.0.0.1:{port}", "--address-file", "a.json",
      expect="could not start", status=1, target="a.json"),
    r("server", "--tcp-echo", "127.0.0.1:{port}", expect="could not start", status=1),
    r("server", "--tls-self-signed", "--listen", "127.0.0.1:{port}", "--tls-ca-out", "ca.pem",
      expect="could not start", status=1, target="ca.pem"),
    # ---- output paths ------------------------------------------------------------------
    r(*run("--output", "/nonexistent-dir/x.json"),
      expect="--output: directory '/nonexistent-dir' does not exist",
      target="/nonexistent-dir/x.json"),
    r(*run("--output", "{in}/dir"), expect="--output: '{in}/dir' is a directory"),
    r(*run("--output", "."), expect="--output: '.' is a directory"),
    r(*run("--output", ""), expect="--output: must be a file path"),
    r(*run("--output", "/proc/sys/nhbench-x.json"), expect="--output: directory '/proc/sys'",
      target="/proc/sys/nhbench-x.json"),
    # sysfs: root passes every mode check there, and the creation fails (after the run, once).
    r(*run("--output", "/sys/fs/nhbench-x.json"), expect="directory '/sys/fs'",
      target="/sys/fs/nhbench-x.json"),
    r(*run("--output", "/sys/kernel/mm/nhbench-x.json"), expect="directory '/sys/kernel/mm'"),
    r(*run("--output-dir", "/sys/fs"), expect="directory '/sys/fs'"),
    # One output would replace the other after the run (a path, a symlink, a hard link).
    r(*run("--output", "same.out", "--hdr-log", "same.out"),
      expect="--hdr-log: is the same file as --output ('same.out')", target="same.out"),
    r(*run("--output", "{in}/file.txt", "--hdr-log", "{in}/file-link"),
      expect="--hdr-log: is the same file as --output"),
    r(*run("--output", "{in}/file-hardlink", "--hdr-log", "{in}/file.txt"),
      expect="--hdr-log: is the same file as --output"),
    r(*run("--output", "-", "--hdr-log", "-"), expect="--hdr-log: is the same file as --output"),
    r("server", "--tls-self-signed", "--tls-ca-out", "{in}/file-hardlink", "--address-file",
      "{in}/file.txt", expect="--tls-ca-out: is the same file as --address-file"),
    r(*run("--output", "{in}/file.txt/x.json"), expect="--output:",
      target="{in}/file.txt/x.json"),
    r(*run("--output", "{in}/dangling"), expect="whose directory does not exist"),
    r(*run("--output", "newdir/"), expect="ends with '/' but is not a directory",
      target="newdir"),
    r(*run("--output", "{blockdev}"), expect="is a block device", needs="blockdev"),
    r("server", "--address-file", "/nonexistent-dir/a.json",
      expect="--address-file: directory '/nonexistent-dir' does not exist"),
    r("server", "--address-file", "{in}/dir", expect="--address-file: '{in}/dir' is a directory"),
    r("server", "--address-file", "/proc/sys/nhbench-a.json", expect="--address-file:"),
    r("server", "--address-file", "", expect="--address-file:"),
    r("server", "--address-file", "{blockdev}", expect="--address-file:", needs="blockdev"),
    r("server", "--tls-self-signed", "--tls-ca-out", "/nonexistent-dir/ca.pem",
      expect="--tls-ca-out: directory '/nonexistent-dir' does not exist"),
    r("server", "--tls-self-signed", "--tls-ca-out", "{in}/dir",
      expect="--tls-ca-out: '{in}/dir' is a directory"),
    r("server", "--tls-self-signed", "--tls-ca-out", "{blockdev}", expect="--tls-ca-out:",
      needs="blockdev"),
    r("server", "--tls-ca-out", "ca.pem", expect="--tls-ca-out:", target="ca.pem"),
    r("server", "--tls-self-signed", "--tls-ca-out", "same.json", "--address-file", "same.json",
      expect="--tls-ca-out: is the same file as --address-file", target="same.json"),
    # ---- server --config files ---------------------------------------------------------
    r("server", "--config", "/nonexistent.yaml", expect="--config: /nonexistent.yaml: no such"),
    r("server", "--config", "{in}/dir", expect="--config: {in}/dir: is a directory"),
    r("server", "--config", "{in}/not-yaml.yaml", expect="not valid JSON or YAML"),
    r("server", "--config", "{in}/not-json.json", expect="not valid JSON"),
    r("server", "--config", "{in}/deep.json", expect="nested too deeply"),
    r("server", "--config", "{in}/deep.yaml", expect="nested too deeply"),
    r("server", "--config", "{in}/deep-mapping.yaml", expect="nested too deeply"),
    r("server", "--config", "{in}/latin1.yaml", expect="not UTF-8 text (byte 0xe9"),
    r("server", "--config", "{in}/binary.json", expect="not UTF-8 text"),
    r("server", "--config", "{in}/list.yaml", expect="must hold a mapping of options"),
    r("server", "--config", "{in}/server-unknown-key.yaml", expect="bogus_option"),
    r("server", "--config", "{in}/server-wrong-type.yaml", expect="workers"),
    r("server", "--config", "{in}/server-bad-type.json", expect="unsupported @type"),
    r("server", "--config", "{in}/server-bad-duration.yaml", expect="idle_timeout"),
    # ---- sweep -------------------------------------------------------------------------
    r("sweep", URL, expect="missing the load"),
    r(*SWEEP[:2], "--rps", "-1", expect="--rps:"),
    r(*SWEEP[:2], "--rps", "10", "--max-rps", "5", expect="--max-rps:"),
    r(*SWEEP[:2], "--rps", "1", "--max-rps", "5", "--step-rps", "0", expect="--step-rps:"),
    r(*SWEEP[:2], "--steps", "a,b", expect="--steps:"),
    r(*SWEEP, "--stop-on-slo", "p99<", expect="--stop-on-slo 'p99<': expected"),
    r(*SWEEP, "--stop-on-slo", "bogus", expect="--stop-on-slo 'bogus': expected"),
    r(*SWEEP, "--extend", expect="--extend:"),
    r(*SWEEP, "--output", "x.json", expect="--output: a sweep writes", target="x.json"),
    r(*SWEEP, "--output-format", "json", expect="--output-format:"),
    r(*SWEEP, "--watch-cpus", "x", expect="--watch-cpus 'x': expected"),
    r(*SWEEP, "--perf-frequency", "0", expect="--perf-frequency:"),
    r(*SWEEP, "--perf-cpus", "a", expect="--perf-cpus:"),
    r(*SWEEP, "--connections", "0", expect="--connections:"),
    r(*SWEEP, "--cacert", "{in}/garbage.pem", expect="--cacert:"),
    r("sweep", "ftp://127.0.0.1/", "--rps", "1", expect="ftp"),
    r(*SWEEP, "--out", "{in}/file.txt", expect="--out", target=None),
    r(*SWEEP, "--out", "{in}/dir-not-empty", expect="not empty"),
    r(*SWEEP, "--resume", "/nonexistent-campaign", expect="/nonexistent-campaign"),
    r(*SWEEP, "--resume", "{in}/dir", expect="not a campaign directory"),
    r("sweep", "--scenario", "/nonexistent.yaml", expect="--scenario /nonexistent.yaml: no such"),
    r("sweep", "--scenario", "{in}/dir", expect="--scenario {in}/dir: is a directory"),
    r("sweep", "--scenario", "{in}/not-yaml.yaml", expect="--scenario"),
    r("sweep", "--scenario", "{in}/list.yaml", expect="must be a mapping"),
    r("sweep", "--scenario", "{in}/deep.yaml", expect="nested too deeply"),
    r("sweep", "--scenario", "{in}/deep-mapping.yaml", expect="nested too deeply"),
    r("sweep", "--scenario", "{in}/latin1.yaml", expect="not UTF-8 text (byte 0xe9"),
    r("sweep", "--scenario", "{in}/binary.json", expect="not UTF-8 text"),
    r("sweep", "--scenario", "{in}/scenario-unknown-key.yaml", expect="unknown key 'rsp'"),
    r("sweep", "--scenario", "{in}/scenario-wrong-type.yaml", expect="--connections:"),
    r("sweep", "--scenario", "{in}/scenario-list-type.yaml", expect="--rps:"),
    r("sweep", "--scenario", "{in}/scenario-run-only.yaml", expect="not a sweep option"),
    # ---- report ------------------------------------------------------------------------
    r("report", "/nonexistent-campaign", expect="is not a directory"),
    r("report", "{in}/file.txt", expect="cannot load result"),
    r("report", "{in}/dir", expect="is not a campaign directory"),
    r("report", "{in}/campaign-garbage", expect="is not a valid campaign manifest"),
    r("report", "{in}/campaign-binary", expect="is not a valid campaign manifest"),
    r("report", "{in}/campaign-deep", expect="is not a valid campaign manifest"),
    r("report", "{in}/campaign-wrong", expect="is not a valid campaign manifest"),
]


def _first_block_device() -> str | None:
    try:
        entries = sorted(os.scandir("/dev"), key=lambda e: e.name)
    except OSError:
        return None
    for entry in entries:
        try:
            if stat.S_ISBLK(entry.stat(follow_symlinks=False).st_mode):
                return entry.path
        except OSError:
            continue
    return None


def _snapshot(directory: Path) -> list[tuple[str, int, int]]:
    found = []
    for path in sorted(directory.rglob("*")):
        st = path.lstat()
        found.append((str(path), st.st_mode, st.st_mtime_ns))
    return found


@pytest.fixture(scope="module")
def refused_port() -> Iterator[int]:
    """The port of URL: bound and never listened on, so connections to it are refused and
    no other test takes it while the rows run."""
    from support.sockets import reserved_port

    with reserved_port() as port:
        yield port


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory, refused_port: int) -> Path:
    """Every input file the rows refer to as {in}/NAME."""
    url = URL.format(closed=refused_port)
    root = tmp_path_factory.mktemp("cli-table-inputs")
    (root / "dir").mkdir()
    (root / "dir-not-empty").mkdir()
    (root / "dir-not-empty" / "something").write_text("x")
    (root / "file.txt").write_text("a regular file\n")
    (root / "file-link").symlink_to(root / "file.txt")
    os.link(root / "file.txt", root / "file-hardlink")
    (root / "dangling").symlink_to(root / "no-such-dir" / "x.json")
    (root / "garbage.pem").write_bytes(bytes(range(256)) * 4)
    (root / "empty.pem").write_bytes(b"")
    (root / "bad-cert.pem").write_text(
        "-----BEGIN CERTIFICATE-----\nAAAAnotbase64!!\n-----END CERTIFICATE-----\n")
    (root / "not-yaml.yaml").write_text("a: [1, 2\nb: {\n")
    (root / "not-json.json").write_text("{\"listen\": [1,}\n")
    (root / "deep.json").write_text("[" * 10000 + "]" * 10000)
    (root / "deep.yaml").write_text("listen: " + "[" * 10000 + "]" * 10000 + "\n")
    # Flow style: 3000 levels in 15 KB, under every file kind's size limit.
    (root / "deep-mapping.yaml").write_text("{k: " * 3000 + "1" + "}" * 3000 + "\n")
    (root / "latin1.yaml").write_bytes("note: caf\u00e9\n".encode("latin-1"))
    (root / "binary.json").write_bytes(b"\xff\xfe\x00{}")
    (root / "list.yaml").write_text("- 1\n- 2\n")
    (root / "server-unknown-key.yaml").write_text("bogus_option: 1\n")
    (root / "server-wrong-type.yaml").write_text("workers: [1, 2]\n")
    (root / "server-bad-duration.yaml").write_text("idle_timeout: {seconds: abc, nanos: 1}\n")
    (root / "server-bad-type.json").write_text('{"@type": "type.googleapis.com/bogus.Thing"}\n')
    (root / "scenario-unknown-key.yaml").write_text("rsp: 10\n")
    (root / "scenario-wrong-type.yaml").write_text(
        f"url: {url}\nrps: 10\nduration: 1s\nconnections: many\n")
    (root / "scenario-list-type.yaml").write_text(f"url: {url}\nrps: [1, 2]\n")
    (root / "scenario-run-only.yaml").write_text(f"url: {url}\nrps: 1\noutput: x.json\n")
    for name, manifest in (
        ("campaign-garbage", b"{not json"),
        ("campaign-binary", b"\xff\xfe\x00\x01"),
        ("campaign-deep", b"[" * 100000 + b"]" * 100000),
        ("campaign-wrong", b'{"version": 1, "steps": "many"}'),
    ):
        (root / name).mkdir()
        (root / name / "manifest.json").write_bytes(manifest)
    if OPENSSL is not None:
        subprocess.run(
            [OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt",
             "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj", "/CN=localhost",
             "-keyout", str(root / "key.pem"), "-out", str(root / "cert.pem")],
            check=True, capture_output=True, timeout=60,
        )
        subprocess.run(
            [OPENSSL, "genpkey", "-algorithm", "EC", "-pkeyopt",
             "ec_paramgen_curve:prime256v1", "-out", str(root / "other-key.pem")],
            check=True, capture_output=True, timeout=60,
        )
    return root


@pytest.fixture(scope="module")
def busy_port() -> Iterator[int]:
    """A loopback TCP port that is bound and listening for the whole module."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield sock.getsockname()[1]


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT, env.get("PYTHONPATH")]))
    return env


@dataclass
class Outcome:
    args: list[str]
    expect: str
    target: str | None
    cwd: Path
    proc: subprocess.CompletedProcess[str] | None = None
    skipped: str | None = None


def _prepare(row: Row, values: dict[str, str], cwd: Path) -> Outcome:
    args = [arg.format(**values) for arg in row.args]
    target = None if row.target is None else row.target.format(**values)
    outcome = Outcome(args, row.expect.format(**values), target, cwd)
    if row.needs == "openssl" and OPENSSL is None:
        outcome.skipped = "the openssl command is not installed"
    elif row.needs == "blockdev" and not values["blockdev"]:
        outcome.skipped = "no block device in /dev"
    return outcome


@dataclass
class Table:
    outcomes: dict[Row, Outcome]
    inputs_before: list[tuple[str, int, int]]


@pytest.fixture(scope="module")
def table(request: pytest.FixtureRequest, inputs: Path, busy_port: int, refused_port: int,
          tmp_path_factory: pytest.TempPathFactory) -> Table:
    """Every selected row, run up front a few at a time.

    Each row is its own process, forked from one interpreter that has imported nhbench
    already (support/nhbench_runs.py): a fresh ``python -m nhbench`` spends most of its
    time starting up and importing, the same for every row.
    test_forked_rows_match_the_real_command checks the shortcut against the real command.
    Each row still gets its own empty working directory.
    """
    selected = list(dict.fromkeys(
        item.callspec.params["row"] for item in request.session.items
        if getattr(item, "callspec", None) is not None
        and isinstance(item.callspec.params.get("row"), Row)))
    values = {"in": str(inputs), "port": str(busy_port), "closed": str(refused_port),
              "blockdev": _first_block_device() or ""}
    root = tmp_path_factory.mktemp("cli-table-runs")
    before = _snapshot(inputs)
    outcomes = {row: _prepare(row, values, root / f"row{index}")
                for index, row in enumerate(selected)}
    to_run = [outcome for outcome in outcomes.values() if not outcome.skipped]
    for outcome in to_run:
        outcome.cwd.mkdir()
    procs = run_many([Invocation(outcome.args, outcome.cwd) for outcome in to_run],
                     _environment(), jobs=max(2, min(6, (os.cpu_count() or 1) * 2)),
                     preload=PRELOAD)
    for outcome, proc in zip(to_run, procs, strict=True):
        outcome.proc = proc
    return Table(outcomes, before)


def test_the_table_is_big_enough() -> None:
    assert len(ROWS) >= 140
    assert len({row.args for row in ROWS}) == len(ROWS), "duplicate rows"


# The first test sets up the `table` fixture, which runs every selected row; that takes
# longer than the suite's default per-test timeout on a busy machine.
@pytest.mark.timeout(900)
@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_malformed_invocation(row: Row, table: Table) -> None:
    outcome = table.outcomes[row]
    if outcome.skipped:
        pytest.skip(outcome.skipped)
    proc = outcome.proc
    assert proc is not None
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert proc.returncode == row.status, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert lines[0].startswith("nhbench: error: "), lines[0]
    assert outcome.expect in lines[0], lines[0]
    assert proc.stdout == ""
    assert sorted(os.listdir(outcome.cwd)) == [], "files were created in the working directory"
    if outcome.target is not None:
        target = Path(outcome.target)
        assert not os.path.lexists(target if target.is_absolute() else outcome.cwd / target)


@pytest.mark.timeout(900)
def test_no_row_changed_the_input_files(inputs: Path, table: Table) -> None:
    # The table has run every selected row by now; the shared inputs must be as they were.
    assert _snapshot(inputs) == table.inputs_before


# The rows that are runtime failures (status 1), the first row of each command and every 20th
# row: enough to cover each command and kind of input without paying a real start-up for
# every row again.
_FIRST_OF_COMMAND = {row.args[:1]: row for row in reversed(ROWS)}.values()
REAL_SAMPLE = [row for index, row in enumerate(ROWS)
               if row.status != 2 or index % 20 == 0 or row in _FIRST_OF_COMMAND]


def _real(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    cwd.mkdir()
    return subprocess.run(
        [sys.executable, "-m", "nhbench", *args],
        capture_output=True, text=True, timeout=120, env=_environment(), cwd=cwd, check=False,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def real_runs(table: Table, tmp_path_factory: pytest.TempPathFactory
              ) -> dict[Row, tuple[subprocess.CompletedProcess[str], Path]]:
    """The sampled rows again, each as a real ``python -m nhbench`` (a few at a time)."""
    root = tmp_path_factory.mktemp("cli-table-real")
    rows = [row for row in REAL_SAMPLE if row in table.outcomes and not table.outcomes[row].skipped]
    with ThreadPoolExecutor(max_workers=max(2, min(6, (os.cpu_count() or 1) * 2))) as pool:
        futures = {row: (pool.submit(_real, table.outcomes[row].args, root / f"row{index}"),
                         root / f"row{index}")
                   for index, row in enumerate(rows)}
        return {row: (future.result(), cwd) for row, (future, cwd) in futures.items()}


@pytest.mark.timeout(900)
@pytest.mark.parametrize("row", REAL_SAMPLE, ids=[f"real:{row.id}" for row in REAL_SAMPLE])
def test_forked_rows_match_the_real_command(
    row: Row, table: Table, real_runs: dict[Row, tuple[subprocess.CompletedProcess[str], Path]],
) -> None:
    """The table's shortcut (rows forked from one interpreter) gives what the real
    ``python -m nhbench`` gives: the same status, stdout and stderr."""
    forked = table.outcomes[row]
    if forked.skipped:
        pytest.skip(forked.skipped)
    assert forked.proc is not None
    real, cwd = real_runs[row]
    assert (real.returncode, real.stdout, real.stderr.replace(str(cwd), "{cwd}")) == (
        forked.proc.returncode, forked.proc.stdout,
        forked.proc.stderr.replace(str(forked.cwd), "{cwd}"),
    )
