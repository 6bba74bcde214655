"""Output formats: one renderer per ``--output-format`` name, each a pure function of a
`Result` that returns the text to write.

Where a new output format goes: a module ``_<name>.py`` here with ``render_<name>(result) ->
str``, one entry in `FORMATS`, the name in ``Options.output_format``, and a section in
docs/outputs.md. Renderers read a result and never build one (the result layer sits above
this one and calls `render`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from .._io import write_output
from ._fortio import render_fortio, render_fortio_pedantic
from ._human import render_human
from ._json import render_json

if TYPE_CHECKING:
    from .._result import Result

__all__ = ["FORMATS", "render", "render_human", "render_json", "write_atomic"]

#: Every output format by name, in the order ``--help`` lists them.
FORMATS: dict[str, Callable[[Result], str]] = {
    "human": render_human,
    "json": render_json,
    "fortio": render_fortio,
    "experimental_fortio_pedantic": render_fortio_pedantic,
}


def render(result: Result, output_format: str = "human") -> str:
    """Render `result` in one of `FORMATS`."""
    try:
        renderer = FORMATS[output_format]
    except KeyError:
        raise ValueError(
            f"output_format: must be one of {', '.join(FORMATS)} (got {output_format!r})"
        ) from None
    return renderer(result)


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write `text` to `path` by the package's one set of file rules (`nhbench._io`): a
    regular file or a new path is replaced atomically (readers see the old file or the whole
    new one, nothing partial is left on failure); stdout (``-``), a FIFO or a character
    device is streamed into. Raises `nhbench.OutputError` (an OSError, one line)."""
    write_output(path, text)
