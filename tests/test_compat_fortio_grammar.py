"""Go's flag grammar (`nhbench.compat._goflag`) and the Fortio flag table against the real
``fortio help``: every flag Fortio 1.66.5 has is mapped or refused, and no other."""

from __future__ import annotations

import re
import subprocess

import pytest
from support.peers import fortio_binary

from nhbench import OptionsError
from nhbench.compat._fortio_flags import FORTIO_FLAGS, FORTIO_KINDS
from nhbench.compat._goflag import (
    parse_bool,
    parse_duration,
    parse_go_flags,
)


def parse(*argv: str, command: str = "load") -> tuple[dict[str, object], list[str]]:
    parsed = parse_go_flags(argv, FORTIO_FLAGS, FORTIO_KINDS, command=command)
    return parsed.values, parsed.args


@pytest.mark.parametrize(("argv", "values", "rest"), [
    (["-qps", "10", "u"], {"-qps": 10.0}, ["u"]),
    (["--qps", "10", "u"], {"-qps": 10.0}, ["u"]),
    (["-qps=10", "u"], {"-qps": 10.0}, ["u"]),
    (["--qps=-1", "u"], {"-qps": -1.0}, ["u"]),
    (["-k", "u"], {"-k": True}, ["u"]),
    (["-k=false", "u"], {"-k": False}, ["u"]),
    (["-k=F", "-jitter=1", "u"], {"-k": False, "-jitter": True}, ["u"]),
    # A bool never takes the next argument: "false" is the target, and the flags end there.
    (["-k", "false", "-c", "2"], {"-k": True}, ["false", "-c", "2"]),
    # The flags end at the first argument that is not one, at "-" and after "--".
    (["u", "-c", "2"], {}, ["u", "-c", "2"]),
    (["-c", "2", "-", "-n", "3"], {"-c": 2}, ["-", "-n", "3"]),
    (["-c", "2", "--", "-n", "3"], {"-c": 2}, ["-n", "3"]),
    # Go's strconv.ParseInt base 0 and time.ParseDuration.
    (["-c", "0x10", "-n", "0o7", "u"], {"-c": 16, "-n": 7}, ["u"]),
    (["-t", "1m30s", "u"], {"-t": 90.0}, ["u"]),
    (["-t", "0", "u"], {"-t": 0.0}, ["u"]),
    (["-t", "1.5h", "-timeout", "250ms", "u"], {"-t": 5400.0, "-timeout": 0.25}, ["u"]),
    # The last of a repeated flag wins, except a repeatable one (-H) that collects them all.
    (["-c", "2", "-c", "3", "-H", "a: 1", "-H", "b: 2", "u"],
     {"-c": 3, "-H": ["a: 1", "b: 2"]}, ["u"]),
    # A value may start with a dash when it is the value of a non-bool flag.
    (["-abort-on", "-1", "u"], {"-abort-on": -1}, ["u"]),
    (["-payload", "-x", "u"], {"-payload": "-x"}, ["u"]),
])
def test_go_flag_grammar(argv: list[str], values: dict[str, object], rest: list[str]) -> None:
    assert parse(*argv) == (values, rest)


@pytest.mark.parametrize(("argv", "message"), [
    (["-bogus", "u"], "flag provided but not defined: -bogus"),
    # No clustering, no prefix matching: each is a flag name of its own.
    (["-ck", "u"], "flag provided but not defined: -ck"),
    (["-qp", "10", "u"], "flag provided but not defined: -qp"),
    (["-jitter=true", "-curlx", "u"], "flag provided but not defined: -curlx"),
    (["---qps", "1", "u"], "bad flag syntax: ---qps"),
    (["-=x", "u"], "bad flag syntax: -=x"),
    (["-qps"], "flag needs an argument: -qps"),
    (["-qps", "abc", "u"], 'invalid value "abc" for flag -qps: parse error'),
    (["-t", "1m30x", "u"], 'invalid value "1m30x" for flag -t: parse error'),
    (["-t", "10", "u"], 'invalid value "10" for flag -t: parse error'),
    (["-c", "1.5", "u"], 'invalid value "1.5" for flag -c: parse error'),
    (["-k=maybe", "u"], 'invalid boolean value "maybe" for -k: parse error'),
])
def test_go_flag_errors(argv: list[str], message: str) -> None:
    with pytest.raises(OptionsError) as caught:
        parse(*argv)
    assert str(caught.value) == message


