"""A check shared by the tests of every entry point that writes a file atomically (they all
end in `nhbench._io`, and each must keep its promise on its own)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest


def assert_failed_rename_keeps_the_old_file(write: Callable[[Path, str], object], target: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """``write(target, "new\\n")`` over a `target` that holds "old\\n" and is alone in its
    directory, with the final rename failing as on a full disk: the writer raises an
    OSError, the old content stays and no temporary file is left beside it."""

    def failing_replace(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError):
        write(target, "new\n")
    assert target.read_text() == "old\n"
    assert [p.name for p in target.parent.iterdir()] == [target.name]  # no temporary left
