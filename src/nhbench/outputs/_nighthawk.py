"""Nighthawk's ``Output`` document: the proto3 JSON mapping of ``nighthawk.client.Output``
(api/client/output.proto) for a `Result`, as a plain dict.

Every Nighthawk-derived output format (``json``, ``yaml``, ``dotted``, ``csv``,
``prometheus``, ``fortio``, ``experimental_fortio_pedantic``) is a function of this document,
as Nighthawk's formatters are functions of its ``Output`` proto; so `nhbench transform` can
turn a file Nighthawk wrote into any of them without building a `Result` first.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._result import Result

__all__ = ["nighthawk_output"]


def nighthawk_output(result: Result) -> dict[str, Any]:
    """The Nighthawk ``Output`` JSON document of `result`.

    First version (issue 12 replaces it with the exact mapping of output.proto and
    options.proto): the result entries are already Nighthawk's; the options are nhbench's.
    """
    document: dict[str, Any] = json.loads(result.model_dump_json())
    return document
