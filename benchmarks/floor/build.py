"""Build the floor clients with the system C compiler.

The floors are benchmark tools, not part of the nhbench package: each is one C file in this
directory (with floor_common.h, which both include), compiled with ``cc -O2 -Wall -Wextra
-Werror`` into ``benchmarks/out/floor/`` (ignored by git) when the source or the header is
newer than the binary. peer_compare.py, callgrind_per_request.py and tests/test_floor_tools.py
call :func:`build`.

    python benchmarks/floor/build.py            # prints the path of each binary
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "out" / "floor"
# -g keeps the symbols callgrind's --toggle-collect needs (the loop is in main).
CFLAGS = ["-O2", "-g", "-Wall", "-Wextra", "-Werror"]
SOURCES = {"request_floor": HERE / "request_floor.c",
           "request_floor_uring": HERE / "request_floor_uring.c"}
# Libraries each floor links; the io_uring variant needs liburing (Debian: liburing-dev).
LIBS = {"request_floor_uring": ["-luring"]}
HEADERS = {"request_floor_uring": Path("/usr/include/liburing.h")}
# What every floor source includes from this directory: a change to it rebuilds them too.
COMMON = HERE / "floor_common.h"


class BuildError(Exception):
    """No C compiler, or the compiler refused a floor source (the message says which)."""


def compiler() -> str | None:
    """The system C compiler: $CC, else cc, else gcc."""
    for name in filter(None, [os.environ.get("CC"), "cc", "gcc"]):
        found = shutil.which(name.split()[0])
        if found:
            return found
    return None


def build(name: str = "request_floor", out_dir: Path = OUT) -> Path:
    """The path of the floor binary `name`, compiled first if missing or older than its
    source."""
    src = SOURCES[name]
    binary = out_dir / name
    newest = max(src.stat().st_mtime, COMMON.stat().st_mtime)
    if binary.exists() and binary.stat().st_mtime >= newest:
        return binary
    header = HEADERS.get(name)
    if header is not None and not header.exists():
        raise BuildError(f"{name} needs {header.name} (apt-get install liburing-dev)")
    cc = compiler()
    if cc is None:
        raise BuildError("no C compiler (cc) on PATH: the floor clients need one")
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = binary.with_suffix(".tmp")
    proc = subprocess.run([cc, *CFLAGS, "-o", str(tmp), str(src), *LIBS.get(name, [])], capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise BuildError(f"{cc} failed on {src.name}: {proc.stderr.strip()[-800:]}")
    tmp.replace(binary)
    return binary


if __name__ == "__main__":
    try:
        print(build("request_floor"))
    except BuildError as e:
        sys.exit(f"floor build: {e}")
    try:
        print(build("request_floor_uring"))
    except BuildError as e:  # optional: the io_uring variant
        print(f"floor build: skipped: {e}", file=sys.stderr)
