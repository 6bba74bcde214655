"""`nhbench._signals.stop_on_signals`, the one SIGINT/SIGTERM handler of the commands, with
real signals sent to this process. The commands' behaviour on signals (exit statuses,
partial results, kept steps) is checked end to end in test_cli_run.py, test_sweep_cli.py
and test_server.py."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from nhbench._signals import stop_on_signals


def _send(sig: int) -> None:
    # The handler runs in the main thread at the next bytecode after kill() returns.
    os.kill(os.getpid(), sig)


def test_first_signal_stops_and_second_sigint_aborts() -> None:
    stops: list[int] = []
    notices: list[tuple[int, bool]] = []
    with pytest.raises(KeyboardInterrupt):
        with stop_on_signals(stops.append, notice=lambda s, first: notices.append((s, first))):
            _send(signal.SIGTERM)
            _send(signal.SIGTERM)
            _send(signal.SIGINT)
            pytest.fail("the second signal, a SIGINT, did not abort")
    assert stops == [signal.SIGTERM, signal.SIGTERM]
    assert notices == [(signal.SIGTERM, True), (signal.SIGTERM, False)]


def test_without_abort_every_signal_only_stops() -> None:
    stops: list[int] = []
    with stop_on_signals(stops.append, second_sigint_aborts=False):
        _send(signal.SIGINT)
        _send(signal.SIGINT)
        _send(signal.SIGTERM)
    assert stops == [signal.SIGINT, signal.SIGINT, signal.SIGTERM]


def test_previous_handlers_are_restored() -> None:
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    with stop_on_signals(lambda signum: None):
        assert signal.getsignal(signal.SIGTERM) is not before[1]
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_outside_the_main_thread_nothing_is_installed() -> None:
    before = signal.getsignal(signal.SIGTERM)
    seen: list[object] = []

    def body() -> None:
        with stop_on_signals(lambda signum: None):
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert seen == [before]
