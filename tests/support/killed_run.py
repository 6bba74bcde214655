"""A distributed run that loses a node mid-run: the Ray and ``--loadgen`` tests share it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any


def failure_when_killed(run: Callable[[], object], server: Any,
                        kill: Callable[[], object]) -> BaseException:
    """Start `run` (a long run against `server`, a TestServer) on a thread, `kill` a node
    once the server has counted 20 of its requests, and return what the run raised: it
    must end within 60 s and raise (an AssertionError otherwise)."""
    failure: list[BaseException] = []

    def target() -> None:
        try:
            run()
        except BaseException as exc:  # noqa: BLE001 - the caller reads it
            failure.append(exc)

    before = int(server.stats()["requests"])
    runner = threading.Thread(target=target)
    runner.start()
    deadline = time.monotonic() + 90
    while int(server.stats()["requests"]) - before < 20:
        assert runner.is_alive() and time.monotonic() < deadline
        time.sleep(0.1)
    kill()
    runner.join(60)
    assert not runner.is_alive()
    assert len(failure) == 1, failure
    return failure[0]
