"""``python -m nhbench.demo``: the same as ``nhbench demo``.

The demo itself is a CLI command (`nhbench.cli`); this module only keeps the ``-m`` entry
point, on top of the CLI, so that the CLI never imports it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .cli import main as _cli_main

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo with `argv` (default: the command line) and return the exit status."""
    return _cli_main(["demo", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
