"""Issue 13: Fortio's spellings of flags nhbench already has (``-qps``, ``-c``, ``-t``,
``-H``, ``-X``, ``-timeout``, ``-abort-on``, ``-labels``, ``-cacert``, ``-https-insecure``,
``-h2``, ``-loglevel``).

Each alias parses to exactly what its nhbench flag gives (the parser is the real CLI's), and
one run with Fortio's spelling only is observed on the wire by the test server.
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
    (["-qps", "250"], ["--rps", "250"]),
    (["-c", "3"], ["--connections", "3"]),
    (["-t", "2s"], ["--duration", "2s"]),
    (["-H", "x-a: 1", "-H", "x-b: 2"], ["--request-header", "x-a: 1", "--request-header", "x-b: 2"]),
    (["-X", "PUT"], ["--request-method", "PUT"]),
    (["-timeout", "3s"], ["--request-timeout", "3s"]),
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
    for alias in ("-qps", "-c", "-t", "-H", "-X", "-timeout", "-abort-on", "-labels",
                  "-cacert", "-https-insecure", "-h2", "-loglevel", "-v"):
        assert alias in strings
    # Fortio's -p (percentiles) is not an alias: -p is Nighthawk's --protocol here.
    assert run._option_string_actions["-p"].dest == "protocol"


def test_bad_value_through_an_alias_names_the_flag() -> None:
    proc = nhbench_cli("run", URI, "-qps", "lots")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "--rps" in proc.stderr and "Traceback" not in proc.stderr
    proc = nhbench_cli("run", URI, "-c", "0")
    assert proc.returncode == 2 and "--connections" in proc.stderr


def test_a_fortio_command_line_on_the_wire() -> None:
    # A Fortio user's command line, unchanged but for `run`: the method and the header reach
    # the origin byte for byte, the connections bound the sockets, the options echo says the
    # rest.
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    with ScriptedOrigin(lambda request: Reply(ok)) as origin:
        proc = cli("run", "-qps", "40", "-c", "2", "-t", "0.5s", "-H", "x-fortio: yes",
                   "-X", "POST", "-timeout", "5s", "--output-format", "json", origin.url)
        requests = list(origin.requests)
        connections = origin.connections
    assert proc.returncode == 0, proc.stderr
    assert requests and all(r.startswith(b"POST / HTTP/1.1\r\n") for r in requests)
    assert all(b"\r\nx-fortio: yes\r\n" in r for r in requests)
    assert 1 <= connections <= 2
    options = nhbench.Result.model_validate_json(proc.stdout).options
    assert options.rps == 40 and options.connections == 2
    assert options.duration == 0.5 and options.request_timeout == 5
