"""``python -m nhbench.options.docs [FILE...]``: regenerate the option tables of
docs/options.md (or of each FILE) from the option models (see `nhbench.options._docs`)."""

from __future__ import annotations

from ._docs import main

if __name__ == "__main__":
    raise SystemExit(main())
