"""``python -m nhbench``: the same as the ``nhbench`` command."""

import sys

from .cli import main

sys.exit(main())
