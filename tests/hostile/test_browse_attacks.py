"""A hostile directory and hostile clients against the result browser (``nhbench browse`` or
`BrowseServer` as a subprocess on loopback, real HTTP over real sockets).

* Files: links out of DIR (a file, a directory, ``/proc/self/environ``) are neither listed
  nor served; hostile result files (NaN, a lone surrogate, a year-1 time, broken
  HdrHistograms, an absurd Fortio histogram) are each a 422 page of their own while the
  list stays 200 with the good results; a result with 20,000 intervals and 3,000 counters
  makes a page of a bounded size, saying what it left out.
* Clients: a foreign Host with ``--listen 0.0.0.0`` and ``[::]``; a cross-site ``<img>``;
  parallel downloads of a 200 MB file (the server's memory must not grow with them);
  unfinished request heads (slowloris: threads bounded, heads timed out); parallel heavy
  pages (bounded, 503 beyond).

docs/reliability.md, "Result browser limits", lists each limit. Each test failed on the
code before these limits existed.
"""

from __future__ import annotations

import concurrent.futures
import copy
import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.hdrh_blobs import blob, global_entry, with_blobs, zigzag_leb

pytestmark = [pytest.mark.hostile, pytest.mark.timeout(240)]

DATA = Path(__file__).resolve().parent.parent / "data"
BASE = json.loads((DATA / "nhbench-json-earlier-format.json").read_text())
FORTIO = json.loads((DATA / "fortio" / "fortio-1.66.5-load.json").read_text())

# A BrowseServer with the limits given on the command line, in a process of its own (so
# that its threads and memory can be read from /proc), printing its port.
SERVE = """
import signal, sys
from nhbench.browse import BrowseServer
root, host, timeout, connections, heavy, wait = sys.argv[1:]
server = BrowseServer(root, host, 0, timeout=float(timeout), max_connections=int(connections),
                      max_heavy=int(heavy), heavy_wait=float(wait))
print(server.start()[1], flush=True)
signal.sigwait({signal.SIGINT, signal.SIGTERM})
server.stop()
"""


class Served:
    """A browse process on 127.0.0.1 (or `host`): its pid and port."""

    def __init__(self, args: list[str]) -> None:
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, stdin=subprocess.DEVNULL)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        match = re.search(r"(\d+)/?$", line)
        assert match, (line, self.proc.stderr.read() if self.proc.poll() is not None else "")
        self.port = int(match.group(1))

    def status(self, field: str) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        raise AssertionError(field)

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGINT)
        try:
            _, stderr = self.proc.communicate(timeout=20)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.communicate()
        return stderr


@pytest.fixture
def serve() -> Iterator[Any]:
    started: list[Served] = []

    def start(root: Path, *, listen: str = "127.0.0.1:0", limits: tuple[Any, ...] | None = None
              ) -> Served:
        if limits is None:
            args = [sys.executable, "-m", "nhbench", "browse", str(root), "--listen", listen]
        else:
            args = [sys.executable, "-c", SERVE, str(root), listen.rsplit(":", 1)[0],
                    *map(str, limits)]
        started.append(Served(args))
        return started[-1]

    yield start
    for served in started:
        stderr = served.stop()
        assert "Traceback" not in stderr, stderr


def request(port: int, path: str, *, host: str | None = None, address: str = "127.0.0.1",
            headers: dict[str, str] | None = None, timeout: float = 60) -> tuple[int, dict[str, str], bytes]:
    """One GET on its own connection: status, headers (lower-case names), body."""
    head = f"GET {path} HTTP/1.1\r\nHost: {host or f'127.0.0.1:{port}'}\r\nConnection: close\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    with socket.create_connection((address, port), timeout=timeout) as sock:
        sock.sendall(head.encode() + b"\r\n")
        data = b""
        while chunk := sock.recv(1 << 20):
            data += chunk
    top, _, body = data.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    fields = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    return int(lines[0].split()[1]), {k.lower(): v for k, v in fields.items()}, body


