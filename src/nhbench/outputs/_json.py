"""The ``json`` output format."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._result import Result

__all__ = ["render_json"]


def render_json(result: Result) -> str:
    """Nighthawk-shaped JSON (see `nhbench.Result`), with a trailing newline."""
    return result.model_dump_json(indent=2) + "\n"
