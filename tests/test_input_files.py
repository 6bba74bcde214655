"""Every option that names a file to read, against the files that once grew memory without
bound or hung: /dev/zero (a character device reporting size 0), a FIFO with no writer, a
directory, a 1 GiB sparse file and a symbolic-link loop (docs/reliability.md, "Files nhbench
reads"; the one reader is nhbench._input).

Each CLI case is a real ``nhbench`` process (forked from one interpreter that has imported
nhbench, support/nhbench_runs.py) under a 2 GiB address-space limit, so that a read that is
not bounded fails the test with a MemoryError instead of taking the machine's memory: it must
end with exit status 2 and one line naming the reason, in seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.nhbench_runs import MAIN_IMPORTS, Invocation, run_many

import nhbench
from nhbench._input import LIMITS, InputError, read_input, read_input_text

OPENSSL = shutil.which("openssl")

# What each hostile file is, and the words of the one line that must refuse it.
HOSTILE = {
    "dev-zero": "is a character device",
    "fifo": "is a FIFO",
    "directory": "is a directory",
    "sparse-1g": "over the limit of",
    "symlink-loop": "too many levels of symbolic links",
}

SOURCE_PLUGIN = json.dumps({
    "name": "nighthawk.file-based-request-source-plugin",
    "typed_config": {
        "@type": "type.googleapis.com/nighthawk.request_source."
                 "FileBasedOptionsListRequestSourceConfig",
        "file_path": "{f}",
    },
})

# option -> the command line, with {f} for the hostile file and {in} for the valid inputs.
OPTIONS: dict[str, tuple[str, ...]] = {
    "run --payload-file": ("run", "{url}", "--payload-file", "{f}", "--duration", "1s"),
    "run --grpc-payload": ("run", "grpc://127.0.0.1:{port}", "--grpc-method", "/a.B/C",
                           "--grpc-payload", "{f}", "--duration", "1s"),
    "run --replay": ("run", "{url}", "--replay", "{f}", "--duration", "1s"),
    "run request source file_path": ("run", "{url}", "--request-source-plugin-config",
                                     SOURCE_PLUGIN, "--duration", "1s"),
    "server --config": ("server", "--config", "{f}", "--listen", "127.0.0.1:0"),
    "server --tls-cert": ("server", "--listen", "127.0.0.1:0", "--tls-cert", "{f}",
                          "--tls-key", "{in}/key.pem"),
    "server --tls-key": ("server", "--listen", "127.0.0.1:0", "--tls-cert", "{in}/cert.pem",
                         "--tls-key", "{f}"),
    "sweep --scenario": ("sweep", "--scenario", "{f}"),
    "transform": ("transform", "--output-format", "json", "{f}"),
    "report": ("report", "{f}", "-o", "{out}/report.html"),
}

NEEDS_PEM = {"server --tls-cert", "server --tls-key"}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    root = tmp_path_factory.mktemp("hostile-inputs")
    fifo = root / "fifo"
    os.mkfifo(fifo)
    (root / "directory").mkdir()
    sparse = root / "sparse-1g"
    with open(sparse, "wb") as handle:
        handle.truncate(1 << 30)  # no disk blocks: a hole of 1 GiB
    loop = root / "symlink-loop"
    loop.symlink_to(loop)
    yield {"dev-zero": Path("/dev/zero"), "fifo": fifo, "directory": root / "directory",
           "sparse-1g": sparse, "symlink-loop": loop}


@pytest.fixture(scope="module")
def valid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("valid-inputs")
    if OPENSSL is not None:
        subprocess.run(
            [OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt",
             "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj", "/CN=localhost",
             "-keyout", str(root / "key.pem"), "-out", str(root / "cert.pem")],
            check=True, capture_output=True, timeout=60,
        )
    return root


@pytest.fixture(scope="module")
def closed_port() -> Iterator[int]:
    """A loopback port that is bound but not listening: connections to it are refused, and
    no other test can take it meanwhile."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


# A directory given to `report` is a campaign, which it reads as one.
CASES = [(option, kind) for option in OPTIONS for kind in HOSTILE
         if (option, kind) != ("report", "directory")]


@pytest.fixture(scope="module")
def outcomes(hostile: dict[str, Path], valid: Path, closed_port: int,
             tmp_path_factory: pytest.TempPathFactory,
             ) -> dict[tuple[str, str], subprocess.CompletedProcess[str]]:
    root = tmp_path_factory.mktemp("input-runs")
    values = {"in": str(valid), "port": str(closed_port),
              "url": f"http://127.0.0.1:{closed_port}/"}
    invocations = []
    cases = [case for case in CASES if OPENSSL is not None or case[0] not in NEEDS_PEM]
    for index, (option, kind) in enumerate(cases):
        cwd = root / f"case{index}"
        cwd.mkdir()
        places = {**values, "f": str(hostile[kind]), "out": str(cwd)}
        args = []
        for arg in OPTIONS[option]:
            for name, value in places.items():
                arg = arg.replace("{" + name + "}", value)
            args.append(arg)
        invocations.append(Invocation(args, cwd))
    procs = run_many(invocations, os.environ, jobs=4, timeout=60,
                     preload=(*MAIN_IMPORTS, "nhbench.sweep", "nhbench.report"),
                     rlimit_as=2 << 30)
    return dict(zip(cases, procs, strict=True))


