"""Fortio 1.66.5's REST API (its rapi/ package) on the web UI of `nhbench.browse`, so that
a script written against ``fortio server`` drives ``nhbench ui`` unchanged.

Routes, under the UI's prefix (``/fortio/``) and at the root:

* ``rest/run``: a run from query parameters or a JSON body (``jsonPath`` picks an object
  in it; query parameters win), with Fortio's names and defaults (``qps`` 8, ``c`` 4,
  ``t`` 5s, ``t=on`` until stopped, ``n``, ``p``, ``r``, ``labels``, ``H`` and a JSON
  ``headers`` array, ``payload``, ``X``, ``h2``, ``https-insecure``, ``timeout``,
  ``jitter``, ``uniform``, ``nocatchup``, ``save``). Synchronous: Fortio's JSON result;
  ``async=on``: ``{"message": "started", "RunID", "Count", "ResultID", "ResultURL"}``.
* ``rest/status`` (``runid``): ``{"Statuses": {"ID": {"RunID", "State", "RunnerOptions"}}}``
  for the runs in progress (State 2 running, 3 stopping), as Fortio.
* ``rest/stop`` (``runid``, 0 or none: all; ``wait``): the stopping reply of ``async``.
* ``rest/dns`` (``name``): ``{"Name", "IPv4", "IPv6"}``.
* ``data/ID.json``: a saved result (``save=on`` writes Fortio's JSON there, in the browsed
  directory; every run also writes its nhbench JSON, listed by the browser).

Errors are Fortio's: status 400 and ``{"error": true, "message", "exception"}``. What the
UI's safety refuses (the token, another site's page, the caps, the allow-list) has the same
shape with status 403. Runners other than HTTP(S) (``runner=grpc``, ``tcp://``,
``udp://``) are refused by name. ``resolve`` (connect to this address, the URL's host kept
in Host and the TLS name) is nhbench's ``resolve`` option; with an allow-list
(``--allow-target``) its address must pass the same check as the URL's host (403 otherwise:
a host name on the list must not carry a run to another address). docs/fortio.md.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, parse_qs

from .._exceptions import RunRefusedError
from ..browse import LiveRun, UIHandle, send, start_ui
from ..options import UILimits
from ..outputs._output_dir import fortio_id_text
from ._fortio_output import FortioRun, fortio_json_text

if TYPE_CHECKING:
    from ..options import Options

__all__ = ["DEFAULT_PERCENTILES", "FortioRest", "start_fortio_ui"]

#: Fortio's defaults (periodic.DefaultRunnerOptions).
DEFAULT_QPS = 8.0
DEFAULT_THREADS = 4
DEFAULT_DURATION = 5.0
DEFAULT_RESOLUTION = 0.001
DEFAULT_PERCENTILES = (50.0, 75.0, 90.0, 99.0, 99.9)
_RUNNING, _STOPPING = 2, 3


@dataclass
class FortioSpec:
    """What a run started through the API keeps: its Fortio settings, its Fortio ID (known
    once the run has its RunID) and, once it ended, its Fortio JSON."""

    run: FortioRun
    id: str = ""
    json_text: str = ""
    ready: threading.Event = field(default_factory=threading.Event)


class _Refused(Exception):
    def __init__(self, status: int, message: str, exception: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.exception = exception


def _go_numbers(value: Any) -> Any:
    """Go's encoding/json writes a whole float64 without a fraction (``50``, not ``50.0``):
    a script comparing a reply's values reads the same numbers as from Fortio."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _go_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_go_numbers(item) for item in value]
    return value


def _reply(handler: Any, status: int, document: dict[str, Any]) -> None:
    send(handler, status, "application/json",
         json.dumps(_go_numbers(document), separators=(",", ":")).encode())


def _error(handler: Any, status: int, message: str, exception: str | None = None) -> None:
    document: dict[str, Any] = {"error": True, "message": message}
    if exception:
        document["exception"] = exception
    _reply(handler, status, document)


def _config_at_path(path: str, data: dict[str, Any]) -> dict[str, Any]:
    """Fortio's GetConfigAtPath: ``.a.b`` picks ``data["a"]["b"]``."""
    for part in [p for p in path.strip(".").split(".") if p] if path else []:
        if part not in data:
            raise _Refused(400, "body json deserialization error", f'"{part}" not found in json')
        if not isinstance(data[part], dict):
            raise _Refused(400, "body json deserialization error", f'"{part}" path is not a map')
        data = data[part]
    return data


