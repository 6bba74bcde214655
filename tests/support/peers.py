"""Where the independent peers the compatibility tests run live on this machine.

Fortio has no Debian package: ./dev installs it with `go install` into Go's bin directory
(GOBIN, else GOPATH/bin), which is usually not on PATH, so it is looked up there too.
Chromium and its driver come from Debian (`chromium`, `chromium-driver`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache

__all__ = ["chromedriver_binary", "chromium_binary", "fortio_binary"]


def _go() -> str | None:
    found = shutil.which("go")
    if found:
        return found
    return "/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None


@cache
def fortio_binary() -> str | None:
    """The path of `fortio`, or None when it is not installed."""
    found = shutil.which("fortio")
    if found:
        return found
    go = _go()
    if go is None:
        return None
    try:
        gobin = subprocess.run([go, "env", "GOBIN"], capture_output=True, text=True,
                               check=True, timeout=30).stdout.strip()
        if not gobin:
            gopath = subprocess.run([go, "env", "GOPATH"], capture_output=True, text=True,
                                    check=True, timeout=30).stdout.strip()
            gobin = os.path.join(gopath.split(os.pathsep)[0], "bin")
    except (OSError, subprocess.SubprocessError):
        return None
    candidate = os.path.join(gobin, "fortio")
    return candidate if os.access(candidate, os.X_OK) else None


def chromium_binary() -> str | None:
    """Debian's Chromium, or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def chromedriver_binary() -> str | None:
    """Debian's chromedriver, or None."""
    return shutil.which("chromedriver")
