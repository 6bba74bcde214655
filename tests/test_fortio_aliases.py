"""Fortio's spellings of flags nhbench already has, where they mean exactly the same (``-H``,
``-X``, ``-abort-on``, ``-labels``, ``-cacert``, ``-https-insecure``, ``-h2``, ``-loglevel``);
and the Fortio words that mean something else here (``-qps``, ``-c``, ``-t``, ``-timeout``,
``-p``), refused by name with a pointer to ``nhbench fortio load``.

Each alias parses to exactly what its nhbench flag gives (the parser is the real CLI's), and
one run with Fortio's spelling is observed on the wire by the test server.
"""

from __future__ import annotations

import argparse

import pytest
from support.scripted_origin import Reply, ScriptedOrigin
from test_cli_errors import nhbench_cli
from test_cli_run import cli

import nhbench
from nhbench.cli import build_parser

URI = "http://127.0.0.1:1/"

ALIASES = [
    (["-H", "x-a: 1", "-H", "x-b: 2"], ["--request-header", "x-a: 1", "--request-header", "x-b: 2"]),
    (["-X", "PUT"], ["--request-method", "PUT"]),
    (["-abort-on", "503"], ["--abort-on", "503"]),
    (["-labels", "fortio run"], ["--label", "fortio run"]),
    (["-h2"], ["--protocol", "http2"]),
    (["-loglevel", "Warning"], ["--verbosity", "Warning"]),
]

TLS_ALIASES = [
    (["-cacert", "/etc/ssl/certs/ca-certificates.crt"], ["--cacert", "/etc/ssl/certs/ca-certificates.crt"]),
    (["-https-insecure"], ["--insecure"]),
    (["-k"], ["--insecure"]),
]


def _parse(uri: str, args: list[str]) -> dict[str, object]:
    parsed = build_parser().parse_args(["run", uri, *args])
    return {k: v for k, v in vars(parsed).items() if k not in ("func", "subparser")}


def _options(uri: str, args: list[str]) -> nhbench.Options:
    data = _parse(uri, args)
    data.pop("command", None)
    data.pop("version", None)
    return nhbench.Options.model_validate(data)


@pytest.mark.parametrize(("fortio", "nhbench_flags"), ALIASES, ids=lambda a: " ".join(a))
def test_alias_means_the_same(fortio: list[str], nhbench_flags: list[str]) -> None:
    assert _parse(URI, fortio) == _parse(URI, nhbench_flags)
    assert _options(URI, fortio) == _options(URI, nhbench_flags)


@pytest.mark.parametrize(("fortio", "nhbench_flags"), TLS_ALIASES, ids=lambda a: " ".join(a))
def test_tls_alias_means_the_same(fortio: list[str], nhbench_flags: list[str]) -> None:
    uri = "https://127.0.0.1:1/"
    assert _options(uri, fortio) == _options(uri, nhbench_flags)


def test_no_alias_clashes_with_another_flag() -> None:
    # argparse refuses a second registration of an option string when the parser is built,
    # so building it is the check; this also lists every spelling once for the record.
    parser = build_parser()
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    run = commands.choices["run"]
    strings = [s for action in run._actions for s in action.option_strings]
    assert len(strings) == len(set(strings))
    for alias in ("-H", "-X", "-abort-on", "-labels", "-cacert", "-https-insecure", "-h2",
                  "-loglevel", "-v"):
        assert alias in strings
    # Fortio's meaning differs (a total rate, an exact connection count, 0 = until
    # interrupted, 0 = 3 s, percentiles where Nighthawk's -p is the protocol): no aliases.
    for word in ("-qps", "-c", "-t", "-timeout", "-p"):
        assert word not in strings


@pytest.mark.parametrize(("words", "instead"), [
    (["-qps", "250"], "--rps (per worker)"),
    (["-qps=250"], "--rps (per worker)"),
    (["-c", "3"], "--connections (a maximum per worker)"),
    (["-t", "0"], "--duration"),
    (["-timeout", "3s"], "--request-timeout"),
    (["-p", "50,99"], "--percentiles"),
], ids=lambda a: " ".join(a) if isinstance(a, list) else "")
def test_a_fortio_word_with_another_meaning_is_refused(words: list[str], instead: str) -> None:
    proc = nhbench_cli("run", URI, *words)
    assert proc.returncode == 2 and proc.stdout == ""
    word = words[0].split("=")[0]
    assert proc.stderr.startswith(f"nhbench: error: {word}: a Fortio flag (")
    assert "run Fortio command lines as `nhbench fortio load ...`" in proc.stderr
    assert f"or use {instead}" in proc.stderr and proc.stderr.count("\n") == 1


def test_bad_value_through_an_alias_names_the_flag() -> None:
    proc = nhbench_cli("run", URI, "-X", "GET POST")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "--request-method" in proc.stderr and "Traceback" not in proc.stderr
    proc = nhbench_cli("run", URI, "-abort-on", "42")
    assert proc.returncode == 2 and "--abort-on" in proc.stderr


def test_a_fortio_command_line_on_the_wire() -> None:
    # A Fortio user's command line, its rate and timing in nhbench's own spelling (Fortio's
    # -qps -c -t -timeout mean other things; `nhbench fortio load` takes them): the method and the header reach
    # the origin byte for byte, the connections bound the sockets, the options echo says the
    # rest.
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    with ScriptedOrigin(lambda request: Reply(ok)) as origin:
        proc = cli("run", "--rps", "40", "--connections", "2", "--duration", "0.5s",
                   "-H", "x-fortio: yes", "-X", "POST", "--request-timeout", "5s",
                   "--output-format", "json", origin.url)
        requests = list(origin.requests)
        connections = origin.connections
    assert proc.returncode == 0, proc.stderr
    assert requests and all(r.startswith(b"POST / HTTP/1.1\r\n") for r in requests)
    assert all(b"\r\nx-fortio: yes\r\n" in r for r in requests)
    assert 1 <= connections <= 2
    options = nhbench.Result.model_validate_json(proc.stdout).options
    assert options.rps == 40 and options.connections == 2
    assert options.duration == 0.5 and options.request_timeout == 5
