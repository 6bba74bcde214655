"""Every single-dash flag of Fortio and Nighthawk, given to nhbench's own commands.

argparse reads an unknown single-dash word as a short flag with its value attached ("-curl"
as "-c url"), as grouped switches ("-httpbufferkb" was "-h ...": the help, exit 0, nothing
sent) or as the abbreviation of a longer flag ("-s 4" as "-sequential-warmup"). Each word of
Fortio 1.66.5's `fortio help` (the live one where Fortio is installed, and the checked-in copy
tests/data/fortio/fortio-1.66.5-help.txt everywhere) and each single-dash spelling of
`nighthawk_client --help` is given to `nhbench run`, `server`, `sweep` and `adapt`: alone, with
a value, as ``-word=value`` and as ``-word=false``. Each must be a flag of that command exactly
as typed, or be refused in one line that names it (exit 2, nothing on stdout); only ``-h``
prints the help. Then a sample goes through the real executable against a listening socket
that must see no connection.
"""

from __future__ import annotations

import argparse
import io
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from functools import cache
from pathlib import Path

import pytest

from nhbench.cli import build_parser

DATA = Path(__file__).parent / "data"
FORTIO_HELP = DATA / "fortio" / "fortio-1.66.5-help.txt"
NIGHTHAWK_HELP = DATA / "nighthawk" / "nighthawk_client-help.txt"
#: Where a run would go: a closed loopback port (no test here may reach it anyway).
URL = "http://127.0.0.1:9/"


def fortio_words(help_text: str) -> set[str]:
    """The flags `fortio help` lists, one ``  -flag [VALUE]`` line each."""
    return set(re.findall(r"^  (-[A-Za-z][\w.-]*)", help_text, re.MULTILINE))


def nighthawk_words(help_text: str) -> set[str]:
    """TCLAP's single-dash spellings (``-p <http1|...>,  --protocol``, ``-h,  --help``)."""
    return set(re.findall(r"^(-[A-Za-z])\b", help_text, re.MULTILINE))


@cache
def foreign_words() -> tuple[str, ...]:
    words = fortio_words(FORTIO_HELP.read_text(encoding="utf-8"))
    fortio = shutil.which("fortio")
    if fortio is not None:
        live = subprocess.run([fortio, "help"], capture_output=True, text=True, timeout=30)
        words |= fortio_words(live.stdout + live.stderr)
    words |= nighthawk_words(NIGHTHAWK_HELP.read_text(encoding="utf-8"))
    return tuple(sorted(words))


def test_the_word_lists_are_whole() -> None:
    # A parse that found nothing would make every test below pass.
    words = foreign_words()
    assert {"-qps", "-c", "-t", "-n", "-p", "-s", "-k", "-curl", "-httpbufferkb", "-user",
            "-keepalive", "-no-reresolve", "-compression", "-jitter", "-v", "-h"} <= set(words)
    assert len(fortio_words(FORTIO_HELP.read_text(encoding="utf-8"))) == 98
    assert nighthawk_words(NIGHTHAWK_HELP.read_text(encoding="utf-8")) == {"-v", "-p", "-h"}


def test_the_live_fortio_has_no_word_the_list_lacks() -> None:
    fortio = shutil.which("fortio")
    if fortio is None:
        pytest.skip("fortio is not installed")
    live = subprocess.run([fortio, "help"], capture_output=True, text=True, timeout=30)
    checked_in = fortio_words(FORTIO_HELP.read_text(encoding="utf-8"))
    assert fortio_words(live.stdout + live.stderr) <= checked_in


#: The command lines each word is given in, before the rest of the command's own arguments.
FORMS = (
    lambda w: [w],
    lambda w: [w, "5"],
    lambda w: [f"{w}=5"],
    lambda w: [f"{w}=false"],
)
#: Each command and what it needs besides the word (a sweep needs its rates).
COMMANDS = {
    "run": [URL],
    "server": [],
    "sweep": [URL, "--rps", "10", "--duration", "1s"],
    "adapt": [URL],
}


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(commands.choices)


@contextmanager
def _captured() -> Iterator[tuple[io.StringIO, io.StringIO]]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        yield out, err


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_foreign_word_is_a_flag_or_refused_by_name(command: str) -> None:
    parser = build_parser()
    sub = _subparsers()[command]
    problems = []
    for word in foreign_words():
        for form in FORMS:
            argv = [command, *form(word), *COMMANDS[command]]
            head = argv[1].split("=", 1)[0]
            with _captured() as (out, err):
                try:
                    parser.parse_args(argv)
                    status = None
                except SystemExit as exit_:
                    status = exit_.code
            case = f"{' '.join(argv)} -> {status}: {err.getvalue().strip()[:160]!r}"
            if status == 0:
                if word != "-h":
                    problems.append(f"{case}: help printed, exit 0")
                continue
            if head in sub._option_string_actions:
                # A flag of the command exactly as typed: its value may still be refused
                # (a switch given "=false"), in one line.
                if status is not None and (status != 2 or err.getvalue().count("\n") != 1):
                    problems.append(case)
                continue
            # No flag of this command: refused, one line that names the word, nothing out.
            lines = err.getvalue().splitlines()
            if status != 2 or len(lines) != 1 or out.getvalue() != "" \
                    or not lines[0].startswith("nhbench: error: ") \
                    or not re.search(re.escape(head) + r"(?![\w.-])", lines[0]):
                problems.append(case)
    assert problems == [], "\n".join(problems)


