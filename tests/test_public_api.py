"""The public face of the package: every exception is importable from `nhbench` and
documented, and `CoreError` carries the C core's error code and name."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nhbench
from nhbench import _exceptions

REPO = Path(__file__).resolve().parent.parent


def _package_exceptions() -> dict[str, type[BaseException]]:
    """Every public exception class defined in any module of the package (the `__main__`
    modules run the CLI when imported, and define nothing). A private class (``_Refused``)
    is one module's control flow, caught there and never raised to a caller."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(nhbench.__path__, "nhbench."):
        if info.name.rsplit(".", 1)[-1] == "__main__":
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                not name.startswith("_")
                and inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
            ):
                found[name] = value
    return found


def test_every_exception_class_is_exported_and_documented() -> None:
    found = _package_exceptions()
    # The walk does reach the sweep side (hosts, campaigns), not only the run API.
    assert {"NHBenchError", "CoreError", "HostKeyError", "CampaignError", "OutputError"} <= set(found)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    hierarchy = _exceptions.__doc__ or ""
    for name, cls in sorted(found.items()):
        assert name in nhbench.__all__, f"{name} is not in nhbench.__all__"
        assert getattr(nhbench, name) is cls, f"nhbench.{name} is not {cls.__module__}.{name}"
        assert f"`{name}`" in readme, f"{name} is not in the README's exception list"
        assert name in hierarchy, f"{name} is not in the hierarchy of nhbench._exceptions"


def test_core_error_carries_the_core_code_and_name() -> None:
    # A real run whose core cannot start: start() raises the soft descriptor limit to the
    # hard one and checks the run fits, so both are lowered, and then (after that check,
    # in core_config) every descriptor left is taken, so the first descriptor the core
    # opens (a worker's event loop) fails with EMFILE. In a child process, so that the test
    # process keeps its limit.
    script = textwrap.dedent(
        """
        import json, os, resource, sys
        import nhbench
        from nhbench._run import load_core

        class Crowded(nhbench.Benchmark):
            def core_config(self):
                config = super().core_config()
                while True:
                    try:
                        os.open(os.devnull, os.O_RDONLY)
                    except OSError:
                        return config

        load_core()
        bench = Crowded("http://127.0.0.1:9/", rps=10, duration="1s", connections=1)
        free = os.open(os.devnull, os.O_RDONLY)
        os.close(free)
        resource.setrlimit(resource.RLIMIT_NOFILE, (free + 100, free + 100))
        try:
            bench.start()
        except nhbench.CoreError as exc:
            out = {"type": type(exc).__name__, "code": exc.code, "name": exc.name, "text": str(exc)}
        else:
            bench.stop()
            out = {"type": None}
        sys.stdout.write(json.dumps(out))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["type"] == "CoreError", out
    assert out["name"] == "EMFILE", out
    assert out["code"] == -24, out  # libuv's UV_EMFILE: the negated errno
    assert out["text"].startswith("could not start the workers: cannot start the run: "), out
    assert out["text"].endswith("(EMFILE)"), out


def test_core_error_without_a_core_code() -> None:
    # The watchdog's CoreError has no code from the core: both attributes are None.
    exc = nhbench.CoreError("the run did not finish")
    assert (exc.code, exc.name, str(exc)) == (None, None, "the run did not finish")
    rejected = nhbench.ConfigRejectedError("the core rejected the configuration: x")
    assert isinstance(rejected, nhbench.OptionsError) and rejected.option is None
    assert (rejected.code, rejected.name) == (None, None)


def test_run_is_the_function_face_in_api() -> None:
    # nhbench.run is defined in _api.py, the package's function face, with the signature it
    # always had: the URI (or Options) positional only, everything else by keyword.
    from nhbench import _api

    assert nhbench.run is _api.run and nhbench.run.__module__ == "nhbench._api"
    params = inspect.signature(nhbench.run).parameters
    assert list(params) == ["uri", "cluster", "on_progress", "on_interval", "options"]
    assert params["uri"].kind is inspect.Parameter.POSITIONAL_ONLY
    assert params["options"].kind is inspect.Parameter.VAR_KEYWORD