def write(path: Path, document: Any = None, text: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if text is None:
        text = json.dumps(document)
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return path


def good(path: Path, label: str = "good") -> Path:
    document = copy.deepcopy(BASE)
    document["options"]["label"] = [label]
    return write(path, document)


# ---- links out of the directory ----------------------------------------------------------


def test_links_leaving_the_directory_are_neither_listed_nor_served(tmp_path: Path,
                                                                   serve: Any) -> None:
    root, outside = tmp_path / "results", tmp_path / "outside"
    good(root / "good.json")
    good(outside / "secret.json", label="outside-secret")
    (outside / "note.txt").write_text("SECRET-OUTSIDE\n")
    good(root / ".hidden.json", label="hidden-secret")
    (root / "out.json").symlink_to(outside / "secret.json")
    (root / "outdir").symlink_to(outside)
    (root / "env.json").symlink_to("/proc/self/environ")
    (root / "hidden-link.json").symlink_to(root / ".hidden.json")
    (root / "inside.json").symlink_to(root / "good.json")  # stays inside: served
    campaign = outside / "campaign"
    campaign.mkdir()
    (campaign / "manifest.json").write_text("{}")
    (root / "camp").symlink_to(campaign)
    browse = serve(root)

    status, _, page = request(browse.port, "/")
    assert status == 200
    assert b"good.json" in page and b"inside.json" in page
    for name in (b"out.json", b"env.json", b"hidden-link.json", b"outside-secret"):
        assert name not in page, name
    assert b"symbolic links leading outside" in page

    for path in ("/files/out.json", "/files/outdir/note.txt", "/files/outdir/secret.json",
                 "/files/env.json", "/files/hidden-link.json", "/result/out.json",
                 "/result/outdir/secret.json", "/result/env.json", "/campaign/camp",
                 "/files/camp/manifest.json"):
        status, _, body = request(browse.port, path)
        assert status == 404, (path, status)
        assert b"SECRET" not in body and b"outside-secret" not in body and b"PATH=" not in body
    status, _, body = request(browse.port, "/compare?id=good.json&id=out.json")
    assert status in (404, 422) and b"outside-secret" not in body
    status, _, body = request(browse.port, "/files/inside.json")
    assert status == 200 and json.loads(body)["options"]["label"] == ["good"]
    assert request(browse.port, "/result/inside.json")[0] == 200


# ---- hostile result files ----------------------------------------------------------------


def hostile_files(root: Path) -> list[str]:
    """One file per way a result file broke the browser; their names."""
    nan = copy.deepcopy(BASE)
    for statistic in global_entry(nan)["statistics"]:
        statistic.update(min=float("nan"), max=float("inf"), mean=float("-inf"))
        statistic.pop("hdr_histogram", None)
        for point in statistic.get("percentiles", []):
            point["value"] = float("nan")
    write(root / "nan.json", nan)
    write(root / "surrogate.json", text=json.dumps(BASE).replace('"before"', '"\\ud800bad"', 1))
    ancient = copy.deepcopy(BASE)
    ancient["timestamp"] = "0001-01-01T00:00:00"
    for worker in ancient["results"]:
        worker["execution_start"] = "0001-01-01T00:00:00"
    write(root / "year1.json", ancient)
    # Histograms of 1 significant digit over values 1 to 2, whose payloads say otherwise.
    tiny = {"sigfig": 1, "lowest": 1, "highest": 2}
    write(root / "hdr-overrun.json", with_blobs(BASE, [blob(zigzag_leb(1) * 5000, **tiny)]))
    write(root / "hdr-jump.json",
          with_blobs(BASE, [blob(zigzag_leb(-(2**40)) + zigzag_leb(5), **tiny)]))
    fortio = copy.deepcopy(FORTIO)
    histogram = fortio["DurationHistogram"]
    histogram.update(Count=10**18, Min=float("nan"), Max=float("inf"), Avg=-1.0)
    histogram["Data"] = [{"Start": i * 1e-3, "End": (i + 1) * 1e-3, "Percent": i / 20,
                          "Count": 10**12} for i in range(2000)]
    histogram["Percentiles"] = [{"Percentile": 1e308, "Value": float("nan")}]
    write(root / "fortio-absurd.json", fortio)
    timeline = copy.deepcopy(BASE)
    timeline["timeline"] = [dict(BASE["timeline"][0], start=float("nan"), rps=float("inf"),
                                 p90=float("nan"), p99=1e308)] * 3
    write(root / "timeline-nan.json", timeline)
    no_global = copy.deepcopy(BASE)
    no_global["results"] = [r for r in no_global["results"] if r["name"] != "global"]
    write(root / "no-global.json", no_global)
    write(root / "not-json.json", text="{")
    return ["nan.json", "surrogate.json", "year1.json", "hdr-overrun.json", "hdr-jump.json",
            "fortio-absurd.json", "timeline-nan.json", "no-global.json", "not-json.json"]


def test_each_hostile_file_is_its_own_422_and_the_list_keeps_the_good_ones(
        tmp_path: Path, serve: Any) -> None:
    good(tmp_path / "good.json")
    good(tmp_path / "runs" / "other.json", label="other")
    names = hostile_files(tmp_path)
    browse = serve(tmp_path)

    status, _, page = request(browse.port, "/")
    assert status == 200, page[-400:]
    assert b"/result/good.json" in page and b"/result/runs/other.json" in page
    rows = re.findall(rb'<tr class="([^"]*)" data-kind="[^"]*" data-path="([^"]*)"', page)
    kinds = {path.decode(): kind.decode() for kind, path in rows}
    assert kinds["good.json"] == "result" and kinds["runs/other.json"] == "result"
    assert set(kinds) == {"good.json", "runs/other.json", *names}
    for name in names:
        status, _, body = request(browse.port, "/result/" + name)
        # A page if the file can be shown faithfully, else its 422: never a 500.
        assert status in (200, 422), (name, status, body[-300:])
        if kinds[name] == "error unreadable":
            assert status == 422, name
    for name in ("nan.json", "surrogate.json", "hdr-overrun.json", "hdr-jump.json",
                 "fortio-absurd.json"):
        assert request(browse.port, "/result/" + name)[0] == 422, name
    status, _, _ = request(browse.port, "/compare?id=good.json&id=nan.json")
    assert status == 422
    assert request(browse.port, "/compare?id=good.json&id=runs/other.json")[0] == 200
    assert request(browse.port, "/result/good.json")[0] == 200


def test_a_fault_the_list_does_not_read_is_a_422_then_an_unreadable_row(
        tmp_path: Path, serve: Any) -> None:
    # The list reads only what a row shows (docs/outputs.md, "The result browser"): hostile
    # histograms and NaNs in a statistic no row shows are found when the result is opened,
    # and the list names the file as unreadable from then on, never showing it as a result
    # again and never failing.
    good(tmp_path / "good.json")
    tiny = {"sigfig": 1, "lowest": 1, "highest": 2}
    write(tmp_path / "overrun.json", with_blobs(BASE, [blob(zigzag_leb(1) * 5000, **tiny)]))
    write(tmp_path / "jump.json",
          with_blobs(BASE, [blob(zigzag_leb(-(2**40)) + zigzag_leb(5), **tiny)]))
    nan = copy.deepcopy(BASE)
    for statistic in global_entry(nan)["statistics"]:
        if statistic["id"].endswith("latency_2xx"):
            statistic.update(min=float("nan"), mean=float("inf"))
    write(tmp_path / "nan-2xx.json", nan)
    names = ["overrun.json", "jump.json", "nan-2xx.json"]
    browse = serve(tmp_path)

    def kinds() -> dict[str, str]:
        status, _, page = request(browse.port, "/")
        assert status == 200, page[-400:]
        rows = re.findall(rb'<tr class="([^"]*)" data-kind="[^"]*" data-path="([^"]*)"', page)
        return {path.decode(): kind.decode() for kind, path in rows}

    assert kinds() == {"good.json": "result", **{name: "result" for name in names}}
    assert request(browse.port, "/compare?id=good.json&id=jump.json")[0] == 422
    for name in names:
        status, _, body = request(browse.port, "/result/" + name)
        assert status == 422 and name.encode() in body, (name, status, body[-300:])
    assert kinds() == {"good.json": "result", **{name: "error unreadable" for name in names}}
    status, _, page = request(browse.port, "/")
    reasons = re.findall(rb'<span class="error">([^<]*)</span>', page)
    assert sum(b"does not decode" in r for r in reasons) == 2, reasons
    assert sum(b"not a finite number" in r for r in reasons) == 1, reasons
    assert request(browse.port, "/result/good.json")[0] == 200


def test_a_renderer_that_raises_is_that_file_s_422(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # Whatever the loader lets through, a page that fails to render is a 422 naming the
    # file, not a 500: here the renderer itself raises (in this process's server).
    from nhbench.browse import BrowseServer, _server

    def overflowing(*args: object, **kwargs: object) -> str:
        raise OverflowError("cannot convert float infinity to integer")

    good(tmp_path / "good.json")
    monkeypatch.setattr(_server, "result_page", overflowing)
    monkeypatch.setattr(_server, "compare_page", overflowing)
    server = BrowseServer(tmp_path, "127.0.0.1", 0)
    _, port = server.start()
    try:
        status, _, body = request(port, "/result/good.json")
        assert status == 422 and b"OverflowError" in body and b"good.json" in body
        assert request(port, "/compare?id=good.json&id=good.json")[0] == 422
        assert request(port, "/")[0] == 200
    finally:
        server.stop()


def test_a_huge_result_makes_a_page_of_bounded_size(tmp_path: Path, serve: Any) -> None:
    document = copy.deepcopy(BASE)
    document["timeline"] = [dict(BASE["timeline"][0], start=float(i)) for i in range(20_000)]
    global_entry(document)["counters"] += [{"name": f"x.extra_{i}", "value": str(i + 1)}
                                      for i in range(3000)]
    write(tmp_path / "long.json", document)
    browse = serve(tmp_path)
    status, _, page = request(browse.port, "/result/long.json")
    assert status == 200
    # Unbounded, the timeline's markers alone were about 20 MB.
    assert len(page) < 3_000_000, len(page)
    assert b"20000 intervals of --stats-interval, drawn as at most 1000 points" in page
    assert b"3,007 counters: the first 1,000 are shown" in page
    assert page.count(b"<tr><td>x.extra_") == 1000 - 7


# ---- who may ask -------------------------------------------------------------------------


def _own_address(family: int) -> str | None:
    """A non-loopback address of this machine (the one a route out would use), or None."""
    target = ("192.0.2.1", 9) if family == socket.AF_INET else ("2001:db8::1", 9)
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect(target)
            address = str(probe.getsockname()[0])
    except OSError:
        return None
    return None if address.startswith(("127.", "::1")) else address


@pytest.mark.parametrize("listen", ["0.0.0.0:0", "[::]:0"])
def test_a_wildcard_listen_address_still_checks_the_host(tmp_path: Path, serve: Any,
                                                         listen: str) -> None:
    good(tmp_path / "good.json")
    browse = serve(tmp_path, listen=listen)
    port = browse.port
    for host in ("attacker.example", f"attacker.example:{port}", "127.0.0.1.nip.io",
                 "localhost:80@attacker.example", "0x7f000001", "192.0.2.99"):
        assert request(port, "/files/good.json", host=host)[0] == 403, host
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}",
                 f"{socket.gethostname()}:{port}"):
        assert request(port, "/files/good.json", host=host)[0] == 200, host
    # A user on the network types the machine's address: the Host is that literal.
    own = _own_address(socket.AF_INET)
    if own is not None:
        status, _, body = request(port, "/files/good.json", host=f"{own}:{port}", address=own)
        assert status == 200 and json.loads(body)["options"]["label"] == ["good"]


