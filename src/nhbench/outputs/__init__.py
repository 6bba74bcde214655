"""Output formats: one renderer per ``--output-format`` name, each a pure function of a
`Result` that returns the text to write.

Where a new output format goes: a module ``_<name>.py`` here with ``render_<name>(result) ->
str``, one entry in `FORMATS`, the name in ``Options.output_format``, and a section in
docs/outputs.md. A Nighthawk-derived format also has ``format_<name>(document) -> str`` in
the same module (``render_<name>(result) = format_<name>(nighthawk_output(result))``) and an
entry in `DOCUMENT_FORMATS`, so `nhbench transform` can write it from a file Nighthawk wrote
without building a `Result` (nothing Nighthawk wrote is lost on the way). Renderers read a result and never build one
(the result layer sits above this one and calls `render`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .._io import write_output
from ._csv import format_csv, render_csv
from ._dotted import format_dotted, render_dotted
from ._fortio import format_fortio, format_fortio_pedantic, render_fortio, render_fortio_pedantic
from ._human import render_human
from ._json import format_json, render_json
from ._nighthawk import (
    is_nighthawk_document,
    nhbench_extension,
    nighthawk_output,
    result_fields,
    statistic_document,
)
from ._prometheus import format_prometheus, render_prometheus
from ._yaml import format_yaml, render_yaml

if TYPE_CHECKING:
    from .._result import Result

__all__ = [
    "DOCUMENT_FORMATS",
    "FORMATS",
    "FORMAT_NAMES",
    "document_formatter",
    "format_json",
    "is_nighthawk_document",
    "nhbench_extension",
    "nighthawk_output",
    "render",
    "render_human",
    "render_json",
    "renderer",
    "result_fields",
    "statistic_document",
    "write_atomic",
]

#: Every name ``--output-format`` accepts (``Options.output_format``; a test keeps the two
#: equal, and equal to the keys of `FORMATS`).
FORMAT_NAMES = ("human", "json", "yaml", "dotted", "csv", "fortio",
                "experimental_fortio_pedantic", "prometheus")

#: Every output format by name, in the order ``--help`` lists them.
FORMATS: dict[str, Callable[[Result], str]] = {
    "human": render_human,
    "json": render_json,
    "yaml": render_yaml,
    "dotted": render_dotted,
    "csv": render_csv,
    "fortio": render_fortio,
    "experimental_fortio_pedantic": render_fortio_pedantic,
    "prometheus": render_prometheus,
}

#: The formats that are functions of Nighthawk's Output document, by name: every one but
#: ``human``, which needs a `Result`.
DOCUMENT_FORMATS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "json": format_json,
    "yaml": format_yaml,
    "dotted": format_dotted,
    "csv": format_csv,
    "fortio": format_fortio,
    "experimental_fortio_pedantic": format_fortio_pedantic,
    "prometheus": format_prometheus,
}


def render(result: Result, output_format: str = "human") -> str:
    """Render `result` in one of `FORMATS`."""
    return renderer(output_format)(result)


def renderer(output_format: str) -> Callable[[Result], str]:
    """The renderer of `output_format`; ValueError (one line) for an unknown name."""
    try:
        return FORMATS[output_format]
    except KeyError:
        raise ValueError(
            f"output_format: must be one of {', '.join(FORMAT_NAMES)} (got {output_format!r})"
        ) from None


def document_formatter(output_format: str) -> Callable[[Mapping[str, Any]], str] | None:
    """``format_<name>`` of a format: its text from a Nighthawk Output document (see
    `nighthawk_output`), or None for a format that needs a `Result` (``human``). Raises
    ValueError, as `render` does, for an unknown name."""
    renderer(output_format)
    return DOCUMENT_FORMATS.get(output_format)


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write `text` to `path` by the package's one set of file rules (`nhbench._io`): a
    regular file or a new path is replaced atomically (readers see the old file or the whole
    new one, nothing partial is left on failure); stdout (``-``), a FIFO or a character
    device is streamed into. Raises `nhbench.OutputError` (an OSError, one line)."""
    write_output(path, text)
