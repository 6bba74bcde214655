"""Fortio's words on nhbench's own command line: the one line that refuses them.

``nhbench run`` keeps another tool's spelling only where it means exactly what it means there
(``-H``, ``-X``, ``-k``, ``-cacert``, ``-jitter``...). A Fortio flag that means something else
here (``-qps`` is a total over all connections in Fortio and per worker here, ``-c`` an exact
connection count there and a pool maximum here) is no flag of ``nhbench run``: it is refused,
and the line names the front-end that reads it with Fortio's meaning (``nhbench fortio load``)
and the nhbench flag closest to it.
"""

from __future__ import annotations

from ._table import ForeignFlag

__all__ = ["FORTIO", "NATIVE", "foreign_word"]

# The words nhbench run took as aliases until their Fortio meaning was found to differ, as
# Fortio 1.66.5's help lists them. Only the front-end reads them now.
_DROPPED: tuple[ForeignFlag, ...] = (
    ForeignFlag(("-qps",), "float", "Queries Per Seconds or 0 for no wait/max qps",
                default="8", refused="total over all connections"),
    ForeignFlag(("-c",), "int", "Number of connections/goroutine/threads", default="4",
                refused="an exact number of connections, each at qps/c"),
    ForeignFlag(("-t",), "duration", "How long to run the test or 0 to run until ^C",
                default="5s", refused="a Go duration, 0 = until interrupted"),
    ForeignFlag(("-p",), "string", "List of pXX to calculate", default="50,75,90,99,99.9",
                refused="the percentiles to report"),
    ForeignFlag(("-timeout",), "duration", "Connection and read timeout value (for HTTP)",
                default="3s", refused="connect and read timeout, 0 = 3s"),
)

#: The Fortio flags whose words nhbench's own commands refuse with a pointer to the front-end.
#: The front-end's own table replaces this one: ``FORTIO = FORTIO_FLAGS`` (from
#: ``nhbench.compat._fortio_flags``); every word of it that is no flag of the command is then
#: refused this way.
FORTIO: tuple[ForeignFlag, ...] = _DROPPED

#: What to use instead on nhbench's own command line, where a flag comes close.
NATIVE: dict[str, str] = {
    "-qps": "--rps (per worker)",
    "-c": "--connections (a maximum per worker)",
    "-t": "--duration (0 is refused; --no-duration runs until interrupted)",
    "-p": "--percentiles (Nighthawk's -p is --protocol)",
    "-timeout": "--request-timeout (the whole request; 0 = none)",
}

#: Why a word is refused, in the words of the line, where the record's `refused` is not
#: the line's (a table whose records map the flag, the front-end's, says what it maps to).
_WHY: dict[str, str] = {flag.name: flag.refused for flag in _DROPPED}


def foreign_word(word: str) -> str | None:
    """The line that refuses `word` (``-qps``, as given before any ``=value``) on nhbench's
    own command line, or None when it is no Fortio flag."""
    for flag in FORTIO:
        if word in flag.names:
            why = _WHY.get(word) or flag.meaning.rstrip(".")
            command = "load" if not flag.commands or "load" in flag.commands \
                else flag.commands[0]
            instead = f", or use {NATIVE[word]}" if word in NATIVE else ""
            return (f"{word}: a Fortio flag ({why}); run Fortio command lines as "
                    f"`nhbench fortio {command} ...`{instead}")
    return None
