"""The package version, read from the one place it is written down.

pyproject.toml is the single source of the version (CMake reads it from there too). An
installed package answers through importlib.metadata; a source checkout used through
PYTHONPATH=src has no metadata, so the version is read from pyproject.toml next to it.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["__version__"]


def _from_pyproject() -> str | None:
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError:
        return None
    match = re.search(r'^version\s*=\s*"([^"]+)"', text, re.MULTILINE)
    return match.group(1) if match else None


def _version() -> str:
    # Prefer the source tree when it sits next to this file: a stale installed copy of the
    # metadata must not mislabel code that is being run from the checkout.
    from_source = _from_pyproject()
    if from_source is not None and (Path(__file__).resolve().parents[1].name == "src"):
        return from_source
    # Imported here: importlib.metadata loads email, zipfile and csv (about 10 ms), which a
    # source checkout never needs and ``nhbench --version`` should not pay for.
    from importlib import metadata

    try:
        return metadata.version("nhbench")
    except metadata.PackageNotFoundError:
        return from_source or "0+unknown"


__version__ = _version()
