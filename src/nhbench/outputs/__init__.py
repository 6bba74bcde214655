"""Output formats: one renderer per ``--output-format`` name, each a pure function of a
`Result` that returns the text to write.

Every format is one `OutputFormat` record in `OUTPUT_FORMATS`: its name, the extension
``--output-dir`` gives its files, ``render_<name>(result) -> str`` and, for a
Nighthawk-derived format, ``format_<name>(document) -> str`` (``render_<name>(result) =
format_<name>(nighthawk_output(result))``), so `nhbench transform` can write it from a file
Nighthawk wrote without building a `Result` (nothing Nighthawk wrote is lost on the way).
`FORMAT_NAMES`, `FORMATS`, `DOCUMENT_FORMATS` and ``_output_dir.EXTENSIONS`` are views of
that table.

Where a new output format goes: a module ``_<name>.py`` here with those functions, one
entry in `OUTPUT_FORMATS`, and the name in the ``Options.output_format`` field's `Literal`
and description (a test keeps them equal to the table); then a section in docs/outputs.md.
Renderers read a result and never build one (the result layer sits above this one and calls
`render`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Any

from .._io import write_output
from ._human import render_human
from ._json import format_json, render_json
from ._nighthawk import (
    is_nighthawk_document,
    nhbench_extension,
    nighthawk_output,
    result_fields,
    statistic_document,
)

if TYPE_CHECKING:
    from .._result import Result

__all__ = [
    "DOCUMENT_FORMATS",
    "FORMATS",
    "FORMAT_NAMES",
    "OUTPUT_FORMATS",
    "OutputFormat",
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


@dataclass(frozen=True)
class OutputFormat:
    """One ``--output-format``: all that the package's consumers need to know about it."""

    #: The name ``--output-format`` takes (and ``Options.output_format`` holds).
    name: str
    #: What ``--output-dir`` ends its file names with, the dot included.
    extension: str
    #: ``render_<name>(result)``: the text of a `Result` in this format.
    render: Callable[[Result], str]
    #: ``format_<name>(document)``: the text of a Nighthawk Output document (see
    #: `nighthawk_output`) in this format; None for a format that needs a `Result`.
    format: Callable[[Mapping[str, Any]], str] | None


def _declare(name: str, extension: str, *, document: bool = True, module: str = "",
             stem: str = "") -> OutputFormat:
    """The record of format `name`, its functions found by the package's naming rule:
    ``render_<stem>`` and, when `document` (a Nighthawk-derived format), ``format_<stem>``
    in this package's module ``_<module>``; both `stem` and `module` default to `name`, so
    only a format sharing another's module names them. A missing function fails the import
    of this package, not a run."""
    source = import_module(f"{__name__}._{module or name}")
    stem = stem or name
    return OutputFormat(name, extension, getattr(source, f"render_{stem}"),
                        getattr(source, f"format_{stem}") if document else None)


#: Every output format by name, in the order ``--help`` lists them. ``Options.output_format``
#: repeats the names as its `Literal` (a test keeps the two equal).
OUTPUT_FORMATS: Mapping[str, OutputFormat] = {fmt.name: fmt for fmt in (
    _declare("human", ".txt", document=False),
    _declare("json", ".json"),
    _declare("yaml", ".yaml"),
    _declare("dotted", ".txt"),
    _declare("csv", ".csv"),
    _declare("fortio", ".json"),
    _declare("experimental_fortio_pedantic", ".json", module="fortio", stem="fortio_pedantic"),
    _declare("prometheus", ".prom"),
    _declare("nighthawk_human", ".txt"),
)}

#: Every name ``--output-format`` accepts, in the order ``--help`` lists them.
FORMAT_NAMES = tuple(OUTPUT_FORMATS)

#: Every output format's renderer by name.
FORMATS: dict[str, Callable[[Result], str]] = {
    name: fmt.render for name, fmt in OUTPUT_FORMATS.items()}

#: The formats that are functions of Nighthawk's Output document, by name: every one but
#: ``human`` (nhbench's own report), which needs a `Result`.
DOCUMENT_FORMATS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    name: fmt.format for name, fmt in OUTPUT_FORMATS.items() if fmt.format is not None}


def render(result: Result, output_format: str = "human") -> str:
    """Render `result` in one of `OUTPUT_FORMATS`."""
    return renderer(output_format)(result)


def renderer(output_format: str) -> Callable[[Result], str]:
    """The renderer of `output_format`; ValueError (one line) for an unknown name."""
    try:
        return OUTPUT_FORMATS[output_format].render
    except KeyError:
        raise ValueError(
            f"output_format: must be one of {', '.join(FORMAT_NAMES)} (got {output_format!r})"
        ) from None


def document_formatter(output_format: str) -> Callable[[Mapping[str, Any]], str] | None:
    """``format_<name>`` of a format: its text from a Nighthawk Output document (see
    `nighthawk_output`), or None for a format that needs a `Result` (``human``). Raises
    ValueError, as `render` does, for an unknown name."""
    renderer(output_format)
    return OUTPUT_FORMATS[output_format].format


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write `text` to `path` by the package's one set of file rules (`nhbench._io`): a
    regular file or a new path is replaced atomically (readers see the old file or the whole
    new one, nothing partial is left on failure); stdout (``-``), a FIFO or a character
    device is streamed into. Raises `nhbench.OutputError` (an OSError, one line)."""
    write_output(path, text)
