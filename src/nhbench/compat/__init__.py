"""Front-ends for migrating users: Fortio's and Nighthawk's own commands, grammar, defaults
and text, mapped onto nhbench's options (docs/compat.md).

``nhbench fortio load -qps 100 -c 8 URL`` and ``nhbench nighthawk client --rps 100 URI`` read
the command line exactly as the tool it comes from would (Go's `flag` package, TCLAP), with
that tool's defaults and meanings, and print what it prints. Every flag of each tool is one
`ForeignFlag` record in its front-end's table: mapped onto nhbench's options, or refused by
name in one line (exit 2, nothing sent). The migration table of docs/options.md is generated
from those tables. nhbench's own CLI (`nhbench run`...) stays GNU style and never reads a
foreign spelling with a different meaning.
"""

from __future__ import annotations

from ._table import ForeignFlag

__all__ = ["ForeignFlag"]
