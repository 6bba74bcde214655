"""``nhbench browse DIR``: the pages of `._pages` served over HTTP by the standard library.

`BrowseServer` is a `http.server.ThreadingHTTPServer` on a daemon thread: `start` binds (port
0 picks a free one) and returns the address, `stop` shuts it down. The CLI waits in its main
thread, where SIGINT and SIGTERM reach it (`nhbench._signals`), and stops the server.

Routes (GET only; every path is relative to the browsed directory and refused if it could
leave it, through a symbolic link too, or names a hidden file: `Catalogue.resolve`):

* ``/``: the list of results and campaigns (rescanned on every load; summaries cached).
* ``/result/PATH``: one result's page.
* ``/compare?id=PATH&id=PATH...``: 2 to `MAX_COMPARED` results overlaid.
* ``/campaign/PATH``: a sweep campaign's steps (``.`` when DIR itself is the campaign).
* ``/files/PATH``: a file as it is (a result's JSON, a campaign's report.html and the files
  it links to, which sit beside it, so its relative links work), streamed from the kernel
  (``sendfile``), never read into memory.
* ``/data/`` and ``/fortio/data/`` (Fortio's data directory, `._data`): the result files
  directly in DIR (``/data/NAME.json``), their list, and ``/data/index.tsv`` for
  ``fortio report|server -sync`` and ``nhbench browse --sync``. The index's URLs start with
  ``base_url`` when given, else with the Host the request named (already checked below).

A file that cannot be read or shown gets a page with its one-line reason (status 422),
whatever failed while loading or rendering it; an unknown path a 404 page; neither stops
the server, and the list shows an unreadable file as one row. The pages' policy lets them
fetch nothing but links and the form, so they work offline.

Which requests are answered (docs/outputs.md, "The result browser"):

* The Host header must name this machine: ``localhost``, a loopback address, the address
  the connection came in on (what a LAN user types: ``http://192.0.2.7:8080/``), or the
  machine's host name. A web page elsewhere cannot then read the results through a DNS name
  that it points at this machine (DNS rebinding), whatever ``--listen`` is.
* A browser's request made for another site's page (``Sec-Fetch-Site`` cross-site or
  same-site, other than following a link) is refused: an ``<img src=...>`` on a web page
  cannot make the browser render results.

Behind a forwarding server (``proxy_protocol``: `nhbench fortio server` serves the UI on its
echo port, whose C server pipes ``/fortio/`` connections here), every connection must begin
with a PROXY protocol v1 line (``PROXY TCP4 client server cport sport``) within `TIMEOUT`,
or it is closed unanswered; the line names the real client and the address it reached, which
the rules below and the UI's judge instead of this loopback connection's. Only the
forwarding server can send that line first: a client's own ``PROXY`` line reaches here after
the forwarder's, inside the request, and is not read as one. Every answer there says
``Connection: close``, as the forwarder hands over one connection per request.

The server's resources are bounded (docs/reliability.md, "Result browser limits"): the
request head must arrive within `TIMEOUT` seconds and a connection idle for as long is
closed, as is one whose client reads nothing of a response for `SEND_TIMEOUT`; at most
`MAX_CONNECTIONS` connections are served at once (more wait in the listen queue); at most
`MAX_HEAVY` result or comparison pages are built at once (another request waits up to
`HEAVY_WAIT` seconds, then gets 503).
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import logging
import mimetypes
import re
import socket
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

from .._exceptions import CampaignError, ResultFileError
from ._data import DataDirectory
from ._pages import (
    MAX_COMPARED,
    campaign_page,
    compare_page,
    error_page,
    list_page,
    printable,
    result_page,
)
from ._scan import Catalogue

if TYPE_CHECKING:
    from typing_extensions import Buffer

    from .._result import Result

__all__ = ["HEAVY_WAIT", "MAX_CONNECTIONS", "MAX_HEAVY", "MAX_PAGE_BYTES", "SEND_TIMEOUT",
           "TIMEOUT", "BrowseServer"]

_log = logging.getLogger("nhbench.browse")

#: Seconds a request head may take to arrive, and a connection may stay silent between
#: keep-alive requests. A browser sends its
#: head at once and reconnects when it finds a kept-alive connection closed.
TIMEOUT = 10.0
#: Seconds a response may wait for the client to make room for more (a download read slowly).
#: Longer than `TIMEOUT`: the kernel reports room only once a good part of its buffer is
#: free, which for a client reading a few KB/s takes many seconds, though it is reading.
SEND_TIMEOUT = 60.0
#: Connections served at once, each on its own thread; more wait in the listen queue. A
#: browser opens about six per server; unfinished request heads (slowloris) hold at most
#: this many threads, each for at most `TIMEOUT`.
MAX_CONNECTIONS = 32
#: Result and comparison pages built at once. Loading a result of the 64 MiB limit takes
#: seconds and about a gigabyte; the machine should keep working.
MAX_HEAVY = 2
#: Seconds a result or comparison page waits for one of the `MAX_HEAVY` slots before 503.
HEAVY_WAIT = 10.0
#: A result page larger than this is refused (422): the row and point limits of `._pages`
#: keep pages to a few megabytes, so this is only a backstop.
MAX_PAGE_BYTES = 32 * 1024 * 1024
#: Connections the kernel queues while every slot is taken.
_LISTEN_QUEUE = 128
#: Where Fortio's data directory is served: ``fortio report`` serves it at ``/data/``,
#: ``fortio server`` under its UI path, ``/fortio/data/``.
DATA_MOUNTS = ("/data/", "/fortio/data/")
#: PROXY protocol v1 (haproxy.org/download/2.9/doc/proxy-protocol.txt): at most 107 bytes.
_PROXY_LINE_MAX = 107
_PROXY_LINE = re.compile(
    rb"PROXY (?:(TCP4|TCP6) ([0-9A-Fa-f.:]{2,45}) ([0-9A-Fa-f.:]{2,45}) (\d{1,5}) (\d{1,5})"
    rb"|UNKNOWN[^\r\n]*)\r\n")


#: A root-relative link in a page: an attribute's or the live page's EventSource URL.
_ROOT_LINK = re.compile(rb'((?:href|action|src)="|EventSource\(")(/[^"]*)')


def parse_proxy_line(line: bytes) -> tuple[str, int, str] | None:
    """A PROXY protocol v1 line's (client host, client port, server host): ``("", 0, "")``
    for ``PROXY UNKNOWN`` (a client nobody can name, trusted as no one); None when `line`
    is not one (then the connection is refused)."""
    match = _PROXY_LINE.fullmatch(line)
    if match is None:
        return None
    if match.group(1) is None:
        return "", 0, ""
    family = ipaddress.IPv4Address if match.group(1) == b"TCP4" else ipaddress.IPv6Address
    try:
        client = family(match.group(2).decode())
        server = family(match.group(3).decode())
    except ValueError:
        return None
    client_port, server_port = int(match.group(4)), int(match.group(5))
    if not (client_port <= 65535 and 0 < server_port <= 65535):
        return None
    return str(client), client_port, str(server)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # stop() must not wait for the requests in progress (each ends within TIMEOUT anyway).
    block_on_close = False
    # The CLI reports a port in use as an error; it must not silently share it.
    allow_reuse_address = False
    request_queue_size = _LISTEN_QUEUE
    # Fortio's data directory (set by BrowseServer.start) and the -base-url of its index.
    data: DataDirectory
    base_url = ""
    base_host = ""

    def __init__(self, address: tuple[str, int], catalogue: Catalogue, family: int, *,
                 timeout: float, max_connections: int, max_heavy: int,
                 heavy_wait: float, ui: Any = None, prefix: str = "/",
                 proxy_protocol: bool = False) -> None:
        self.address_family = family
        self.proxy_protocol = proxy_protocol
        # The run UI's routes (`._ui.UIRoutes`), when serving ``nhbench ui``; the pages are
        # also served under `prefix` (Fortio's ``/fortio/``).
        self.ui = ui
        self.prefix = prefix
        self.catalogue = catalogue
        self.idle_timeout = timeout
        self.heavy_wait = heavy_wait
        self.heavy = threading.BoundedSemaphore(max_heavy)
        self.max_heavy = max_heavy
        self.closing = threading.Event()
        self._slots = threading.BoundedSemaphore(max_connections)
        self.host_name = socket.gethostname().lower()
        super().__init__(address, _Handler)

    def process_request(self, request: socket.socket | tuple[bytes, socket.socket],
                        client_address: object) -> None:
        # The accept loop waits for a free slot, so extra connections queue in the kernel
        # instead of each getting a thread; it looks up now and then to notice stop().
        while not self._slots.acquire(timeout=0.2):
            if self.closing.is_set():
                self.shutdown_request(request)
                return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: socket.socket | tuple[bytes, socket.socket],
                               client_address: object) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: object, client_address: object) -> None:
        # A client that goes away mid-request is ordinary; anything else is one line.
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            return
        _log.debug("browse: request from %s failed", client_address, exc_info=True)
        sys.stderr.write(f"nhbench browse: a request failed: {type(exc).__name__}: {exc}\n")


class _HeadReader(io.RawIOBase):
    """The connection's reads, each waiting at most until the handler's deadline (the whole
    request head within `TIMEOUT`, not `TIMEOUT` per byte) and at most `TIMEOUT` after
    the head: a client sending one byte every few seconds cannot hold its thread."""

    def __init__(self, handler: _Handler) -> None:
        self._handler = handler

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Buffer) -> int:
        handler = self._handler
        wait = handler.server.idle_timeout
        if handler.deadline is not None:
            wait = min(wait, handler.deadline - time.monotonic())
            if wait <= 0:
                raise TimeoutError("the request head took too long")
        handler.connection.settimeout(wait)
        return handler.connection.recv_into(buffer)


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    connection: socket.socket
    server_version = "nhbench-browse"
    # Keep-alive lets the browser reuse its connection for the page's few requests.
    protocol_version = "HTTP/1.1"
    deadline: float | None = None
    #: The address the client reached: the PROXY line's, else this socket's own.
    local_host: str | None = None

    def handle(self) -> None:
        if self.server.proxy_protocol and not self._proxy_line():
            self.close_connection = True
            return
        super().handle()

    def _proxy_line(self) -> bool:
        """Reads the PROXY line the forwarder sends first; the real client becomes
        `client_address`. False (the connection is closed unanswered) when the line is
        missing, malformed or late, or the connection is not the forwarder's (loopback)."""
        from ._ui import is_loopback

        if not is_loopback(str(self.client_address[0])):
            return False
        self.deadline = time.monotonic() + self.server.idle_timeout
        try:
            line = self.rfile.readline(_PROXY_LINE_MAX + 1)
        except (OSError, TimeoutError):
            return False
        finally:
            self.deadline = None
        parsed = parse_proxy_line(line)
        if parsed is None:
            return False
        host, port, self.local_host = parsed
        self.client_address = (host, port)
        return True

    def send_response(self, code: int, message: str | None = None) -> None:
        super().send_response(code, message)
        if self.server.proxy_protocol:
            # The forwarder pipes this one connection here: a next request on it must
            # come as a new connection, which the forwarder routes again.
            super().send_header("Connection", "close")

    def send_header(self, keyword: str, value: str) -> None:
        if self.server.proxy_protocol and keyword.lower() == "connection":
            return  # already said: close
        super().send_header(keyword, value)

    def rebase(self, path: str) -> str:
        """A root-relative URL of ours as the client must ask for it: behind the forwarder
        only the prefix reaches this server, so ``/runs/3`` becomes ``/fortio/runs/3``."""
        prefix = self.server.prefix
        if (not self.server.proxy_protocol or prefix == "/" or not path.startswith("/")
                or path.startswith("//") or (path + "/").startswith(prefix)):
            return path
        return prefix.rstrip("/") + path

    def rebase_html(self, body: bytes) -> bytes:
        """A page's root-relative links, rebased (`rebase`)."""
        if not self.server.proxy_protocol:
            return body
        return _ROOT_LINK.sub(lambda match: match.group(1) + self.rebase(
            match.group(2).decode("utf-8", "surrogateescape")).encode(
            "utf-8", "surrogateescape"), body)

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.idle_timeout)
        # A response's head and body are separate writes: without this, on a kept-alive
        # connection the body waits for the client's delayed ACK (40 ms a file: Fortio's
        # -sync of 2000 files took 91 s instead of under 2).
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rfile = io.BufferedReader(_HeadReader(self))

    def handle_one_request(self) -> None:
        # The next request's head, from the moment the server waits for it.
        self.deadline = time.monotonic() + self.server.idle_timeout
        super().handle_one_request()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
        # One line per request would drown the URL line in the terminal; errors are pages.
        pass

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        self._serve("GET")

    def do_POST(self) -> None:  # noqa: N802 - the base class's name
        self._serve("POST")

    def _serve(self, method: str) -> None:
        # The head is in; each write waits at most SEND_TIMEOUT for the client to read.
        self.deadline = None
        self.connection.settimeout(max(SEND_TIMEOUT, self.server.idle_timeout))
        try:
            self._get(method)
        except OSError:
            # The client went away or stopped reading: nothing to answer.
            self.close_connection = True
        except Exception as exc:  # noqa: BLE001 - a page that fails must not stop the server
            message = printable(f"{type(exc).__name__}: {exc}".splitlines()[0])
            _log.debug("browse: %s failed", self.path, exc_info=True)
            sys.stderr.write(f"nhbench browse: {printable(self.path)}: {message}\n")
            self._page(500, error_page(500, f"this page failed: {message}"))

    # ---- who may ask -----------------------------------------------------------------

    def _host_allowed(self) -> bool:
        """The Host header names this machine: ``localhost``, a loopback address, the
        address this connection came in on, or the machine's host name. A DNS name an
        attacker controls (rebinding) is none of these."""
        given = self.headers.get("Host", "").strip().lower()
        if given.startswith("["):
            name, _, port = given[1:].partition("]")
            port = port.removeprefix(":")
        elif given.count(":") == 1:
            name, _, port = given.partition(":")
        else:
            name, port = given, ""
        if not name or not (port == "" or port.isdigit()):
            return False
        if name in ("localhost", self.server.host_name, self.server.base_host):
            return True
        try:
            address = _plain(ipaddress.ip_address(name))
        except ValueError:
            return False
        if address.is_loopback:
            return True
        try:
            local_host = self.local_host if self.server.proxy_protocol else str(
                self.connection.getsockname()[0])
            local = _plain(ipaddress.ip_address((local_host or "").split("%", 1)[0]))
        except (OSError, ValueError):
            return False
        return address == local

    def _cross_site(self) -> bool:
        """A browser's request for another site's page (an ``<img>``, a script, a fetch),
        but not the user following a link to us: only browsers send these headers."""
        site = self.headers.get("Sec-Fetch-Site")
        if site is None or site in ("same-origin", "none"):
            return False
        return not (self.headers.get("Sec-Fetch-Mode") == "navigate"
                    and self.headers.get("Sec-Fetch-Dest", "document") == "document")

    def _body(self) -> bytes | None:
        """The request's body (at most `_ui.MAX_BODY` bytes, all within `TIMEOUT`); None
        when it is too large or not counted (a response sent), or does not arrive in time
        (the connection is closed)."""
        from ._ui import MAX_BODY

        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            self._page(411, error_page(411, "a body needs a Content-Length"))
            return None
        length = self.headers.get("Content-Length", "0").strip() or "0"
        if not length.isdigit() or int(length) > MAX_BODY:
            self.close_connection = True
            self._page(413, error_page(413, f"a body of at most {MAX_BODY} bytes"))
            return None
        # The whole body within TIMEOUT, as the head: a client sending a byte now and then
        # cannot hold its thread.
        self.deadline = time.monotonic() + self.server.idle_timeout
        try:
            body = self.rfile.read(int(length))
        except TimeoutError:
            self.close_connection = True
            return None
        finally:
            self.deadline = None
            self.connection.settimeout(max(SEND_TIMEOUT, self.server.idle_timeout))
        if len(body) < int(length):
            self.close_connection = True
            return None
        return body

    def _get(self, method: str = "GET") -> None:
        if not self._host_allowed():
            self._page(403, error_page(403, "this server answers only requests addressed to "
                                       "this machine: localhost, a loopback address, the "
                                       "address it was reached on or its host name"))
            return
        if self._cross_site():
            self._page(403, error_page(403, "this server does not answer requests made by "
                                       "another site's page"))
            return
        parts = urlsplit(self.path)
        route = unquote(parts.path)
        prefix = self.server.prefix
        if prefix != "/" and (route + "/").startswith(prefix):
            route = "/" + route[len(prefix):]
        catalogue = self.server.catalogue
        ui = self.server.ui
        if method != "GET" or ui is not None:
            body = b""
            if method != "GET":
                if ui is None:
                    self._page(405, error_page(405, f"{method}: this server only reads"))
                    return
                read = self._body()
                if read is None:
                    return
                body = read
            if ui.route(self, method, route, parts, body):
                return
            if method != "GET":
                self._page(405, error_page(405, f"{method} {route}: not allowed"))
                return
        if route == "/":
            self._page(200, list_page(catalogue.scan(), str(catalogue.root), ui=ui is not None))
        elif route.startswith("/result/"):
            self._result(route[len("/result/"):])
        elif route == "/compare":
            self._compare(parse_qs(parts.query).get("id", []))
        elif route.startswith("/campaign/"):
            self._campaign(route[len("/campaign/"):].rstrip("/"))
        elif route.startswith("/files/"):
            self._file(route[len("/files/"):])
        elif route.startswith(DATA_MOUNTS):
            self._data(route)
        elif route == "/favicon.ico":
            # Our pages declare an empty icon, but a campaign's report.html served from
            # /files/ does not, and the browser then asks for this one.
            self._send(204, "image/x-icon", b"")
        else:
            self._page(404, error_page(404, f"no page {route!r}"))

    # ---- pages -----------------------------------------------------------------------

    @contextlib.contextmanager
    def _heavy(self) -> Iterator[bool]:
        """One of the `MAX_HEAVY` slots for building a page from results; False (and a 503
        sent) when none frees up within `HEAVY_WAIT`."""
        if not self.server.heavy.acquire(timeout=self.server.heavy_wait):
            self._page(503, error_page(503, f"{self.server.max_heavy} result pages are being "
                                       "built: reload in a moment"), retry_after=5)
            yield False
            return
        try:
            yield True
        finally:
            self.server.heavy.release()

    def _unshowable(self, what: str, exc: BaseException) -> None:
        """The 422 page of a file that could not be loaded or shown, whatever went wrong:
        a file must never make a page fail (the traceback goes to the debug log)."""
        if isinstance(exc, (ResultFileError, CampaignError)):
            message = str(exc)
        else:
            _log.debug("browse: cannot show %s", what, exc_info=exc)
            reason = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else \
                type(exc).__name__
            message = f"cannot show {what}: {reason}"
        self._page(422, error_page(422, message))

    def _result(self, relative: str) -> None:
        if self.server.catalogue.file(relative) is None:
            self._page(404, error_page(404, f"no result file {relative!r}"))
            return
        with self._heavy() as ready:
            if not ready:
                return
            try:
                body = result_page(self.server.catalogue.load(relative), relative) \
                    .encode("utf-8")
                if len(body) > MAX_PAGE_BYTES:
                    raise ValueError(f"its page would be {len(body) // 2**20} MiB, more than "
                                     f"the {MAX_PAGE_BYTES // 2**20} MiB the browser sends")
            except Exception as exc:  # noqa: BLE001 - see _unshowable
                self._unshowable(repr(relative), exc)
                return
        self._send(200, "text/html; charset=utf-8", body)

    def _compare(self, ids: list[str]) -> None:
        if not 2 <= len(ids) <= MAX_COMPARED:
            self._page(400, error_page(400, f"compare 2 to {MAX_COMPARED} results "
                                       f"({len(ids)} selected)"))
            return
        current = [ids[0]]

        def runs() -> Iterator[tuple[str, Result]]:
            # One result in memory at a time: compare_page keeps only what it shows.
            for relative in ids:
                current[0] = relative
                yield relative, self.server.catalogue.load(relative)

        with self._heavy() as ready:
            if not ready:
                return
            try:
                body = compare_page(runs()).encode("utf-8")
            except Exception as exc:  # noqa: BLE001 - see _unshowable
                self._unshowable(repr(current[0]), exc)
                return
        self._send(200, "text/html; charset=utf-8", body)

    def _campaign(self, relative: str) -> None:
        catalogue = self.server.catalogue
        relative = relative or "."
        if catalogue.campaign_dir(relative) is None:
            self._page(404, error_page(404, f"no campaign directory {relative!r}"))
            return
        report = "report.html" if relative == "." else relative + "/report.html"
        try:
            body = campaign_page(catalogue.manifest(relative), relative,
                                 has_report=catalogue.file(report) is not None).encode("utf-8")
        except Exception as exc:  # noqa: BLE001 - see _unshowable
            self._unshowable(repr(relative), exc)
            return
        self._send(200, "text/html; charset=utf-8", body)

    def _file(self, relative: str) -> None:
        opened = self.server.catalogue.open(relative)
        if opened is None:
            self._page(404, error_page(404, f"no file {relative!r}"))
            return
        fd, status = opened
        with open(fd, "rb") as handle:
            kind = mimetypes.guess_type(Path(relative).name)[0] or "application/octet-stream"
            if kind.startswith("text/") or kind in ("application/json", "image/svg+xml"):
                kind += "; charset=utf-8"
            self._head(200, kind, status.st_size)
            # The kernel copies the file to the socket: nothing is read into memory, and
            # each wait for the client is bounded by the socket's timeout.
            sent = self.connection.sendfile(handle, 0, status.st_size)
            if sent != status.st_size:
                # The file shrank while it was sent: the response is short, so the
                # connection must end for the client to notice.
                self.close_connection = True

    def _data(self, route: str) -> None:
        """Fortio's ``data/``: its list, ``index.tsv`` or one shared result file."""
        mount = next(m for m in DATA_MOUNTS if route.startswith(m))
        name = route[len(mount):]
        data = self.server.data
        if name in ("", "index.html"):
            self._send(200, "text/html; charset=utf-8", data.html_list())
        elif name == "index.tsv":
            base = self.server.base_url
            if not base:
                forwarded = self.headers.get("X-Forwarded-Proto", "http").strip().lower()
                scheme = forwarded if forwarded in ("http", "https") else "http"
                base = f"{scheme}://{self.headers.get('Host', '').strip()}"
            with self._heavy() as ready:
                if not ready:
                    return
                body = data.index(base + mount)
            self._send(200, "text/plain; charset=utf-8", body)
        elif data.open(name) is None or self.server.catalogue.resolve(name) is None:
            self._page(404, error_page(404, f"no shared result file {name!r}"))
        else:
            self._file(name)

    # ---- responses -------------------------------------------------------------------

    def _page(self, status: int, html: str, *, retry_after: int | None = None) -> None:
        self._send(status, "text/html; charset=utf-8", printable(html).encode("utf-8"),
                   retry_after=retry_after)

    def _head(self, status: int, kind: str, length: int, *,
              retry_after: int | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(length))
        # Results change as runs are added; a reload must show the directory as it is now.
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        if retry_after is not None:
            self.send_header("Retry-After", str(retry_after))
        self.end_headers()

    def _send(self, status: int, kind: str, body: bytes, *,
              retry_after: int | None = None) -> None:
        if kind.startswith("text/html"):
            body = self.rebase_html(body)
        self._head(status, kind, len(body), retry_after=retry_after)
        self.wfile.write(body)


