"""``python -m nhbench.cli``: the same as the ``nhbench`` command."""

import sys

from . import main

sys.exit(main())
