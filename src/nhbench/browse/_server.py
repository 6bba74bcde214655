"""``nhbench browse DIR``: the pages of `._pages` served over HTTP by the standard library.

`BrowseServer` is a `http.server.ThreadingHTTPServer` on a daemon thread: `start` binds (port
0 picks a free one) and returns the address, `stop` shuts it down. The CLI waits in its main
thread, where SIGINT and SIGTERM reach it (`nhbench.cli._signals`), and stops the server.

Routes (GET only; every path is relative to the browsed directory and refused if it could
leave it or names a hidden file):

* ``/``: the list of results and campaigns (rescanned on every load; summaries cached).
* ``/result/PATH``: one result's page.
* ``/compare?id=PATH&id=PATH...``: 2 to `MAX_COMPARED` results overlaid.
* ``/campaign/PATH``: a sweep campaign's steps (``.`` when DIR itself is the campaign).
* ``/files/PATH``: a file as it is (a result's JSON, a campaign's report.html and the files
  it links to, which sit beside it, so its relative links work).

A result that cannot be read gets a page with its one-line reason (status 422), an unknown
path a 404 page; neither stops the server. The pages' policy lets them fetch nothing but
links and the form, so they work offline.

The Host header must name the address the server listens on (or ``localhost``) when it
listens on a loopback address: a web page elsewhere cannot then read the results through a
DNS name that it points at 127.0.0.1 (DNS rebinding).
"""

from __future__ import annotations

import ipaddress
import mimetypes
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from .._exceptions import CampaignError, ResultFileError
from ._pages import MAX_COMPARED, campaign_page, compare_page, error_page, list_page, result_page
from ._scan import Catalogue

__all__ = ["BrowseServer"]

# A file served by /files/ is read whole into memory; results and reports are far smaller.
_MAX_SERVED_BYTES = 256 * 1024 * 1024


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # The CLI reports a port in use as an error; it must not silently share it.
    allow_reuse_address = False

    def __init__(self, address: tuple[str, int], catalogue: Catalogue, family: int) -> None:
        self.address_family = family
        self.catalogue = catalogue
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    server_version = "nhbench-browse"
    # Keep-alive lets the browser reuse its connection for the page's few requests.
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
        # One line per request would drown the URL line in the terminal; errors are pages.
        pass

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        try:
            self._get()
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:  # noqa: BLE001 - a page that fails must not stop the server
            message = f"{type(exc).__name__}: {exc}".splitlines()[0]
            sys.stderr.write(f"nhbench browse: {self.path}: {message}\n")
            self._page(500, error_page(500, f"this page failed: {message}"))

    def _host_allowed(self) -> bool:
        host = str(self.server.server_address[0])
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            return True
        given = self.headers.get("Host", "")
        name = given.rsplit(":", 1)[0] if not given.endswith("]") else given
        name = name.strip("[]").lower()
        if name == "localhost":
            return True
        try:
            return ipaddress.ip_address(name).is_loopback
        except ValueError:
            return False

    def _get(self) -> None:
        if not self._host_allowed():
            self._page(403, error_page(403, "this server answers only requests addressed to "
                                       "its own loopback address or localhost"))
            return
        parts = urlsplit(self.path)
        route = unquote(parts.path)
        catalogue = self.server.catalogue
        if route == "/":
            self._page(200, list_page(catalogue.scan(), str(catalogue.root)))
        elif route.startswith("/result/"):
            self._result(route[len("/result/"):])
        elif route == "/compare":
            self._compare(parse_qs(parts.query).get("id", []))
        elif route.startswith("/campaign/"):
            self._campaign(route[len("/campaign/"):].rstrip("/"))
        elif route.startswith("/files/"):
            self._file(route[len("/files/"):])
        elif route == "/favicon.ico":
            # Our pages declare an empty icon, but a campaign's report.html served from
            # /files/ does not, and the browser then asks for this one.
            self._send(204, "image/x-icon", b"")
        else:
            self._page(404, error_page(404, f"no page {route!r}"))

    def _result(self, relative: str) -> None:
        try:
            result = self.server.catalogue.load(relative)
        except ResultFileError as exc:
            status = 404 if self.server.catalogue.file(relative) is None else 422
            self._page(status, error_page(status, str(exc)))
            return
        try:
            page = result_page(result, relative)
        except (KeyError, ValueError) as exc:
            # A file the loader accepted without what the page reads (no "global" entry).
            self._page(422, error_page(422, f"cannot show {relative!r}: {exc}"))
            return
        self._page(200, page)

    def _compare(self, ids: list[str]) -> None:
        if not 2 <= len(ids) <= MAX_COMPARED:
            self._page(400, error_page(400, f"compare 2 to {MAX_COMPARED} results "
                                       f"({len(ids)} selected)"))
            return
        runs = []
        for relative in ids:
            try:
                runs.append((relative, self.server.catalogue.load(relative)))
            except ResultFileError as exc:
                self._page(422, error_page(422, str(exc)))
                return
        try:
            page = compare_page(runs)
        except (KeyError, ValueError) as exc:
            self._page(422, error_page(422, f"cannot compare these results: {exc}"))
            return
        self._page(200, page)

    def _campaign(self, relative: str) -> None:
        catalogue = self.server.catalogue
        directory = catalogue.campaign_dir(relative or ".")
        if directory is None:
            self._page(404, error_page(404, f"no campaign directory {relative!r}"))
            return
        try:
            manifest = catalogue.manifest(relative or ".")
        except CampaignError as exc:
            self._page(422, error_page(422, str(exc)))
            return
        self._page(200, campaign_page(manifest, relative or ".",
                                      has_report=(directory / "report.html").is_file()))

    def _file(self, relative: str) -> None:
        path = self.server.catalogue.file(relative)
        if path is None:
            self._page(404, error_page(404, f"no file {relative!r}"))
            return
        try:
            size = path.stat().st_size
            if size > _MAX_SERVED_BYTES:
                self._page(413, error_page(413, f"{relative!r} is {size} bytes, more than "
                                           "the browser serves"))
                return
            body = path.read_bytes()
        except OSError as exc:
            self._page(404, error_page(404, f"cannot read {relative!r}: {exc.strerror or exc}"))
            return
        kind = mimetypes.guess_type(Path(relative).name)[0] or "application/octet-stream"
        if kind.startswith("text/") or kind in ("application/json", "image/svg+xml"):
            kind += "; charset=utf-8"
        self._send(200, kind, body)

    def _page(self, status: int, html: str) -> None:
        self._send(status, "text/html; charset=utf-8", html.encode("utf-8"))

    def _send(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        # Results change as runs are added; a reload must show the directory as it is now.
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)


class BrowseServer:
    """The result browser over `root`, listening on `host`:`port` (a numeric address)."""

    def __init__(self, root: str | Path, host: str, port: int) -> None:
        self.catalogue = Catalogue(root)
        self._host = host
        self._port = port
        self._server: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> tuple[str, int]:
        """Bind and serve on a daemon thread; the bound (host, port). OSError when the
        address cannot be bound."""
        import socket

        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        self._server = _HTTPServer((self._host, self._port), self.catalogue, family)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.2},
                                        name="nhbench-browse", daemon=True)
        self._thread.start()
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def stop(self) -> None:
        """Stop serving (idempotent). Requests in progress finish on their own threads."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
