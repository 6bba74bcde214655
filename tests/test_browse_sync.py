"""Fortio's result sharing against real Fortio (1.66.5): ``nhbench browse`` serves
``/data/index.tsv`` (and ``/fortio/data/index.tsv``) that ``fortio report -sync`` reads, and
``nhbench browse --sync`` pulls from a real ``fortio report``'s index and from an S3-style
bucket listing (a local HTTP server) that real Fortio reads the same way.

The index's checksums are computed here with hashlib, independently of nhbench; files are
compared byte for byte. Tests that need fortio skip only when it is absent.
"""

from __future__ import annotations

import http.client
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.polling import wait_until
from support.sync_peer import Reply, md5_b64, peer

FORTIO = shutil.which("fortio") or "/root/go/bin/fortio"
needs_fortio = pytest.mark.skipif(not os.access(FORTIO, os.X_OK),
                                  reason="fortio is not installed "
                                  "(go install fortio.org/fortio@v1.66.5)")
DATA = Path(__file__).resolve().parent / "data"
FORTIO_RESULT = (DATA / "fortio" / "fortio-1.66.5-load.json").read_bytes()
NHBENCH_RESULT = (DATA / "nhbench-json-earlier-format.json").read_bytes()


class Process:
    """A server process that prints its URL: nhbench browse or fortio report."""

    def __init__(self, args: list[str], pattern: str) -> None:
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, stdin=subprocess.DEVNULL)
        assert self.proc.stdout is not None
        self.lines: list[str] = []
        for line in self.proc.stdout:
            self.lines.append(line)
            match = re.search(pattern, line)
            if match:
                self.url = match.group(1)
                break
        else:
            raise AssertionError("".join(self.lines))

    def stop(self) -> str:
        if self.proc.returncode is None:
            self.proc.terminate()
            out, _ = self.proc.communicate(timeout=20)
            self.lines.append(out)
        return "".join(self.lines)


@pytest.fixture
def started() -> Iterator[Any]:
    processes: list[Process] = []

    def start(args: list[str], pattern: str = r"^(http://127\.0\.0\.1:\d+)/\s*$") -> Process:
        processes.append(Process(args, pattern))
        return processes[-1]

    yield start
    for process in processes:
        output = process.stop()
        assert "Traceback" not in output, output


def browse(start: Any, directory: Path, *extra: str) -> Process:
    return start([sys.executable, "-m", "nhbench", "browse", str(directory), "--listen",
                  "127.0.0.1:0", *extra])


def fortio_report(start: Any, directory: Path, *extra: str) -> Process:
    report: Process = start([FORTIO, "report", "-data-dir", str(directory), "-http-port",
                             "127.0.0.1:0", "-redirect-port", "disabled", *extra])

    # Fortio prints its URL before it adds its handlers (ui.Report): wait for them.
    def ready() -> bool:
        try:
            return get(report.url + "/data/index.tsv").startswith(b"TsvHttpData-1.0")
        except urllib.error.HTTPError as exc:
            exc.close()
            return False

    assert wait_until(ready, 30)
    return report


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 - a test URL
        return bytes(response.read())


def shared_dir(root: Path) -> Path:
    """Two results, and what must not be shared: a text file, a hidden result, a result in
    a subdirectory, a link to a result outside."""
    root.mkdir()
    (root / "2026-01-02-030405_fortio.json").write_bytes(FORTIO_RESULT)
    (root / "2026-01-03-000000_nhbench.json").write_bytes(NHBENCH_RESULT)
    (root / "notes.txt").write_text("not a result")
    (root / ".hidden.json").write_bytes(FORTIO_RESULT)
    (root / "sub").mkdir()
    (root / "sub" / "deep.json").write_bytes(FORTIO_RESULT)
    (root.parent / "outside.json").write_bytes(FORTIO_RESULT)
    (root / "link.json").symlink_to(root.parent / "outside.json")
    return root


SHARED = ["2026-01-03-000000_nhbench.json", "2026-01-02-030405_fortio.json"]