class _Params:
    """Fortio's FormValue: the query first, then the JSON body's string values."""

    def __init__(self, query: dict[str, list[str]], body: dict[str, Any] | None) -> None:
        self.query = query
        self.body = body or {}

    def get(self, key: str) -> str:
        for value in self.query.get(key, []):
            if value:
                return value
        found = self.body.get(key)
        return found if isinstance(found, str) else ""

    def on(self, key: str) -> bool:
        return self.get(key) == "on"


def _number(params: _Params, key: str, kind: type[int] | type[float]) -> Any:
    text = params.get(key).strip()
    if not text:
        return kind(0)
    try:
        return kind(text)
    except ValueError:
        raise _Refused(400, f"parsing {key}", f"invalid {kind.__name__} {text!r}") from None


def _go_duration(text: str, what: str) -> float:
    """Go's time.ParseDuration, with its error text."""
    from ..options import parse_go_duration

    seconds = parse_go_duration(text)
    if seconds is None:
        raise _Refused(400, f"parsing {what}", f'time: invalid duration "{text}"')
    return seconds


def options_from_params(params: _Params) -> tuple[Options, FortioRun]:
    """The run a ``rest/run`` request describes, as nhbench `Options` (validated once, by
    `Options`) and the `FortioRun` its Fortio JSON needs; `_Refused` with Fortio's message."""
    from pydantic import ValidationError

    from ..options import Options, format_validation_error

    url = params.get("url").strip()
    if not url:
        raise _Refused(400, "URL is required")
    runner = params.get("runner") or "http"
    if runner != "http" or url.startswith(("tcp://", "udp://")):
        raise _Refused(400, "unsupported runner", f"{runner} {url}: nhbench's REST API runs "
                       "http:// and https:// only")
    qps = _number(params, "qps", float)
    qps = DEFAULT_QPS if qps == 0 else max(qps, -1.0)
    threads = _number(params, "c", int) or DEFAULT_THREADS
    threads = max(threads, 1)
    exactly = _number(params, "n", int)
    duration_text = params.get("t")
    duration: float | None = DEFAULT_DURATION
    if duration_text == "on":
        duration = None
    elif duration_text:
        duration = _go_duration(duration_text, "duration")
    percentiles: tuple[float, ...] = DEFAULT_PERCENTILES
    if params.get("p"):
        try:
            percentiles = tuple(float(p) for p in params.get("p").split(",") if p.strip())
        except ValueError as exc:
            raise _Refused(400, "parsing percentiles", str(exc)) from None
    resolution = _number(params, "r", float)
    labels = params.get("labels")
    headers = [h for h in params.query.get("H", []) if h]
    body_headers = params.body.get("headers")
    if isinstance(body_headers, list):
        headers.extend(h for h in body_headers if isinstance(h, str))
    data: dict[str, Any] = {
        "uri": url, "rps": 0 if qps < 0 else qps, "connections": threads,
        "percentiles": percentiles, "request_header": headers,
        "jitter": params.on("jitter"), "uniform": params.on("uniform"),
        "no_catchup": params.on("nocatchup"), "stats_interval": 1.0,
    }
    if exactly > 0:
        data["requests"] = exactly
    elif duration is None:
        data["no_duration"] = True
    else:
        data["duration"] = duration
    if labels:
        data["label"] = [labels]
    payload = params.get("payload")
    if payload:
        data["payload"] = payload
    if params.get("X"):
        data["request_method"] = params.get("X")
    resolve = params.get("resolve").strip()
    if "," in resolve:
        # Fortio dials the value as one host ("lookup a,b: no such host"); nhbench's own
        # resolve would take a list, which would not be the run a Fortio script asked for.
        raise _Refused(400, "invalid resolve", f"resolve: {resolve!r}: one address or host "
                       "name, as Fortio's")
    if resolve:
        # As nhbench fortio's -resolve: the connections go there (the allow-list checks it,
        # UILimits.check); the URL's host stays in Host and the TLS name.
        data["resolve"] = [resolve]
    if params.on("h2"):
        data["protocol"] = "http2"
    if params.on("https-insecure") and url.startswith("https://"):
        data["insecure"] = True
    timeout = params.get("timeout").strip()
    if timeout:
        data["request_timeout"] = _go_duration(timeout, "timeout")
    try:
        options = Options.model_validate(data)
    except ValidationError as exc:
        raise _Refused(400, "invalid run options", format_validation_error(exc)) from None
    run = FortioRun(
        run_type="HTTP", url=url, labels=labels, requested_qps=qps,
        requested_duration=None if exactly > 0 else duration, exactly=max(exactly, 0),
        connections=threads, percentiles=percentiles,
        resolution=resolution if resolution > 0 else DEFAULT_RESOLUTION,
        jitter=params.on("jitter"), uniform=params.on("uniform"),
        nocatchup=params.on("nocatchup"),
        json_fields={"Resolve": resolve} if resolve else {})
    return options, run