def test_a_kept_alias_is_the_flag_it_names() -> None:
    # The words the parse test let through as flags: each is one of the aliases kept because
    # it means exactly what it means in Fortio or Nighthawk (tests/test_fortio_aliases.py
    # checks each against its nhbench flag).
    kept = {word for word in foreign_words() if word in _subparsers()["run"]._option_string_actions}
    assert kept == {"-H", "-X", "-abort-on", "-allow-initial-errors", "-cacert",
                    "-content-type", "-grpc", "-grpc-ping-delay", "-h", "-h2",
                    "-healthservice", "-http1.0", "-https-insecure", "-jitter", "-k",
                    "-labels", "-loglevel", "-n", "-nocatchup", "-payload", "-payload-file",
                    "-payload-size", "-ping", "-sequential-warmup", "-uniform",
                    "-unix-socket", "-v"}


# ---- through the real executable, against a listening socket --------------------------------

SAMPLE = [
    # Each was read as something else: -c url, -c ompression, -n o-reresolve, -k eepalive...
    ("run", ["-curl"]), ("run", ["-compression"]), ("run", ["-no-reresolve"]),
    ("run", ["-keepalive=false"]), ("run", ["-key", "k.pem"]), ("run", ["-s", "4"]),
    ("run", ["-httpbufferkb", "256"]), ("run", ["-httpccch"]), ("run", ["-jitter=true"]),
    ("run", ["-c10"]), ("run", ["-kc", "5"]), ("run", ["-help"]),
    # Fortio's words with another meaning here.
    ("run", ["-qps", "100"]), ("run", ["-c", "8"]), ("run", ["-t", "0"]),
    ("run", ["-p", "50,99"]), ("run", ["-timeout", "1s"]),
    ("sweep", ["-curl"]), ("sweep", ["-qps", "5"]), ("sweep", ["-s", "4"]),
    ("adapt", ["-compression"]),
    ("server", ["-curl"]), ("server", ["-http-port", "8080"]), ("server", ["-s", "4"]),
]


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0), backlog=64) as sock:
        sock.setblocking(False)
        yield sock


def _accepted(sock: socket.socket) -> int:
    count = 0
    while True:
        try:
            conn, _ = sock.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


@pytest.mark.timeout(180)
def test_refused_words_send_nothing(listener: socket.socket, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
    rest = {"run": [url, "--duration", "0.5"], "adapt": [url, "--duration", "0.5"],
            "sweep": [url, "--rps", "10", "--duration", "0.5"], "server": ["--listen",
                                                                         "127.0.0.1:0"]}
    problems = []
    for command, words in SAMPLE:
        proc = subprocess.run([sys.executable, "-m", "nhbench", command, *words,
                               *rest[command]], capture_output=True, text=True, timeout=60,
                              cwd=tmp_path)
        head = words[0].split("=", 1)[0]
        lines = proc.stderr.splitlines()
        if proc.returncode != 2 or proc.stdout or len(lines) != 1 or head not in lines[0]:
            problems.append(f"{command} {words}: {proc.returncode} {proc.stderr!r}")
    assert problems == [], "\n".join(problems)
    assert _accepted(listener) == 0
    # The socket does see a run: a kept alias (-H) reaches it.
    proc = subprocess.run([sys.executable, "-m", "nhbench", "run", "-H", "x-a: 1", url,
                           "--duration", "0.3", "--rps", "20", "--request-timeout", "0.2"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert _accepted(listener) >= 1, proc.stderr


@pytest.mark.parametrize(("argv", "expected"), [
    # A negative number is a value: it reaches the validator, which names the flag.
    (["run", URL, "--rps", "-1"], "--rps: must be >= 0 and <= 1000000 (got -1)"),
    (["run", URL, "--rps", "-1e3"], "--rps: must be >= 0 and <= 1000000 (got -1e3)"),
    (["run", URL, "--rps", "-.5"], "--rps: must be >= 0 and <= 1000000 (got -.5)"),
    (["run", URL, "--duration", "-5s"], "--duration: must be > 0"),
    # A switch takes no value: argparse read "-k=Hx" as "-k -H x".
    (["run", URL, "-k=Hx"], "-k=Hx: -k is a switch and takes no value"),
    (["run", URL, "--jitter=true"], "--jitter=true: --jitter is a switch and takes no value"),
])
def test_values_that_start_with_a_dash(argv: list[str], expected: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "nhbench", *argv], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(f"nhbench: error: {expected}"), proc.stderr
    assert proc.stderr.count("\n") == 1


def test_a_dash_alone_is_stdin() -> None:
    proc = subprocess.run([sys.executable, "-m", "nhbench", "transform", "--output-format",
                           "json", "-"], input="not json", capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.startswith("nhbench: error: cannot load result '<stdin>': not JSON"), \
        proc.stderr
