"""The load generator's side of a ``--loadgen`` run: ``python -m nhbench.distributed._agent``.

The controller starts this module on each load generator (over SSH, ``docker exec -i``,
``kubectl exec -i`` or as a local process) and talks to it in JSON lines on its stdin and
stdout (docs/distributed.md, "Load generators over SSH and in containers"). Every request is
``{"id": N, "op": NAME, "args": {...}}`` and gets one answer ``{"id": N, "ok": VALUE}`` or
``{"id": N, "error": {"kind": ..., "message": ..., "option": ...}}``. The operations are
those of the Ray load actor (`_LoadActor`: info, clock, check, run, progress, stop), served
by the same class, so a node does the same work whichever way the controller reaches it.

One agent serves many runs, one after another (a campaign's steps: `LoadgenSession`); the
``run``, ``progress`` and ``stop`` requests name their run (``"run_id"``), as the actor's
calls do.

``run`` answers when the run has ended, on a thread of its own, so that ``stop``,
``progress`` and ``clock`` are answered while it lasts. End of input stops a run that is
going and ends the process: a controller that goes away leaves nothing running.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from typing import IO, Any

from .._exceptions import NHBenchError, OptionsError
from .._version import __version__
from ._cluster import _LoadActor

__all__ = ["main"]


class _Agent(_LoadActor):
    def info(self) -> dict[str, Any]:
        return {"version": __version__, "hostname": socket.gethostname(), "pid": os.getpid()}

    def current_run(self) -> str:
        """The id of the run going (or of the last one)."""
        with self._lock:
            return self._run_id


def _error(exc: BaseException) -> dict[str, Any]:
    kind = ("options" if isinstance(exc, OptionsError)
            else "nhbench" if isinstance(exc, NHBenchError) else "other")
    text = (str(exc).strip() or type(exc).__name__).splitlines()[0][:500]
    return {"kind": kind, "message": text, "option": getattr(exc, "option", None)}


def _run_id(args: dict[str, Any]) -> str:
    # Which run a call is about: one agent serves many runs of a session (a campaign's
    # steps), and a stop sent for one must not stop the next (`_LoadActor`).
    return str(args.get("run_id") or "")[:100]


def main() -> int:
    # The protocol owns the original stdout; anything else that writes to fd 1 (a library,
    # the core) goes to stderr instead, so it cannot break a line of the protocol.
    out: IO[str] = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    lock = threading.Lock()
    agent = _Agent()

    def send(message: dict[str, Any]) -> None:
        line = json.dumps(message, separators=(",", ":"))
        with lock:
            out.write(line + "\n")
            out.flush()

    def answer(request_id: object, op: str, args: dict[str, Any]) -> None:
        try:
            if op == "info":
                value: Any = agent.info()
            elif op == "clock":
                value = agent.clock()
            elif op == "check":
                value = agent.check(args["options"])
            elif op == "run":
                value = agent.run(args["options"], _run_id(args))
            elif op == "progress":
                value = agent.progress(_run_id(args))
            elif op == "stop":
                agent.stop(_run_id(args))
                value = None
            else:
                raise ValueError(f"unknown operation {op!r}")
        except Exception as exc:  # noqa: BLE001 - every failure goes back as one line
            send({"id": request_id, "error": _error(exc)})
            return
        send({"id": request_id, "ok": value})

    runner: threading.Thread | None = None
    for line in sys.stdin:
        try:
            request = json.loads(line)
            request_id, op = request["id"], str(request["op"])
            args = dict(request.get("args") or {})
        except (ValueError, KeyError, TypeError) as exc:
            send({"id": None, "error": _error(exc)})
            continue
        if op == "run":
            runner = threading.Thread(target=answer, args=(request_id, op, args), daemon=True)
            runner.start()
        else:
            answer(request_id, op, args)
    # The controller went away (or closed our input to end us): stop a run still going,
    # again until it has ended (a run whose request came last may not have begun yet).
    deadline = time.monotonic() + 30.0
    agent.stop(agent.current_run())
    while runner is not None and runner.is_alive() and time.monotonic() < deadline:
        runner.join(timeout=0.1)
        agent.stop(agent.current_run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