@pytest.mark.parametrize("mount", ["/data/", "/fortio/data/"])
def test_index_tsv_is_fortios_format(tmp_path: Path, started: Any, mount: str) -> None:
    root = shared_dir(tmp_path / "results")
    served = browse(started, root)
    body = get(served.url + mount + "index.tsv").decode()
    # Fortio's order (newest name first), one line per file, each ending in a newline.
    expected = "TsvHttpData-1.0\n" + "".join(
        f"{served.url}{mount}{name}\t{len((root / name).read_bytes())}\t"
        f"{md5_b64((root / name).read_bytes())}\n" for name in SHARED)
    assert body == expected
    # Each listed URL serves the file itself; what is not listed is not served.
    for name in SHARED:
        assert get(served.url + mount + name) == (root / name).read_bytes()
    for name in ("notes.txt", ".hidden.json", "sub/deep.json", "link.json", "missing.json"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            get(served.url + mount + name)
        refused.value.close()
        assert refused.value.code == 404, name
    listing = get(served.url + mount).decode()
    assert all(f'href="{name}"' in listing for name in SHARED)
    assert "link.json" not in listing and "notes" not in listing


@pytest.mark.serial
def test_kept_alive_downloads_do_not_wait_for_delayed_acks(tmp_path: Path,
                                                           started: Any) -> None:
    # A sync fetches file after file on one connection. With the response's head and body
    # in separate writes and Nagle on, each body waited for the client's delayed ACK: at
    # least 40 ms a file on Linux (Fortio pulled 2000 files in 91 s, Fortio from Fortio in
    # under 2). 100 files therefore took over 4 s; now a fraction of a second.
    root = tmp_path / "results"
    root.mkdir()
    for i in range(100):
        (root / f"{i:03d}.json").write_bytes(FORTIO_RESULT)
    served = browse(started, root)
    connection = http.client.HTTPConnection("127.0.0.1", int(served.url.rsplit(":", 1)[1]),
                                            timeout=30)
    begun = time.monotonic()
    for i in range(100):
        connection.request("GET", f"/data/{i:03d}.json")
        assert connection.getresponse().read() == FORTIO_RESULT
    elapsed = time.monotonic() - begun
    connection.close()
    assert elapsed < 2.5, f"100 kept-alive downloads took {elapsed:.2f} s"


def test_base_url_starts_the_index_urls(tmp_path: Path, started: Any) -> None:
    root = shared_dir(tmp_path / "results")
    served = browse(started, root, "--base-url", "https://results.example.com/prefix/")
    body = get(served.url + "/fortio/data/index.tsv").decode().splitlines()
    assert body[1].startswith(
        "https://results.example.com/prefix/fortio/data/2026-01-03-000000_nhbench.json\t")
    # The base URL's host is this server's name too (behind a proxy that keeps Host).
    request = urllib.request.Request(served.url + "/data/index.tsv",
                                     headers={"Host": "results.example.com"})
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        assert response.status == 200


@needs_fortio
@pytest.mark.parametrize("mount", ["/data/", "/fortio/data/"])
def test_fortio_report_syncs_our_results(tmp_path: Path, started: Any, mount: str) -> None:
    root = shared_dir(tmp_path / "results")
    served = browse(started, root)
    fortio_dir = tmp_path / "fortio"
    fortio_dir.mkdir()
    # fortio syncs at startup, before it listens: once it prints its URL, the files are in.
    report = fortio_report(started, fortio_dir, "-sync", served.url + mount + "index.tsv")
    assert sorted(p.name for p in fortio_dir.iterdir()) == sorted(SHARED)
    for name in SHARED:
        assert (fortio_dir / name).read_bytes() == (root / name).read_bytes()
    # And Fortio's own report UI lists them.
    page = get(report.url + "/browse").decode()
    assert "2026-01-02-030405_fortio" in page and "2026-01-03-000000_nhbench" in page


@needs_fortio
@pytest.mark.parametrize("mount", ["/data/", "/fortio/data/"])
def test_fortio_report_syncs_from_our_ui(tmp_path: Path, started: Any, mount: str) -> None:
    # nhbench ui (the UI of `nhbench fortio server`) shares DIR as nhbench browse does: its
    # REST API answers data/ID.json, and must leave index.tsv to the browser.
    root = shared_dir(tmp_path / "results")
    served = started([sys.executable, "-m", "nhbench", "ui", str(root), "--listen",
                      "127.0.0.1:0"])
    fortio_dir = tmp_path / "fortio"
    fortio_dir.mkdir()
    fortio_report(started, fortio_dir, "-sync", served.url + mount + "index.tsv")
    assert sorted(p.name for p in fortio_dir.iterdir()) == sorted(SHARED)
    for name in SHARED:
        assert (fortio_dir / name).read_bytes() == (root / name).read_bytes()


@needs_fortio
def test_our_sync_pulls_a_fortio_report_and_keeps_pulling(tmp_path: Path,
                                                          started: Any) -> None:
    fortio_dir = tmp_path / "fortio"
    fortio_dir.mkdir()
    report = fortio_report(started, fortio_dir)
    # A result Fortio itself wrote (fortio load -a), and one copied in.
    subprocess.run([FORTIO, "load", "-a", "-data-dir", str(fortio_dir), "-n", "20", "-qps",
                    "-1", "-labels", "sync test", report.url + "/"], check=True,
                   capture_output=True, timeout=60)
    (fortio_dir / "2020-01-01-000000_copied.json").write_bytes(FORTIO_RESULT)
    names = sorted(p.name for p in fortio_dir.iterdir())
    assert len(names) == 2 and any(n.endswith("_sync_test.json") for n in names)

    ours = tmp_path / "ours"
    ours.mkdir()
    served = browse(started, ours, "--sync", report.url + "/data/index.tsv",
                    "--sync-interval", "500ms")
    # The first sync is done (and said) before the URL is printed.
    assert "sync: 2 fetched, 0 already present, 0 conflicting, 0 skipped, 0 failed" \
        in "".join(served.lines)
    for name in names:
        assert (ours / name).read_bytes() == (fortio_dir / name).read_bytes()
    # The browser lists Fortio's run.
    assert "sync test" in get(served.url + "/").decode()
    # -sync-interval: a run saved later arrives without a restart.
    (fortio_dir / "2030-01-01-000000_later.json").write_bytes(FORTIO_RESULT)
    assert wait_until(lambda: (ours / "2030-01-01-000000_later.json").exists(), 30)
    assert (ours / "2030-01-01-000000_later.json").read_bytes() == FORTIO_RESULT
    # Stopped between two rounds or during one: no temporary file is left behind.
    assert "Traceback" not in served.stop()
    assert not [p for p in ours.iterdir() if p.name.startswith(".")]


@needs_fortio
def test_fortio_report_command_line_syncs_through_the_front_end(tmp_path: Path,
                                                              started: Any) -> None:
    # The same `fortio report` command line, given to nhbench's Fortio front-end: it pulls
    # a real fortio report's results before it serves, then keeps pulling.
    source = tmp_path / "fortio"
    source.mkdir()
    (source / "2026-01-02-030405_fortio.json").write_bytes(FORTIO_RESULT)
    peer = fortio_report(started, source)
    ours = tmp_path / "ours"
    ours.mkdir()
    front = started([sys.executable, "-m", "nhbench", "fortio", "report", "-data-dir",
                     str(ours), "-http-port", "127.0.0.1:0", "-sync",
                     peer.url + "/data/index.tsv", "-sync-interval", "500ms",
                     "-base-url", "http://results.example/"],
                    r"^(http://127\.0\.0\.1:\d+)/\s*$")
    assert (ours / "2026-01-02-030405_fortio.json").read_bytes() == FORTIO_RESULT
    (source / "2030-01-01-000000_later.json").write_bytes(FORTIO_RESULT)
    assert wait_until(lambda: (ours / "2030-01-01-000000_later.json").exists(), 30)
    # -base-url starts the index's URLs, as in Fortio.
    index = get(front.url + "/data/index.tsv").decode()
    assert "http://results.example/data/2030-01-01-000000_later.json" in index


@needs_fortio
def test_our_sync_pulls_a_fortio_server(tmp_path: Path, started: Any) -> None:
    from nhbench.browse import sync_results

    fortio_dir = tmp_path / "fortio"
    fortio_dir.mkdir()
    (fortio_dir / "2026-01-02-030405_fortio.json").write_bytes(FORTIO_RESULT)
    server = started([FORTIO, "server", "-data-dir", str(fortio_dir), "-http-port",
                      "127.0.0.1:0", "-grpc-port", "disabled", "-tcp-port", "disabled",
                      "-udp-port", "disabled", "-redirect-port", "disabled"],
                     r"^\s*(http://127\.0\.0\.1:\d+)/fortio/\s*$")
    ours = tmp_path / "ours"
    ours.mkdir()
    # fortio server serves its data directory under its UI path.
    report = sync_results(server.url + "/fortio/data/index.tsv", ours)
    assert (report.fetched, report.failed, report.skipped) == (1, 0, 0)
    assert (ours / "2026-01-02-030405_fortio.json").read_bytes() == FORTIO_RESULT


def bucket_page(keys: list[tuple[str, bytes]], next_marker: str = "") -> bytes:
    contents = "".join(f"<Contents><Key>{key}</Key><Size>{len(body)}</Size></Contents>"
                       for key, body in keys)
    truncated = "true" if next_marker else "false"
    marker = f"<NextMarker>{next_marker}</NextMarker>" if next_marker else ""
    return ('<?xml version="1.0" encoding="UTF-8"?>'
            '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
            f"<Name>results</Name><IsTruncated>{truncated}</IsTruncated>{marker}"
            f"{contents}</ListBucketResult>").encode()


@pytest.mark.parametrize("client", ["nhbench", pytest.param("fortio", marks=needs_fortio)])
def test_bucket_listing_in_two_pages(tmp_path: Path, started: Any, client: str) -> None:
    first = [("runs/2026-01-01-000000_a.json", FORTIO_RESULT),
             ("runs/2026-01-01-000001_b.json", NHBENCH_RESULT)]
    second = [("runs/2026-01-01-000002_c.json", b'{"c": 1}'),
              ("runs/readme.txt", b"not a result")]

    def listing(handler: Any) -> None:
        # The continuation is asked for with marker=NextMarker, as S3's v1 listing.
        last = "marker=runs%2F2026-01-01-000001_b.json" in handler.path
        body = bucket_page(second) if last else \
            bucket_page(first, next_marker="runs/2026-01-01-000001_b.json")
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    target = tmp_path / "target"
    target.mkdir()
    with peer() as bucket:
        bucket.routes["/results"] = listing
        for key, body in first + second:
            bucket.routes[f"/results/{key}"] = Reply(body)
        url = bucket.url + "/results?prefix=runs/"
        if client == "nhbench":
            from nhbench.browse import sync_results

            report = sync_results(url, target)
            assert (report.fetched, report.skipped, report.failed) == (3, 1, 0)
        else:
            fortio_report(started, target, "-sync", url)
        assert bucket.fetched("/results") == 2
    assert sorted(p.name for p in target.iterdir()) == [
        "2026-01-01-000000_a.json", "2026-01-01-000001_b.json", "2026-01-01-000002_c.json"]
    for key, body in first + second[:1]:
        assert (target / key.rsplit("/", 1)[1]).read_bytes() == body


@pytest.mark.parametrize(("args", "needle", "status"), [
    (["--sync", "ftp://127.0.0.1/index.tsv"], "--sync: 'ftp://127.0.0.1/index.tsv' is not "
     "an http:// or https:// URL", 2),
    (["--sync-interval", "1s"], "--sync-interval: needs --sync", 2),
    (["--sync", "http://127.0.0.1:1/x", "--sync-interval", "0s"], "must be more than 0", 2),
    (["--sync", "http://127.0.0.1:1/x", "--sync-interval", "soon"], "--sync-interval:", 2),
    (["--base-url", "results.example.com"], "--base-url: 'results.example.com' is not", 2),
    (["--sync", "http://127.0.0.1:1/index.tsv"], "--sync: cannot fetch the listing "
     "http://127.0.0.1:1/index.tsv: Connection refused", 1),
])
def test_sync_options_refused_in_one_line(tmp_path: Path, args: list[str], needle: str,
                                          status: int) -> None:
    done = subprocess.run([sys.executable, "-m", "nhbench", "browse", str(tmp_path),
                           "--listen", "127.0.0.1:0", *args], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == status, done.stderr
    assert needle in done.stderr
    # Nothing served: the URL line is never printed.
    assert done.stderr.count("\n") == 1 and done.stdout == ""
