"""The C tree's two structural rules (docs/architecture.md, "C core").

1. The folders are the design: csrc/client/ and csrc/server/ share only csrc/common/
   (and the public csrc/nhb.h); common/ depends on neither; the binding sees only nhb.h.
   Every project include is written from csrc/ ("common/internal.h"), so that the folder
   a header belongs to is visible where it is included.
2. One naming rule: every external symbol of the core starts with nhb_ (public) or nhb__
   (internal). cmake/check_symbols.cmake enforces it on every build of nhb_core; the
   tests here check that script against real archives built with the system compiler.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CSRC = ROOT / "csrc"
CHECK_SYMBOLS = ROOT / "cmake" / "check_symbols.cmake"

# Which folders (first path component under csrc/) each part may include from.
ALLOWED = {
    "common": {"common"},
    "client": {"common", "client"},
    "server": {"common", "server"},
    "fuzz": {"common", "client", "server", "fuzz"},
    "tests": set(),
    "binding": {"binding"},
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def include_violations(csrc: Path) -> list[str]:
    """Every quoted include that breaks the folder rule, as "file: include (why)"."""
    problems = []
    for part, allowed in ALLOWED.items():
        folder = csrc / part
        if not folder.is_dir():
            continue
        for source in sorted(folder.rglob("*")):
            if source.suffix not in {".c", ".h", ".cpp", ".hpp"}:
                continue
            relative = source.relative_to(csrc)
            for target in INCLUDE.findall(source.read_text(encoding="utf-8")):
                if target == "nhb.h":
                    continue
                # The binding and the fuzz targets include their own folder's headers
                # by bare name; everything else names the folder.
                if "/" not in target and part in {"binding", "fuzz"}:
                    if (folder / target).is_file():
                        continue
                    problems.append(f"{relative}: {target} (no such file in csrc/{part}/)")
                    continue
                head, _, _ = target.partition("/")
                if ".." in target.split("/") or "/" not in target:
                    problems.append(f'{relative}: {target} (write it from csrc/: "common/x.h")')
                elif head not in allowed:
                    problems.append(f"{relative}: {target} (csrc/{part}/ may not include {head}/)")
                elif not (csrc / target).is_file():
                    problems.append(f"{relative}: {target} (no such file)")
    return problems


def test_client_and_server_share_only_common() -> None:
    assert include_violations(CSRC) == []


def test_every_core_source_is_in_a_part() -> None:
    # CMakeLists.txt builds csrc/{common,client,server}/*.c only; a .c or .h at the top
    # (other than the public nhb.h) would be in no part.
    loose = sorted(p.name for p in CSRC.iterdir() if p.is_file())
    assert loose == ["nhb.h"]


def test_include_rule_catches_a_crossing(tmp_path: Path) -> None:
    for part in ("common", "client", "server"):
        (tmp_path / part).mkdir()
    (tmp_path / "nhb.h").write_text("")
    (tmp_path / "common" / "internal.h").write_text('#include "nhb.h"\n')
    (tmp_path / "server" / "server_internal.h").write_text('#include "common/internal.h"\n')
    (tmp_path / "client" / "client.h").write_text('#include "common/internal.h"\n')
    assert include_violations(tmp_path) == []

    (tmp_path / "client" / "pool.c").write_text(
        '#include "client/client.h"\n#include "server/server_internal.h"\n'
    )
    (tmp_path / "common" / "util.c").write_text('#include "internal.h"\n')
    assert sorted(include_violations(tmp_path)) == [
        "client/pool.c: server/server_internal.h (csrc/client/ may not include server/)",
        'common/util.c: internal.h (write it from csrc/: "common/x.h")',
    ]


def _archive(tmp_path: Path, source: str) -> Path:
    cc, ar = shutil.which("cc") or shutil.which("gcc"), shutil.which("ar")
    if cc is None or ar is None:
        pytest.skip("no C compiler or ar")
    c_file, obj, lib = tmp_path / "x.c", tmp_path / "x.o", tmp_path / "libx.a"
    c_file.write_text(source)
    subprocess.run([cc, "-c", str(c_file), "-o", str(obj)], check=True)
    subprocess.run([ar, "rcs", str(lib), str(obj)], check=True)
    return lib


def _check_symbols(lib: Path) -> subprocess.CompletedProcess[str]:
    cmake, nm = shutil.which("cmake"), shutil.which("nm")
    if cmake is None or nm is None:
        pytest.skip("no cmake or nm")
    return subprocess.run(
        [cmake, f"-DNM={nm}", f"-DLIB={lib}", "-P", str(CHECK_SYMBOLS)],
        capture_output=True, text=True, check=False,
    )


def test_symbol_check_accepts_the_prefixes(tmp_path: Path) -> None:
    lib = _archive(tmp_path, "int nhb_public = 1;\nint nhb__internal(void) { return 2; }\n"
                             "static int helper(void) { return 3; }\nint nhb__h(void) { return helper(); }\n")
    result = _check_symbols(lib)
    assert result.returncode == 0, result.stderr


def test_symbol_check_names_an_unprefixed_global(tmp_path: Path) -> None:
    lib = _archive(tmp_path, "int nhb_public = 1;\nint srv_helper(void) { return 2; }\n")
    result = _check_symbols(lib)
    assert result.returncode != 0
    assert "srv_helper" in result.stderr
    assert "nhb_public" not in result.stderr


# Names a header shares with every file that includes it: macros, typedefs, struct/union/enum
# tags and static inline functions (a "} name;" only at the start of a line: an indented one
# is a member).
_HEADER_NAMES = re.compile(
    r"^\s*#\s*define\s+(\w+)"
    r"|^\s*typedef\s[^;{]*?\b(\w+)\s*;"
    r"|^}\s*(\w+)\s*;"
    r"|^\s*(?:typedef\s+)?(?:struct|union|enum)\s+(\w+)\s*\{"
    r"|^\s*static\s+inline\s[^(]*?\b(\w+)\s*\(",
    re.MULTILINE,
)


def test_shared_headers_use_the_prefixes() -> None:
    headers = [CSRC / "nhb.h", *sorted((CSRC / "common").glob("*.h")),
               CSRC / "client" / "client.h", CSRC / "server" / "server_internal.h"]
    bad = []
    for header in headers:
        for match in _HEADER_NAMES.finditer(header.read_text(encoding="utf-8")):
            name = next(g for g in match.groups() if g)
            if not name.lower().startswith("nhb_"):
                bad.append(f"{header.relative_to(CSRC)}: {name}")
    assert bad == []
