"""The one way nhbench's commands turn SIGINT and SIGTERM into a stop: `stop_on_signals`.

``nhbench run`` (drain the requests in flight, print the partial result), ``nhbench sweep``
(abandon the step in progress, keep the finished ones) and ``nhbench server`` (stop serving,
print the final counters), and the Fortio front-end's commands (end the run and print its
report, stop the servers) all stop gracefully on the first SIGINT or SIGTERM. Run and sweep
also let a person who does not want to wait press Ctrl-C again: that second SIGINT raises
KeyboardInterrupt, which `nhbench.cli.main` turns into exit status 130 ("aborted").
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["stop_on_signals"]


@contextmanager
def stop_on_signals(
    stop: Callable[[int], None],
    *,
    notice: Callable[[int, bool], None] | None = None,
    second_sigint_aborts: bool = True,
) -> Iterator[None]:
    """While the block runs, SIGINT and SIGTERM call ``stop(signum)`` instead of ending the
    process; the previous handlers are restored when it ends.

    `notice` is called with the signal number and whether it is the first signal, before
    `stop`, to tell the person at the terminal what happens now. With
    `second_sigint_aborts`, a SIGINT after the first signal (of either kind) raises
    KeyboardInterrupt instead, so a second Ctrl-C abandons what the first one stopped
    gracefully. `stop` must be safe to call from a signal handler and more than once.

    Python runs signal handlers in the main thread only, between bytecodes (so a waiting
    loop must wake up now and then for a signal to take effect), and only the main thread
    may install them: in any other thread the block runs with the handlers as they are.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stopping = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        if signum == signal.SIGINT and stopping and second_sigint_aborts:
            raise KeyboardInterrupt
        first, stopping = not stopping, True
        if notice is not None:
            notice(signum, first)
        stop(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