def _fortio_id(run_id: int, labels: str) -> str:
    """Fortio's GenID at the start, in local time as Fortio's server names its files."""
    return fortio_id_text(time.strftime("%Y-%m-%d-%H%M%S", time.localtime()), labels, run_id)


class FortioRest:
    """The ``rest/`` and ``data/`` routes over a started UI (`attach` gives its handle)."""

    def __init__(self) -> None:
        self.ui: UIHandle | None = None

    def attach(self, ui: UIHandle) -> None:
        self.ui = ui

    def __call__(self, handler: Any, method: str, route: str, parts: SplitResult,
                 body: bytes) -> bool:
        if self.ui is None:
            return False
        if route.startswith("/data/") and method == "GET":
            name = route[len("/data/"):]
            if name in ("", "index.html", "index.tsv"):
                return False  # the browser's list and Fortio's transfer list (-sync reads it)
            if "/" in name or not name.endswith(".json") or name.startswith("."):
                _error(handler, 404, "not found", name)
                return True
            handler._file(name)
            return True
        if not route.startswith("/rest/"):
            return False
        query = parse_qs(parts.query, keep_blank_values=True)
        action = route[len("/rest/"):]
        try:
            if action == "run":
                self._run(handler, query, body)
            elif action == "status":
                self._status(handler, query)
            elif action == "stop":
                self._stop(handler, query)
            elif action == "dns":
                self._dns(handler, query)
            else:
                _error(handler, 404, f"no such REST call {action!r}")
        except _Refused as refused:
            _error(handler, refused.status, refused.message, refused.exception)
        return True

    def _data_url(self, handler: Any, result_id: str) -> str:
        assert self.ui is not None
        prefix = self.ui.prefix if self.ui.prefix != "/" else "/"
        return f"http://{handler.headers.get('Host', '')}{prefix}data/{result_id}.json"

    def _check(self, handler: Any, query: dict[str, list[str]]) -> None:
        assert self.ui is not None
        reason = handler.server.ui.may_change(handler, query)
        if reason is not None:
            raise _Refused(403, "refused", reason)

    def _run(self, handler: Any, query: dict[str, list[str]], body: bytes) -> None:
        assert self.ui is not None
        self._check(handler, query)
        document = None
        if body.strip():
            try:
                loaded = json.loads(body)
            except ValueError as exc:
                raise _Refused(400, "body json deserialization error", str(exc)) from None
            if not isinstance(loaded, dict):
                raise _Refused(400, "body json deserialization error", "not a JSON object")
            document = _config_at_path((query.get("jsonPath") or [""])[0], loaded)
        params = _Params(query, document)
        options, fortio = options_from_params(params)
        save = params.on("save")
        spec = FortioSpec(fortio)
        try:
            # save=on writes Fortio's JSON as the run's one saved result (two files would
            # list the run twice in the browser).
            live = self.ui.runs.start(options, extra=spec,
                                      on_done=lambda run: self._done(run, save),
                                      save=not save)
        except RunRefusedError as exc:
            raise _Refused(403, "refused", str(exc)) from None
        except ValueError as exc:
            raise _Refused(400, "Aborting because of error", str(exc)) from None
        spec.id = _fortio_id(live.id, fortio.labels)
        spec.ready.set()
        if params.on("async"):
            _reply(handler, 200, {"message": "started", "RunID": live.id, "Count": 1,
                                  "ResultID": spec.id,
                                  "ResultURL": self._data_url(handler, spec.id)})
            return
        live.wait()
        if live.result is None or not spec.json_text:
            raise _Refused(400, "Aborting because of error", live.error)
        send(handler, 200, "application/json", spec.json_text.encode())

    def _done(self, run: LiveRun, save: bool) -> None:
        """On the run's thread, its result saved: Fortio's JSON, written as ID.json with
        ``save=on``."""
        from ..outputs import write_atomic

        assert self.ui is not None and run.result is not None
        spec: FortioSpec = run.extra
        spec.ready.wait(10)
        fortio = spec.run
        if spec.id:
            from dataclasses import replace

            fortio = replace(fortio, run_id=run.id, json_fields={**fortio.json_fields, "ID": spec.id})
        spec.json_text = fortio_json_text(run.result, fortio)
        if save and spec.id:
            write_atomic(f"{self.ui.runs.root}/{spec.id}.json", spec.json_text)
            run.saved = f"{spec.id}.json"

    def _status(self, handler: Any, query: dict[str, list[str]]) -> None:
        assert self.ui is not None
        wanted = _int((query.get("runid") or ["0"])[0])
        statuses = {}
        for run in self.ui.runs.active():
            if wanted and run.id != wanted:
                continue
            statuses[str(run.id)] = {"RunID": run.id,
                                     "State": _RUNNING if run.state == "running" else _STOPPING,
                                     "RunnerOptions": _runner_options(run)}
        _reply(handler, 200, {"Statuses": statuses})

    def _stop(self, handler: Any, query: dict[str, list[str]]) -> None:
        assert self.ui is not None
        self._check(handler, query)
        wanted = _int((query.get("runid") or ["0"])[0])
        wait = (query.get("wait") or [""])[0].lower() not in ("", "off", "false")
        if wanted <= 0:
            stopped = self.ui.runs.stop_all()
        else:
            one = self.ui.runs.stop(wanted)
            stopped = [one] if one is not None else []
        result_id = ""
        if len(stopped) == 1 and isinstance(stopped[0].extra, FortioSpec):
            result_id = stopped[0].extra.id
        if wait and len(stopped) == 1:
            stopped[0].wait(60)
        _reply(handler, 200, {
            "message": "stopped" if wait and len(stopped) == 1 else "stopping",
            "RunID": wanted, "Count": len(stopped), "ResultID": result_id,
            "ResultURL": self._data_url(handler, result_id) if result_id else ""})

    def _dns(self, handler: Any, query: dict[str, list[str]]) -> None:
        name = (query.get("name") or [""])[0]
        try:
            infos = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
        except (OSError, UnicodeError) as exc:
            raise _Refused(400, "dns failed", f"lookup {name}: {exc}") from None
        v4 = [str(i[4][0]) for i in infos if i[0] == socket.AF_INET]
        v6 = [str(i[4][0]) for i in infos if i[0] == socket.AF_INET6]
        _reply(handler, 200, {"Name": name, "IPv4": list(dict.fromkeys(v4)),
                              "IPv6": list(dict.fromkeys(v6))})


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


