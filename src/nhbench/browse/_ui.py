"""``nhbench ui DIR``: the result browser plus a form that starts runs, their live progress
over Server-Sent Events, a stop button, and the safety of a remote trigger.

`start_ui` serves it (the browser's `BrowseServer` with `UIRoutes` mounted) and returns a
`UIHandle` (bound port, token, `stop()`); the Fortio front-end mounts Fortio's REST API on
it through `extra` routes (`nhbench.compat._fortio_rest`).

Routes added to the browser's (each also under the prefix, e.g. ``/fortio/``):

* ``GET /run``: the form; ``POST /run``: start a run (form fields, validated by `Options`),
  then 303 to its live page.
* ``GET /runs/ID``: the live page (rate and p99 per interval drawn as they arrive);
  ``GET /runs/ID/events``: the interval records as Server-Sent Events, then an ``end``
  event naming the result's page; ``POST /runs/ID/stop``: drain and stop the run.

Who may start or stop a run (docs/outputs.md, "Running tests from the browser"):

* On a loopback address nobody else can reach the server; a token (``--token``) is asked
  only when given. On any other address a token is required: generated and printed on
  stderr when not given. ``unsafe_open`` (``--ui-unsafe-open``, Fortio's behaviour) drops
  that requirement and says so loudly.
* Forwarded (``forwarded_from``: the echo server's address, whose C server pipes the UI's
  path here with a PROXY line naming the client; `._server`): the rule above applies to
  the address clients reach, judged per client by its real address. A loopback client there
  is as trusted as on a loopback-bound UI: it needs no token unless one was given; any other
  client needs the token (generated and printed when none was given).
* Without a token, a client that is not on loopback may start or stop nothing (unless
  ``unsafe_open``): whatever the listener, only loopback clients are trusted token-free.
* A request that starts or stops a run must carry the token when one is required: the
  ``Authorization: Bearer`` header, an ``X-Nhbench-Token`` header, a ``token`` query
  parameter, or a browser session that gave it once in the form.
* The form's POSTs need the per-session CSRF value (an HMAC of the session cookie, which is
  SameSite=Strict and HttpOnly) and a same-origin ``Origin``; any state-changing request a
  browser makes for another site's page (``Sec-Fetch-Site`` cross-site or same-site, or an
  ``Origin`` that is not this server) is refused, navigations included.
* The `UILimits` (rate, connections, duration, runs at once, target allow-list) refuse a run
  before anything is sent.
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import ipaddress
import json
import secrets
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import SplitResult, parse_qs, quote

from .._exceptions import RunRefusedError
from ..options import DEFAULT_UI_LIMITS, UILimits
from ._pages import _render, error_page, printable, result_url
from ._runs import LiveRun, RunManager

if TYPE_CHECKING:
    from ..options import Options
    from ._server import _Handler

__all__ = ["MAX_BODY", "MAX_STREAMS", "FORM_FIELDS", "UIHandle", "UIRoutes", "is_loopback",
           "options_from_form", "start_ui"]

#: Bytes of a request body (a form or a REST JSON body).
MAX_BODY = 1024 * 1024
#: Live streams (Server-Sent Events) open at once; each holds a connection and a thread.
MAX_STREAMS = 8
#: Seconds between keep-alive comments on a quiet stream.
_STREAM_PING = 10.0
_COOKIE = "nhbench_ui"
#: Sessions remembered; the oldest is forgotten first.
_MAX_SESSIONS = 1000

#: The form's fields: the only options a browser may set (no file paths, no output files,
#: no cluster): name -> how a value is read.
FORM_FIELDS = ("uri", "rps", "connections", "duration", "requests", "protocol",
               "request_method", "request_header", "payload", "content_type", "percentiles",
               "label", "stats_interval", "request_timeout", "insecure")


def is_loopback(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host == "localhost"
    # A dual-stack socket sees an IPv4 client as ::ffff:a.b.c.d.
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def options_from_form(form: dict[str, list[str]]) -> Options:
    """The run the form describes, validated by `Options` (ValueError with its message)."""
    from pydantic import ValidationError

    from ..options import Options, format_validation_error

    data: dict[str, Any] = {}
    for name in FORM_FIELDS:
        values = [value for value in form.get(name, []) if value.strip()]
        if not values:
            continue
        if name == "request_header":
            data[name] = [line.strip() for value in values for line in value.splitlines()
                          if line.strip()]
        elif name == "label":
            data[name] = [values[0].strip()]
        elif name == "insecure":
            data[name] = values[0] in ("on", "true", "1")
        else:
            data[name] = values[0].strip() if name != "payload" else values[0]
    unknown = sorted(set(form) - set(FORM_FIELDS) - {"csrf", "token"})
    if unknown:
        raise ValueError(f"not a field of the form: {', '.join(unknown)}")
    if "uri" not in data:
        raise ValueError("uri: a URL is required")
    try:
        return Options.model_validate(data)
    except ValidationError as exc:
        raise ValueError(format_validation_error(exc)) from None


@dataclass
class _Sessions:
    """Browser sessions (a random cookie each): their CSRF value and whether they gave the
    token."""

    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    authorized: collections.OrderedDict[str, bool] = field(
        default_factory=collections.OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def csrf(self, session: str) -> str:
        return hmac.new(self.secret, session.encode(), hashlib.sha256).hexdigest()

    def known(self, session: str | None) -> bool:
        with self.lock:
            return session is not None and session in self.authorized

    def new(self) -> str:
        session = secrets.token_urlsafe(24)
        with self.lock:
            self.authorized[session] = False
            while len(self.authorized) > _MAX_SESSIONS:
                self.authorized.popitem(last=False)
        return session

    def authorize(self, session: str) -> None:
        with self.lock:
            if session in self.authorized:
                self.authorized[session] = True

    def is_authorized(self, session: str | None) -> bool:
        with self.lock:
            return session is not None and self.authorized.get(session, False)


#: A route a front-end adds: (handler, method, route, URL parts, body) -> handled.
ExtraRoute = Callable[["_Handler", str, str, SplitResult, bytes], bool]


class UIRoutes:
    """The UI's routes, mounted on a `BrowseServer`; `extra` routes (Fortio's REST API) are
    tried first."""

    def __init__(self, runs: RunManager, *, token: str | None,
                 extra: list[ExtraRoute] | None = None, loopback_free: bool = False,
                 loopback_only: bool = False) -> None:
        self.runs = runs
        self.token = token
        # Loopback clients need no token (a forwarded UI whose token was generated, not
        # given); clients not on loopback may change nothing (no token guards the UI).
        self.loopback_free = loopback_free
        self.loopback_only = loopback_only
        self.extra = list(extra or [])
        self.sessions = _Sessions()
        self._streams = threading.BoundedSemaphore(MAX_STREAMS)

    # ---- who may ask -------------------------------------------------------------------

    @staticmethod
    def client_on_loopback(handler: _Handler) -> bool:
        """The real client (the PROXY line's, when forwarded) is on this machine."""
        return is_loopback(str(handler.client_address[0]))

    def foreign_client(self, handler: _Handler) -> str | None:
        """Why this client may change nothing whatever it sends, or None."""
        if self.loopback_only and not self.client_on_loopback(handler):
            return ("only clients on this machine (loopback) may start or stop runs here: "
                    "no token guards this UI (give one to open it to others)")
        return None

    def needs_token(self, handler: _Handler, session: str | None) -> bool:
        """The form must ask this client for the token."""
        return (self.token is not None and not self.sessions.is_authorized(session)
                and not (self.loopback_free and self.client_on_loopback(handler)))

    def token_given(self, handler: _Handler, query: dict[str, list[str]]) -> bool:
        """The request carries the token (or none is required of this client)."""
        if self.token is None or (self.loopback_free and self.client_on_loopback(handler)):
            return True
        given = handler.headers.get("Authorization", "")
        candidates = [given[7:].strip()] if given.lower().startswith("bearer ") else []
        candidates.append(handler.headers.get("X-Nhbench-Token", ""))
        candidates.extend(query.get("token", []))
        return any(hmac.compare_digest(c.encode(), self.token.encode())
                   for c in candidates if c)

    @staticmethod
    def foreign_origin(handler: _Handler) -> bool:
        """A browser made this request for another site's page: state must not change,
        even for a navigation (a link or a form on another site)."""
        site = handler.headers.get("Sec-Fetch-Site")
        if site is not None and site not in ("same-origin", "none"):
            return True
        origin = handler.headers.get("Origin")
        if origin is None:
            return False
        host = handler.headers.get("Host", "")
        return origin.lower() not in (f"http://{host}".lower(), f"https://{host}".lower())

    def may_change(self, handler: _Handler, query: dict[str, list[str]]) -> str | None:
        """None when this request (a script's: REST, or a stop) may start or stop a run,
        else the one-line reason it may not."""
        if self.foreign_origin(handler):
            return "a request made by another site's page may not start or stop runs"
        foreign = self.foreign_client(handler)
        if foreign is not None:
            return foreign
        if not (self.token_given(handler, query)
                or self.sessions.is_authorized(self.session(handler))):
            return "the token is required to start or stop runs (Authorization: Bearer TOKEN)"
        return None

    @staticmethod
    def session(handler: _Handler) -> str | None:
        for part in handler.headers.get("Cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == _COOKIE:
                return value
        return None

    def _session_for_page(self, handler: _Handler) -> tuple[str, str | None]:
        """The page's session, and the Set-Cookie value when a new one was made."""
        session = self.session(handler)
        if self.sessions.known(session):
            assert session is not None
            return session, None
        session = self.sessions.new()
        return session, f"{_COOKIE}={session}; Path=/; HttpOnly; SameSite=Strict"

    def _form_allowed(self, handler: _Handler, form: dict[str, list[str]]) -> str | None:
        """The form's CSRF guard and the token: None when the POST may act."""
        if self.foreign_origin(handler):
            return "a form on another site's page may not start or stop runs"
        foreign = self.foreign_client(handler)
        if foreign is not None:
            return foreign
        session = self.session(handler)
        if not self.sessions.known(session):
            return "no session: load the form again"
        assert session is not None
        csrf = (form.get("csrf") or [""])[0]
        if not hmac.compare_digest(csrf.encode(), self.sessions.csrf(session).encode()):
            return "the form's CSRF value is missing or wrong: load the form again"
        if self.needs_token(handler, session):
            if not self.token_given(handler, {"token": form.get("token", [])}):
                return "the token is required to start or stop runs"
            self.sessions.authorize(session)
        return None

    # ---- routes --------------------------------------------------------------------------

    def route(self, handler: _Handler, method: str, route: str, parts: SplitResult,
              body: bytes) -> bool:
        for extra in self.extra:
            if extra(handler, method, route, parts, body):
                return True
        if route == "/run":
            if method == "POST":
                self._start(handler, body)
            else:
                self._form(handler, 200, {}, None)
            return True
        if route.startswith("/runs/"):
            rest = route[len("/runs/"):]
            number, _, action = rest.partition("/")
            run = self.runs.get(int(number)) if number.isdigit() and len(number) < 12 else None
            if run is None:
                send_html(handler, 404, error_page(404, f"no run {number!r}"))
            elif action == "" and method == "GET":
                self._live(handler, run)
            elif action == "events" and method == "GET":
                self._events(handler, run)
            elif action == "stop" and method == "POST":
                self._stop(handler, run, body)
            else:
                send_html(handler, 405, error_page(405, f"{method} {route}: not allowed"))
            return True
        return False

    def _form(self, handler: _Handler, status: int, values: dict[str, str],
              message: str | None) -> None:
        session, cookie = self._session_for_page(handler)
        html = _render("run_form.html.j2", title="nhbench: start a run", values=values,
                       message=message, csrf=self.sessions.csrf(session),
                       need_token=self.needs_token(handler, session),
                       limits=self.runs.limits, active=self.runs.active())
        send_html(handler, status, html, cookie=cookie)

    def _start(self, handler: _Handler, body: bytes) -> None:
        form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        # What was typed goes back into the form; a field left empty shows its default.
        values = {name: form[name][0] for name in FORM_FIELDS if form.get(name, [""])[0]}
        refused = self._form_allowed(handler, form)
        if refused is not None:
            send_html(handler, 403, error_page(403, refused))
            return
        try:
            options = options_from_form(form)
            run = self.runs.start(options)
        except RunRefusedError as exc:
            self._form(handler, 403, values, str(exc))
            return
        except ValueError as exc:
            self._form(handler, 400, values, str(exc))
            return
        redirect(handler, f"/runs/{run.id}")

    def _stop(self, handler: _Handler, run: LiveRun, body: bytes) -> None:
        form = parse_qs(body.decode("utf-8", "replace"))
        refused = self._form_allowed(handler, form)
        if refused is not None:
            send_html(handler, 403, error_page(403, refused))
            return
        self.runs.stop(run.id)
        redirect(handler, f"/runs/{run.id}")

    def _live(self, handler: _Handler, run: LiveRun) -> None:
        session, cookie = self._session_for_page(handler)
        html = _render("run_live.html.j2", title=f"nhbench run {run.id}", run=run,
                       uri=run.options.uri, csrf=self.sessions.csrf(session),
                       need_token=self.needs_token(handler, session),
                       result=result_url(run.saved) if run.saved else None,
                       duration=run.options.effective_duration)
        send_html(handler, 200, html, cookie=cookie)

    def _events(self, handler: _Handler, run: LiveRun) -> None:
        if not self._streams.acquire(blocking=False):
            send_html(handler, 503, error_page(503, f"{MAX_STREAMS} live streams are open"))
            return
        try:
            handler.close_connection = True
            handler.send_response(200)
            handler.send_header("Content-Type", "text/event-stream; charset=utf-8")
            handler.send_header("Cache-Control", "no-store")
            handler.send_header("X-Content-Type-Options", "nosniff")
            handler.send_header("Connection", "close")
            handler.end_headers()
            seen = 0
            while not handler.server.closing.is_set():
                records, finished = run.records_after(seen, _STREAM_PING)
                chunks = [f"id: {seen + i + 1}\ndata: {json.dumps(record)}\n\n"
                          for i, record in enumerate(records)]
                seen += len(records)
                if finished:
                    end = {"state": run.state, "error": run.error,
                           "result": handler.rebase(result_url(run.saved))
                           if run.saved else None}
                    chunks.append(f"event: end\ndata: {json.dumps(end)}\n\n")
                handler.wfile.write("".join(chunks).encode() or b": ping\n\n")
                handler.wfile.flush()
                if finished:
                    break
        finally:
            self._streams.release()


def send_html(handler: _Handler, status: int, html: str, *, cookie: str | None = None) -> None:
    send(handler, status, "text/html; charset=utf-8", printable(html).encode("utf-8"),
         cookie=cookie)


def send(handler: _Handler, status: int, kind: str, body: bytes, *,
         cookie: str | None = None, headers: dict[str, str] | None = None) -> None:
    if kind.startswith("text/html"):
        body = handler.rebase_html(body)
    handler.send_response(status)
    handler.send_header("Content-Type", kind)
    handler.send_header("Content-Length", str(len(body)))
    handler.send_header("Cache-Control", "no-store")
    handler.send_header("X-Content-Type-Options", "nosniff")
    if cookie is not None:
        handler.send_header("Set-Cookie", cookie)
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(body)


def redirect(handler: _Handler, location: str) -> None:
    send(handler, 303, "text/plain; charset=utf-8", b"",
         headers={"Location": quote(handler.rebase(location))})


@dataclass
class UIHandle:
    """A started UI: where it listens, the token a state-changing request needs (None when
    none is), the runs, and `stop()`."""

    host: str
    port: int
    prefix: str
    token: str | None
    runs: RunManager
    _server: Any

    @property
    def url(self) -> str:
        from ..options import format_address

        return f"http://{format_address(self.host, self.port)}{self.prefix}"

    def stop(self) -> None:
        """Stop every run (each saves its partial result), then the server."""
        for run in self.runs.stop_all():
            run.wait(30)
        self._server.stop()


def start_ui(root: str, host: str, port: int, *, prefix: str = "/", token: str | None = None,
             unsafe_open: bool = False, limits: UILimits = DEFAULT_UI_LIMITS,
             extra: list[ExtraRoute] | None = None,
             stderr: TextIO | None = None, forwarded_from: str | None = None) -> UIHandle:
    """Serve the UI over `root` on `host`:`port` (numeric; port 0 picks one), its pages also
    under `prefix` (``/fortio/``). A token is required on a non-loopback address: `token`,
    else one generated and printed on `stderr`; `unsafe_open` serves without one there (and
    warns). With `forwarded_from` (the host clients reach: a forwarding server's, which
    sends a PROXY line first on every connection), `host` must be loopback, that host
    decides whether a token is needed, and loopback clients need none unless `token` was
    given. OSError when the address cannot be bound."""
    from ._server import BrowseServer

    stream = stderr if stderr is not None else sys.stderr
    if not prefix.startswith("/") or not prefix.endswith("/"):
        raise ValueError(f"prefix: {prefix!r} must begin and end with /")
    if token is not None and not token.strip():
        raise ValueError("token: must not be empty")
    if forwarded_from is not None and not is_loopback(host):
        raise ValueError(f"a forwarded UI listens on loopback only (not {host})")
    public = forwarded_from if forwarded_from is not None else host
    required = token
    if not is_loopback(public) and token is None:
        if unsafe_open:
            stream.write(f"nhbench ui: WARNING: --ui-unsafe-open: anyone who can reach "
                         f"{public} can start load from this machine at any target; no "
                         "token is asked\n")
        else:
            required = secrets.token_urlsafe(24)
            who = "from clients not on loopback " if forwarded_from is not None else ""
            stream.write(f"nhbench ui: token (required {who}to start or stop runs): "
                         f"{required}\n")
    stream.flush()
    runs = RunManager(root, limits)
    routes = UIRoutes(runs, token=required, extra=extra,
                      loopback_free=forwarded_from is not None and token is None,
                      loopback_only=required is None and not unsafe_open)
    server = BrowseServer(root, host, port, ui=routes, prefix=prefix,
                          proxy_protocol=forwarded_from is not None)
    bound_host, bound_port = server.start()
    server.warm()
    return UIHandle(bound_host, bound_port, prefix, required, runs, server)