def _plain(address: ipaddress.IPv4Address | ipaddress.IPv6Address
           ) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An IPv4-mapped IPv6 address (how a dual-stack socket sees an IPv4 client) as IPv4."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


class BrowseServer:
    """The result browser over `root`, listening on `host`:`port` (a numeric address).
    The limits default to the module's constants; tests lower them."""

    def __init__(self, root: str | Path, host: str, port: int, *, timeout: float = TIMEOUT,
                 max_connections: int = MAX_CONNECTIONS, max_heavy: int = MAX_HEAVY,
                 heavy_wait: float = HEAVY_WAIT, base_url: str = "", ui: Any = None,
                 prefix: str = "/", proxy_protocol: bool = False,
                 reading_processes: bool = False) -> None:
        # `reading_processes`: see `Catalogue` (``nhbench browse`` sets it).
        self.catalogue = Catalogue(root, reading_processes=reading_processes)
        # Fortio's -base-url: the index's URLs are it, the mount and the name.
        self.base_url = base_url.strip().rstrip("/")
        self._host = host
        self._port = port
        self._limits: dict[str, Any] = {"timeout": timeout, "max_connections": max_connections,
                        "max_heavy": max_heavy, "heavy_wait": heavy_wait, "ui": ui,
                        "prefix": prefix, "proxy_protocol": proxy_protocol}
        self._server: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> tuple[str, int]:
        """Bind and serve on a daemon thread; the bound (host, port). OSError when the
        address cannot be bound."""
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        self._server = _HTTPServer((self._host, self._port), self.catalogue, family,
                                   **self._limits)
        self._server.data = DataDirectory(self.catalogue.root)
        self._server.base_url = self.base_url
        self._server.base_host = (urlsplit(self.base_url).hostname or "").lower()
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.2},
                                        name="nhbench-browse", daemon=True)
        self._thread.start()
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def warm(self) -> None:
        """Walk the directory and write the list's rows now, on a daemon thread, so that
        the first list asked for finds them ready. A new browser's first list is otherwise
        paid by its first request: reading the index, the walk and every row (about 120 ms
        for 5,000 indexed results; seconds for a directory never browsed). A request that
        comes while this runs waits for the same walk (the catalogue's lock) and does no
        more than it would have done alone."""
        ui = self._limits["ui"] is not None

        def work() -> None:
            try:
                list_page(self.catalogue.scan(), str(self.catalogue.root), ui=ui)
            except Exception:  # noqa: BLE001 - the first request meets it again and says so
                _log.debug("browse: the walk at start failed", exc_info=True)

        threading.Thread(target=work, name="nhbench-browse-warm", daemon=True).start()

    def stop(self) -> None:
        """Stop serving (idempotent). Requests in progress finish on their own threads."""
        if self._server is not None:
            self._server.closing.set()
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
