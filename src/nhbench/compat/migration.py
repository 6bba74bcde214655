"""``python -m nhbench.compat.migration [FILE...]``: regenerate the migration tables of
docs/options.md (or of each FILE) from the front-ends' flag tables (see
`nhbench.compat._migration`)."""

from __future__ import annotations

from ._migration import main

if __name__ == "__main__":
    raise SystemExit(main())