def test_a_cross_site_subresource_request_is_refused(tmp_path: Path, serve: Any) -> None:
    good(tmp_path / "good.json")
    browse = serve(tmp_path)
    image = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors",
             "Sec-Fetch-Dest": "image"}
    for path in ("/files/good.json", "/result/good.json", "/"):
        assert request(browse.port, path, headers=image)[0] == 403, path
    link = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate",
            "Sec-Fetch-Dest": "document"}
    assert request(browse.port, "/result/good.json", headers=link)[0] == 200
    own = {"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "no-cors",
           "Sec-Fetch-Dest": "image"}
    assert request(browse.port, "/files/good.json", headers=own)[0] == 200


# ---- resources ---------------------------------------------------------------------------


def test_parallel_downloads_are_streamed_in_bounded_memory(tmp_path: Path, serve: Any) -> None:
    size = 200 * 1024 * 1024
    with open(tmp_path / "big.bin", "wb") as handle:
        handle.truncate(size)  # sparse: costs no disk
    browse = serve(tmp_path)
    request(browse.port, "/")  # the first page's imports and caches, before the baseline
    before = browse.status("VmRSS")
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], browse.status("VmRSS"))
            time.sleep(0.01)

    def download(_: int) -> int:
        received = 0
        with socket.create_connection(("127.0.0.1", browse.port), timeout=60) as sock:
            sock.sendall(b"GET /files/big.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         b"Connection: close\r\n\r\n")
            while chunk := sock.recv(1 << 20):
                received += len(chunk)
        return received

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        received = list(pool.map(download, range(4)))
    done.set()
    sampler.join()
    assert all(size < n < size + 4096 for n in received), received
    # Read whole, four downloads held 4 x 200 MB; streamed, a few buffers.
    growth_mb = (peak[0] - before) / 1024
    assert growth_mb < 64, f"RSS grew by {growth_mb:.0f} MB"


def _open_heads(port: int, count: int) -> list[socket.socket]:
    heads = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
        heads.append(sock)
    return heads


def _closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(1024) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_unfinished_request_heads_hold_few_threads_and_time_out(tmp_path: Path,
                                                                serve: Any) -> None:
    good(tmp_path / "good.json")
    connections, timeout = 4, 1.0
    browse = serve(tmp_path, limits=(timeout, connections, 2, 10))
    idle_threads = browse.status("Threads")
    heads = _open_heads(browse.port, 60)
    try:
        time.sleep(0.5)
        assert browse.status("Threads") <= idle_threads + connections
        # An ordinary request waits its turn and is answered.
        status, _, _ = request(browse.port, "/files/good.json", timeout=120)
        assert status == 200
        # Every unfinished head is closed by the server (60 heads, 4 at a time, 1 s each).
        for sock in heads:
            sock.settimeout(60)
            assert _closed_by_server(sock)
    finally:
        for sock in heads:
            sock.close()

    # A head trickled a byte at a time is closed when its whole-head deadline passes.
    with socket.create_connection(("127.0.0.1", browse.port), timeout=30) as sock:
        started = time.monotonic()
        closed = False
        for byte in b"GET / HTTP/1.1\r\nX-Slow: " + b"a" * 200:
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                closed = True
                break
            sock.settimeout(0.3)
            try:
                if sock.recv(1024) == b"":
                    closed = True
                    break
            except TimeoutError:
                pass
            except ConnectionResetError:
                closed = True
                break
        assert closed and time.monotonic() - started < 20 * timeout
    # An idle keep-alive connection is closed too.
    with socket.create_connection(("127.0.0.1", browse.port), timeout=30) as sock:
        sock.sendall(b"GET /favicon.ico HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert sock.recv(1024).startswith(b"HTTP/1.1 204")
        sock.settimeout(30)
        assert _closed_by_server(sock)
    assert browse.status("Threads") <= idle_threads + 1


def test_parallel_result_pages_are_bounded_and_the_rest_get_503(tmp_path: Path,
                                                               serve: Any) -> None:
    document = copy.deepcopy(BASE)
    document["timeline"] = [dict(BASE["timeline"][0], start=float(i)) for i in range(60_000)]
    write(tmp_path / "slow.json", document)
    browse = serve(tmp_path, limits=(30, 16, 1, 0.2))

    def page(_: int) -> tuple[int, dict[str, str]]:
        status, headers, _ = request(browse.port, "/result/slow.json", timeout=120)
        return status, headers

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(page, range(6)))
    statuses = sorted(status for status, _ in answers)
    # One page is built at a time; the others wait 0.2 s for it, far less than it takes.
    assert set(statuses) == {200, 503}, statuses
    assert all(headers.get("retry-after") for status, headers in answers if status == 503)
    assert request(browse.port, "/result/slow.json", timeout=120)[0] == 200