@pytest.mark.parametrize(("option", "kind"), CASES, ids=[f"{o} {k}" for o, k in CASES])
def test_a_hostile_input_file_is_refused_in_one_line(
    option: str, kind: str,
    outcomes: dict[tuple[str, str], subprocess.CompletedProcess[str]],
) -> None:
    if (option, kind) not in outcomes:
        pytest.skip("needs openssl for the valid half of the key pair")
    proc = outcomes[(option, kind)]
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr, proc.stderr
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert HOSTILE[kind] in lines[0], lines[0]
    assert proc.stdout == ""


def test_every_kind_has_a_limit_and_a_reason_in_the_docs() -> None:
    text = (Path(__file__).parent.parent / "docs" / "reliability.md").read_text("utf-8")
    section = text.split("## Files nhbench reads", 1)[1].split("\n## ", 1)[0]
    for kind, (limit, _reason) in LIMITS.items():
        row = next((line for line in section.splitlines() if line.startswith(f"| `{kind}`")),
                   None)
        assert row is not None, f"docs/reliability.md has no row for {kind}"
        mib = f"{limit // (1 << 20)} MiB"
        assert mib in row, (kind, row)


def test_load_result_refuses_each_hostile_file(hostile: dict[str, Path]) -> None:
    for kind, path in hostile.items():
        with pytest.raises(nhbench.ResultFileError, match=HOSTILE[kind]):
            nhbench.load_result(path)


def test_the_reader_bounds_a_file_that_reports_no_size(tmp_path: Path) -> None:
    # /proc files report st_size 0; the limit still holds while reading.
    with pytest.raises(InputError, match="over the limit of 16 bytes"):
        read_input("/proc/self/maps", "config", "maps", limit=16)
    # A symbolic link to a regular file is followed; undecodable text is one line.
    target = tmp_path / "target.txt"
    target.write_bytes(b"ok \xff")
    link = tmp_path / "link"
    link.symlink_to(target)
    assert read_input(link, "config") == b"ok \xff"
    with pytest.raises(InputError, match=r"not UTF-8 text \(byte 0xff at offset 3\)"):
        read_input_text(link, "config")


def test_ssh_key_and_known_hosts_are_read_through_the_reader(
    hostile: dict[str, Path], closed_port: int,
) -> None:
    from nhbench.hosts import SSHHost, SSHTarget

    target = SSHTarget.parse(f"127.0.0.1:{closed_port}")
    for kind, path in hostile.items():
        with pytest.raises(nhbench.OptionsError, match=HOSTILE[kind]):
            SSHHost.connect(target, key_filename=path, use_agent=False, timeout=2)
        with pytest.raises(nhbench.HostKeyError, match=HOSTILE[kind]):
            SSHHost.connect(target, known_hosts=path, use_agent=False, timeout=2)


def test_python_api_payload_file_is_refused_before_the_run(
    hostile: dict[str, Path], closed_port: int,
) -> None:
    for kind, path in hostile.items():
        with pytest.raises(ValueError, match=HOSTILE[kind]):
            nhbench.Options(uri=f"http://127.0.0.1:{closed_port}/", payload_file=str(path))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))


def _laughs(levels: int = 9) -> str:
    """A "billion laughs": nine anchors, each a list of nine aliases of the one before
    (9**9 = 387 million strings once expanded, from 700 bytes)."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_yaml_alias_bombs_are_refused_everywhere_yaml_is_read(tmp_path: Path) -> None:
    from nhbench._relaxed_json import load_yaml

    bomb = _laughs()
    # Under static_resources the Envoy-bootstrap walk expanded every alias (it spun for
    # minutes); as a sweep scenario and an options list it must be refused just the same.
    config = tmp_path / "bomb.yaml"
    config.write_text("static_resources:\n  " + bomb.replace("\n", "\n  ").rstrip() + "\n")
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text("label: x\n" + bomb)
    procs = run_many(
        [Invocation(("server", "--config", str(config), "--listen", "127.0.0.1:0"), tmp_path),
         Invocation(("sweep", "--scenario", str(scenario)), tmp_path)],
        os.environ, jobs=2, timeout=30, preload=(*MAIN_IMPORTS, "nhbench.sweep"),
        rlimit_as=2 << 30)
    for proc in procs:
        assert proc.returncode == 2, proc.stderr
        assert "YAML aliases expand to more than 100000 nodes" in proc.stderr
        assert len(proc.stderr.splitlines()) == 1
    with pytest.raises(ValueError, match="refers to a node that contains it"):
        load_yaml("a: &a [1, *a]\n", "x")
    with pytest.raises(ValueError, match="more than 1000 YAML aliases"):
        load_yaml("a: &a 1\nb: [" + ", ".join(["*a"] * 1001) + "]\n", "x")
    # Anchors as real configs use them still load, shared as PyYAML shares them.
    data = load_yaml("base: &base {x: 1}\none: *base\ntwo: [*base, *base]\n", "x")
    assert data == {"base": {"x": 1}, "one": {"x": 1}, "two": [{"x": 1}, {"x": 1}]}
