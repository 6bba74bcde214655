"""The package version, as the last build wrote it down.

The version comes from git tags (docs/development.md, "Versions"): at every build of the
package setuptools-scm writes it to ``_version.txt`` beside this file (git-ignored; the
sdist and the wheel carry it), and the C core is compiled with the same string
(``nhbench._core.build_info()``). Reading the file beside this module rather than the
installed metadata keeps a source checkout used through PYTHONPATH=src from being labelled
by some other installed copy. A tree that was never built has no file: an installed
distribution answers through importlib.metadata, a source checkout says ``0+unknown``.
"""

from __future__ import annotations

# typing is not imported at run time: ``nhbench --version`` loads this module and nothing
# else it can avoid (the annotations are strings).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["__version__", "build_info"]

_UNKNOWN = "0+unknown"


def _version() -> str:
    # os.path rather than pathlib: `nhbench --version` loads nothing it does not need.
    import os.path

    here = os.path.dirname(os.path.abspath(__file__))
    try:
        with open(os.path.join(here, "_version.txt"), encoding="utf-8") as file:
            written = file.readline().strip()
    except OSError:
        written = ""
    if written:
        return written
    if os.path.basename(os.path.dirname(here)) == "src":
        return _UNKNOWN
    # Imported here: importlib.metadata loads email, zipfile and csv (about 10 ms), which a
    # built tree never needs and ``nhbench --version`` should not pay for.
    from importlib import metadata

    try:
        return metadata.version("nhbench")
    except metadata.PackageNotFoundError:
        return _UNKNOWN


__version__ = _version()


def build_info() -> dict[str, Any]:
    """What this installation is (``nhbench version``): the package version, the commit the
    C core was built from, Python and the platform, and the core's build (HTTP/3, regex
    checks, sanitizers, -Werror, and each C library: the version loaded now, ``linked``,
    and the one its headers had at build time, ``built``). ``core`` is None, and
    ``core_error`` says why, when the compiled extension cannot be imported."""
    import platform
    import sys
    from importlib import import_module

    info: dict[str, Any] = {
        "version": __version__,
        "commit": None,
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": f"{sys.platform} {platform.machine()}",
        "core": None,
    }
    try:
        # By name: a static ``from . import _core`` reads as an import of the package
        # (every layer) to import-linter, and this module is the lowest layer.
        core = import_module("nhbench._core")
    except ImportError as exc:
        info["core_error"] = str(exc)
        return info
    built = dict(core.build_info())
    info["commit"] = built.pop("commit") or None
    info["core"] = built
    return info