def _runner_options(run: LiveRun) -> dict[str, Any]:
    """Fortio's RunnerOptions of a run in progress (a UI-started run's from its options)."""
    options = run.options
    spec = run.extra if isinstance(run.extra, FortioSpec) else None
    fortio = spec.run if spec is not None else None
    duration = options.effective_duration
    return {
        "RunType": "HTTP",
        "QPS": fortio.requested_qps if fortio else (options.rps or -1),
        "Duration": int((duration or 0) * 1e9) if not options.no_duration else -1,
        "NumThreads": options.connections,
        "Percentiles": list(options.percentiles),
        "Resolution": fortio.resolution if fortio else DEFAULT_RESOLUTION,
        "Labels": fortio.labels if fortio else " ".join(options.label),
        "Exactly": options.requests or 0,
        "Jitter": options.jitter, "Uniform": options.uniform,
        "RunID": run.id, "Offset": 0, "NoCatchUp": options.no_catchup,
        "ID": spec.id if spec is not None else "",
    }


def start_fortio_ui(root: str, host: str, port: int, *, prefix: str = "/fortio/",
                    token: str | None = None, unsafe_open: bool = False,
                    limits: UILimits | None = None, stderr: Any = None,
                    forwarded_from: str | None = None) -> UIHandle:
    """The entry point for ``nhbench fortio server|report`` and ``nhbench ui``: the UI over
    `root` with Fortio's REST API, on `host`:`port`, under `prefix`. The handle has the
    bound port, the token (printed on `stderr` when generated) and `stop()`. With
    `forwarded_from` (the echo server's host) it is the internal end of the echo server's
    forward (`nhbench.browse._ui.start_ui`)."""
    rest = FortioRest()
    handle = start_ui(root, host, port, prefix=prefix, token=token, unsafe_open=unsafe_open,
                      limits=limits if limits is not None else UILimits(), extra=[rest],
                      stderr=stderr, forwarded_from=forwarded_from)
    rest.attach(handle)
    return handle
