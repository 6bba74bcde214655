"""One HTTP GET of a scrape endpoint, bounded in time and size.

The standard library's urllib: a scrape is one plain GET per step and source, which needs
no connection reuse. Proxies from the environment (``http_proxy``) are not used: a target's
admin port is reached directly, as the load is.
"""

from __future__ import annotations

import http.client
import socket
import time
import urllib.error
import urllib.parse
import urllib.request

from .._version import __version__

__all__ = ["MAX_SCRAPE_BYTES", "fetch"]

#: A scrape larger than this is refused (an Envoy with thousands of clusters writes tens of
#: MB; more than this is not a metrics page).
MAX_SCRAPE_BYTES = 64 * 1024 * 1024

_CHUNK = 256 * 1024


class _Redirects(urllib.request.HTTPRedirectHandler):
    # urllib would follow a redirect to ftp:// too; a metrics page moves only within HTTP.
    # (Its loop limit, 10, stays.)
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        scheme = urllib.parse.urlsplit(newurl).scheme.lower()
        if scheme not in ("http", "https"):
            raise urllib.error.HTTPError(newurl, code, f"redirected to a {scheme}: URL",
                                         headers, fp)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _Redirects())


class _Failed(Exception):
    pass


def fetch(url: str, timeout: float) -> tuple[str | None, str | None]:
    """(text, None) with the body of ``GET url`` as text (UTF-8, invalid bytes replaced), or
    (None, reason) when it fails, is not a 2xx, takes more than `timeout` seconds in all, or
    is too large. A failed scrape is a reason to record, never an exception."""
    try:
        return _fetch(url, timeout), None
    except _Failed as exc:
        return None, str(exc)


def _fetch(url: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    request = urllib.request.Request(url, headers={
        "User-Agent": f"nhbench/{__version__}",
        # Prometheus text (0.0.4), never OpenMetrics or protobuf: the parser reads the former.
        "Accept": "text/plain;version=0.0.4;q=1,*/*;q=0.1",
    })
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            body = bytearray()
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _Failed(f"timed out after {timeout:g} s")
                # read1: at most one read of the socket, so that a body trickled a byte at a
                # time still meets the deadline (read(n) waits for all n bytes).
                chunk = response.read1(_CHUNK)
                if not chunk:
                    break
                body += chunk
                if len(body) > MAX_SCRAPE_BYTES:
                    raise _Failed(f"more than {MAX_SCRAPE_BYTES // (1024 * 1024)} MiB")
            missing = response.length
            if missing:
                # The peer closed before the end its Content-Length announced: a partial
                # page must not read as numbers.
                raise _Failed(f"IncompleteRead: the connection closed {missing} bytes "
                              f"before the announced end of the page")
    except urllib.error.HTTPError as exc:
        raise _Failed(f"HTTP {exc.code} {exc.reason}".rstrip().splitlines()[0][:200]) from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, (TimeoutError, socket.timeout)):
            raise _Failed(f"timed out after {timeout:g} s") from None
        text = getattr(reason, "strerror", None) or str(reason)
        raise _Failed(f"cannot connect: {text}") from None
    except TimeoutError:
        raise _Failed(f"timed out after {timeout:g} s") from None
    except (OSError, ValueError, http.client.HTTPException) as exc:
        # A connection reset mid-body, a malformed status line (http.client's errors are
        # OSError or ValueError subclasses).
        raise _Failed(f"{type(exc).__name__}: {exc}".splitlines()[0]) from None
    return body.decode("utf-8", "replace")
