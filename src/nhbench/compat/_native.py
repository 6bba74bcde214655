"""Fortio's words on nhbench's own command line: the one line that refuses them.

``nhbench run`` keeps another tool's spelling only where it means exactly what it means there
(``-H``, ``-X``, ``-k``, ``-cacert``, ``-jitter``...). A Fortio flag that means something else
here (``-qps`` is a total over all connections in Fortio and per worker here, ``-c`` an exact
connection count there and a pool maximum here) is no flag of ``nhbench run``: it is refused,
and the line names the front-end that reads it with Fortio's meaning (``nhbench fortio load``)
and the nhbench flag closest to it.
"""

from __future__ import annotations

from ._fortio_flags import FORTIO_FLAGS

__all__ = ["NATIVE", "foreign_word"]

#: What to use instead on nhbench's own command line, where a flag comes close.
NATIVE: dict[str, str] = {
    "-qps": "--rps (per worker)",
    "-c": "--connections (a maximum per worker)",
    "-t": "--duration (0 is refused; --no-duration runs until interrupted)",
    "-p": "--percentiles (Nighthawk's -p is --protocol)",
    "-timeout": "--request-timeout (the whole request; 0 = none)",
}

#: Why a word nhbench run once took as an alias is refused: what it means in Fortio that it
#: does not mean here. Every other Fortio word is explained by its meaning in Fortio's help.
_WHY: dict[str, str] = {
    "-qps": "total over all connections",
    "-c": "an exact number of connections, each at qps/c",
    "-t": "a Go duration, 0 = until interrupted",
    "-p": "the percentiles to report",
    "-timeout": "connect and read timeout, 0 = 3s",
}


def foreign_word(word: str) -> str | None:
    """The line that refuses `word` (``-qps``, as given before any ``=value``) on nhbench's
    own command line, or None when it is no Fortio flag."""
    for flag in FORTIO_FLAGS:
        if word in flag.names:
            why = _WHY.get(word) or flag.meaning.rstrip(".")
            command = "load" if not flag.commands or "load" in flag.commands \
                else flag.commands[0]
            if flag.refused:
                # The front-end refuses it too: pointing there would only move the refusal.
                return f"{word}: a Fortio flag ({why}) that nhbench does not honour: {flag.refused}"
            instead = f", or use {NATIVE[word]}" if word in NATIVE else ""
            return (f"{word}: a Fortio flag ({why}); run Fortio command lines as "
                    f"`nhbench fortio {command} ...`{instead}")
    return None