@pytest.mark.parametrize("argv", [["-h"], ["-help"], ["--help"], ["-c", "2", "-h", "u"]])
def test_help_is_asked_for(argv: list[str]) -> None:
    assert parse_go_flags(argv, FORTIO_FLAGS, FORTIO_KINDS, command="load").help


def test_refused_flag_is_named_as_given() -> None:
    with pytest.raises(OptionsError) as caught:
        parse("--httpbufferkb=256", "u")
    assert str(caught.value) == ("-httpbufferkb: a Fortio buffer size with no counterpart "
                                 "here; nothing was sent")


def test_flag_of_another_command_is_refused() -> None:
    with pytest.raises(OptionsError, match=r"^-http-port: .*nothing was sent$"):
        parse("-http-port", "9000", "u", command="load")
    values, _ = parse("-http-port", "9000", command="report")
    assert values == {"-http-port": "9000"}


def test_go_parsers() -> None:
    assert [parse_bool(w) for w in ("1", "t", "T", "TRUE", "true", "True")] == [True] * 6
    assert [parse_bool(w) for w in ("0", "f", "F", "FALSE", "false", "False")] == [False] * 6
    for word in ("yes", "on", "tRUE", ""):
        with pytest.raises(ValueError):
            parse_bool(word)
    assert parse_duration("1h2m3.5s") == pytest.approx(3723.5)
    assert parse_duration("-1.5s") == -1.5
    assert parse_duration("100us") == parse_duration("100µs") == pytest.approx(1e-4)
    for text in ("", "1", "s", "1 s", "1d", "+"):
        with pytest.raises(ValueError):
            parse_duration(text)


def test_table_records_are_whole() -> None:
    names = [record.name for record in FORTIO_FLAGS]
    assert len(names) == len(set(names))
    for record in FORTIO_FLAGS:
        assert record.meaning
        # Every mapped flag carries its value into the run; a refused one never does.
        assert (record.apply is not None) == bool(record.nhbench), record.name
        if record.value is not None and record.nhbench:
            assert FORTIO_KINDS.get(record.name, "string") in (
                "int", "uint", "float", "duration", "string"), record.name


def fortio_help_flags() -> dict[str, bool]:
    """The flags of the real ``fortio help``: name -> takes a value."""
    binary = fortio_binary()
    if binary is None:
        pytest.skip("fortio is not installed")
    text = subprocess.run([binary, "help"], capture_output=True, text=True, check=True,
                          timeout=30).stdout
    flags = {}
    for match in re.finditer(r"^  (-[\w.-]+)(?: (\S+))?", text, re.MULTILINE):
        flags[match.group(1)] = match.group(2) is not None
    return flags


def test_every_fortio_flag_is_mapped_or_refused() -> None:
    real = fortio_help_flags()
    assert len(real) == 98  # Fortio 1.66.5's help
    ours = {record.name: record.value is not None for record in FORTIO_FLAGS}
    assert sorted(set(real) - set(ours)) == [], "Fortio flags neither mapped nor refused"
    assert sorted(set(ours) - set(real)) == [], "flags in the table that Fortio does not have"
    # A switch here is a switch there (Go bool flags take no separate value).
    assert {n: v for n, v in ours.items() if v != real[n]} == {}


@pytest.mark.parametrize(("seconds", "text"), [
    # time.Duration.String, as Fortio prints -grpc-ping-delay in its RunType.
    (0, "0s"), (5e-9, "5ns"), (0.00025, "250µs"), (0.0015, "1.5ms"), (0.01, "10ms"),
    (1.5, "1.5s"), (90, "1m30s"), (3600, "1h0m0s"), (3723.5, "1h2m3.5s"),
])
def test_go_duration_text(seconds: float, text: str) -> None:
    from nhbench.compat._gofmt import go_duration

    assert go_duration(round(seconds * 1e9)) == text
