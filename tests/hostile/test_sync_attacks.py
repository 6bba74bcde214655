"""A hostile peer against ``nhbench browse --sync`` (`nhbench.browse.sync_results`), and
hostile requests against the ``/data/`` the browser shares.

The peer is a real HTTP server on loopback (tests/support/sync_peer.py) serving listings
that try to: write outside the directory (``../`` and encoded ``%2F`` names, hidden and
non-result names), make us fetch from another host (server-side request forgery: a second
server records whether it was asked) or another scheme, exhaust memory or disk (a listing
over the size or entry limit, a file longer than it announced, a sync over the byte cap),
slip in altered files (wrong MD5, a different file of an existing name), hang us (a server
that says nothing, one trickling a byte at a time), loop (redirects, bucket markers) or
expand entities (a document type in the XML). Each is refused by name and counted; nothing
outside the directory is written, nothing half-written is left.

docs/outputs.md, "Sharing results", lists the rules and limits.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.sync_peer import Peer, Reply, peer, tsv, tsv_line

from nhbench.browse import SyncError, SyncReport, sync_results
from nhbench.browse import _sync as sync_module

pytestmark = [pytest.mark.hostile, pytest.mark.timeout(120)]

RESULT = b'{"RunType": "HTTP", "Labels": "peer"}'


@pytest.fixture
def origin() -> Iterator[Peer]:
    with peer() as running:
        yield running


@pytest.fixture
def target(tmp_path: Path) -> Path:
    directory = tmp_path / "nest" / "target"
    directory.mkdir(parents=True)
    return directory


def files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def nothing_written_around(target: Path) -> None:
    """Nothing outside `target` (its parents hold only the directories made here), and no
    temporary file left in it."""
    assert files(target.parent) == ["target"]
    assert files(target.parent.parent) == ["nest"]
    assert not [n for n in files(target) if n.startswith(".")]


def test_names_that_leave_the_directory_or_are_not_results_are_skipped(
        origin: Peer, target: Path) -> None:
    origin.routes["/ok/2026-01-01_ok.json"] = RESULT
    hostile = ["..%2F..%2Fescaped.json", "%2E%2E%2Fescaped.json", ".hidden.json",
               "evil.sh", "no-extension", "x.json%00.txt", "new%0Aline.json",
               "%1B%5B2Jclear.json", "a" * 300 + ".json", ""]
    for name in hostile:
        origin.routes[f"/ok/{name}"] = RESULT
    index = tsv(tsv_line(f"{origin.url}/ok/2026-01-01_ok.json", RESULT),
                *(tsv_line(f"{origin.url}/ok/{name}", RESULT) for name in hostile))
    origin.routes["/index.tsv"] = index
    report = sync_results(origin.url + "/index.tsv", target)
    assert (report.fetched, report.skipped, report.failed) == (1, len(hostile), 0)
    assert files(target) == ["2026-01-01_ok.json"]
    nothing_written_around(target)
    # Only the good file was asked for, and the lines naming the others are printable.
    assert origin.fetched("/ok/2026-01-01_ok.json") == 1
    assert [r for r in origin.requests if r.startswith("/ok/")] == ["/ok/2026-01-01_ok.json"]
    assert not any("\x1b" in line or "\n" in line for line in report.problems)


def test_other_hosts_and_schemes_are_not_followed(origin: Peer, target: Path) -> None:
    # SSRF: an index must not make this machine fetch from another host of its network.
    with peer() as internal:
        internal.routes["/secret.json"] = RESULT
        origin.routes["/index.tsv"] = tsv(
            tsv_line(f"{internal.url}/secret.json", RESULT),
            tsv_line(f"http://localhost:{origin.port}/other-name.json", RESULT),
            tsv_line("file:///etc/passwd.json", RESULT),
            tsv_line("gopher://127.0.0.1:70/x.json", RESULT))
        report = sync_results(origin.url + "/index.tsv", target)
        assert (report.fetched, report.skipped) == (0, 4)
        assert internal.requests == []
        assert files(target) == []
        # Fortio's behaviour, asked for by name: any http(s) host, never another scheme.
        report = sync_results(origin.url + "/index.tsv", target, any_host=True)
        assert internal.requests == ["/secret.json"]
        assert files(target) == ["secret.json"]
        assert report.skipped == 2
    with pytest.raises(ValueError, match="is not an http:// or https:// URL"):
        sync_results("file:///etc/passwd", target)


def test_redirects_loop_or_leave_the_host(origin: Peer, target: Path) -> None:
    def to(location: str) -> Reply:
        return Reply(status=302, headers={"Location": location})

    with peer() as internal:
        internal.routes["/secret.json"] = RESULT
        origin.routes["/a.json"] = to("/b.json")
        origin.routes["/b.json"] = to(origin.url + "/a.json")
        origin.routes["/away.json"] = to(f"{internal.url}/secret.json")
        origin.routes["/file.json"] = to("file:///etc/hostname")
        origin.routes["/moved.json"] = to("/real.json")
        origin.routes["/real.json"] = RESULT
        origin.routes["/index.tsv"] = tsv(*(tsv_line(f"{origin.url}/{name}", RESULT) for name in
                                            ("a.json", "away.json", "file.json", "moved.json")))
        report = sync_results(origin.url + "/index.tsv", target)
        assert internal.requests == []
    assert (report.fetched, report.failed) == (1, 3)
    assert files(target) == ["moved.json"]
    text = "\n".join(report.problems)
    assert "more than 5 redirects" in text
    assert "is not the listing's host" in text and "scheme 'file'" in text
    # The loop is cut after the redirect limit, not followed for ever.
    assert origin.fetched("/a.json") + origin.fetched("/b.json") == 6


def test_a_huge_listing_is_refused(origin: Peer, target: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    origin.routes["/big.tsv"] = b"TsvHttpData-1.0\n" + b"#" * sync_module.MAX_LISTING_BYTES
    with pytest.raises(SyncError, match="cannot fetch the listing .* more than 8388608 bytes"):
        sync_results(origin.url + "/big.tsv", target)

    # Without a Content-Length (chunked): cut off at the limit just the same.
    def endless(handler: Any) -> None:
        handler.send_response(200)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        chunk = b"#" * 65536
        try:
            for _ in range(sync_module.MAX_LISTING_BYTES // len(chunk) + 10):
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        except OSError:
            return

    origin.routes["/endless.tsv"] = endless
    with pytest.raises(SyncError, match="more than 8388608 bytes"):
        sync_results(origin.url + "/endless.tsv", target)
    # Too many entries: refused before any is fetched.
    monkeypatch.setattr(sync_module, "MAX_ENTRIES", 50)
    origin.routes["/many.tsv"] = tsv(*(tsv_line(f"{origin.url}/{i}.json", RESULT)
                                       for i in range(51)))
    with pytest.raises(SyncError, match="more than 50 files"):
        sync_results(origin.url + "/many.tsv", target)
    assert [r for r in origin.requests if r.endswith(".json")] == []
    assert files(target) == []


def test_a_file_longer_than_announced_or_with_a_wrong_md5_is_not_stored(
        origin: Peer, target: Path) -> None:
    long = RESULT[:-1] + b" " * 1_000_000 + b"}"
    origin.routes["/long.json"] = long
    origin.routes["/short.json"] = RESULT
    origin.routes["/altered.json"] = RESULT.replace(b"peer", b"evil")
    origin.routes["/huge.json"] = RESULT
    origin.routes["/html.json"] = b"<html>an error page served with 200</html>"
    origin.routes["/index.tsv"] = tsv(
        tsv_line(f"{origin.url}/long.json", RESULT),           # announces RESULT's size
        f"{origin.url}/short.json\t{len(RESULT) + 10}\t",       # announces more than it is
        tsv_line(f"{origin.url}/altered.json", RESULT),         # RESULT's MD5
        f"{origin.url}/huge.json\t{1 << 40}\t",                 # over the result limit
        f"{origin.url}/html.json",                              # no size, no MD5
        f"{origin.url}/badsize.json\t-5\t",
        f"{origin.url}/badmd5.json\t5\tnot-base64!")
    report = sync_results(origin.url + "/index.tsv", target)
    assert (report.fetched, report.failed) == (0, 7)
    assert files(target) == []
    nothing_written_around(target)
    text = "\n".join(report.problems)
    for needle in (f"more than {len(RESULT)} bytes", "its MD5 is not the one announced",
                   f"{len(RESULT)} bytes received, {len(RESULT) + 10} announced",
                   "over the result limit", "not a JSON object", "is not a number of bytes"):
        assert needle in text, needle
    # The announced-too-large file is not even asked for.
    assert origin.fetched("/huge.json") == 0


def test_an_existing_file_is_never_replaced(origin: Peer, target: Path) -> None:
    (target / "mine.json").write_bytes(b'{"mine": true}')
    (target / "same.json").write_bytes(RESULT)
    (target / "link.json").symlink_to("/etc/hostname")
    for name in ("mine", "same", "link"):
        origin.routes[f"/{name}.json"] = RESULT
    origin.routes["/index.tsv"] = tsv(*(tsv_line(f"{origin.url}/{n}.json", RESULT)
                                        for n in ("mine", "same", "link")))
    report = sync_results(origin.url + "/index.tsv", target)
    assert (report.fetched, report.present, report.conflicts) == (0, 1, 2)
    assert (target / "mine.json").read_bytes() == b'{"mine": true}'
    assert os.readlink(target / "link.json") == "/etc/hostname"
    assert [r for r in origin.requests if r != "/index.tsv"] == []


def test_a_file_that_appears_during_the_fetch_is_kept(origin: Peer, target: Path) -> None:
    # Another writer (a second sync, a run saving its result) creates the name while the
    # file is being fetched: the store must not replace it.
    def racing(handler: Any) -> None:
        (target / "race.json").write_bytes(b'{"theirs": true}')
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(RESULT)))
        handler.end_headers()
        handler.wfile.write(RESULT)

    origin.routes["/race.json"] = racing
    origin.routes["/index.tsv"] = tsv(tsv_line(f"{origin.url}/race.json", RESULT))
    report = sync_results(origin.url + "/index.tsv", target)
    assert (report.fetched, report.present) == (0, 1)
    assert (target / "race.json").read_bytes() == b'{"theirs": true}'
    nothing_written_around(target)


def test_a_killed_syncs_temporary_files_are_removed_later(origin: Peer,
                                                          target: Path) -> None:
    # A sync killed while storing leaves its hidden temporary file; the next sync removes
    # one old enough to belong to no running sync, and leaves a fresh one alone.
    old, fresh = target / ".nhbench-sync-0123456789abcdef.tmp", target / ".nhbench-sync-fresh.tmp"
    old.write_bytes(b"{")
    fresh.write_bytes(b"{")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    origin.routes["/index.tsv"] = tsv()
    sync_results(origin.url + "/index.tsv", target)
    assert files(target) == [fresh.name]


def test_the_bytes_of_one_sync_are_capped(origin: Peer, target: Path) -> None:
    body = RESULT[:-1] + b" " * 4000 + b"}"
    for i in range(5):
        origin.routes[f"/{i}.json"] = body
    origin.routes["/index.tsv"] = tsv(*(tsv_line(f"{origin.url}/{i}.json", body)
                                        for i in range(5)))
    report = sync_results(origin.url + "/index.tsv", target, max_bytes=3 * len(body))
    assert (report.fetched, report.failed, report.bytes) == (3, 2, 3 * len(body))
    assert "already stored" in report.problems[0]
    # The next sync fetches what this one left.
    report = sync_results(origin.url + "/index.tsv", target, max_bytes=3 * len(body))
    assert (report.fetched, report.present) == (2, 3)


def test_a_silent_or_trickling_server_times_out(origin: Peer, target: Path) -> None:
    def trickle(handler: Any) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(RESULT)))
        handler.end_headers()
        try:
            for byte in RESULT:
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
                time.sleep(0.3)  # each read gets something: only the deadline ends it
        except OSError:
            return

    origin.routes["/slow.json"] = trickle
    origin.routes["/fine.json"] = RESULT
    origin.routes["/index.tsv"] = tsv(tsv_line(f"{origin.url}/slow.json", RESULT),
                                      tsv_line(f"{origin.url}/fine.json", RESULT))
    started = time.monotonic()
    report = sync_results(origin.url + "/index.tsv", target, timeout=1.0, file_deadline=2.0)
    elapsed = time.monotonic() - started
    assert (report.fetched, report.failed) == (1, 1)
    assert "slow.json" in report.problems[0] and "timed out" in report.problems[0]
    assert files(target) == ["fine.json"]
    assert elapsed < 8, elapsed  # the trickle alone would take about 11 s

    # A server that accepts and never answers: the listing fails by name.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        started = time.monotonic()
        with pytest.raises(SyncError, match="timed out"):
            sync_results(f"http://127.0.0.1:{silent.getsockname()[1]}/index.tsv", target,
                         timeout=1.0)
        assert time.monotonic() - started < 8


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<ListBucketResult><Contents><Key>&lol3;.json</Key></Contents></ListBucketResult>"""


def test_bucket_listings_that_loop_or_declare_entities(origin: Peer, target: Path) -> None:
    looping = (b"<ListBucketResult><IsTruncated>true</IsTruncated><NextMarker>same</NextMarker>"
               b"<Contents><Key>k.json</Key><Size>2</Size></Contents></ListBucketResult>")
    origin.routes["/loop"] = looping
    with pytest.raises(SyncError, match="repeats its marker 'same'"):
        sync_results(origin.url + "/loop", target)
    assert origin.fetched("/loop") == 2
    origin.routes["/lol"] = BILLION_LAUGHS
    with pytest.raises(SyncError, match="declares a document type"):
        sync_results(origin.url + "/lol", target)
    origin.routes["/junk"] = b"<html>not a listing"
    with pytest.raises(SyncError, match="neither a TsvHttpData-1.0 index nor a bucket"):
        sync_results(origin.url + "/junk", target)
    assert files(target) == []


def test_sync_interval_reports_each_round_and_survives_a_failing_peer(
        origin: Peer, target: Path) -> None:
    from nhbench.browse import SyncLoop

    outcomes: list[SyncReport | Exception] = []
    origin.routes["/index.tsv"] = tsv(tsv_line(f"{origin.url}/a.json", RESULT))
    origin.routes["/a.json"] = RESULT
    loop = SyncLoop(origin.url + "/index.tsv", target, 0.2, on_report=outcomes.append)
    loop.start()
    try:
        deadline = time.monotonic() + 20
        while len(outcomes) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        del origin.routes["/index.tsv"]  # the peer breaks: each round says so, none stops
        count = len(outcomes)
        while len(outcomes) < count + 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        loop.stop()
    assert isinstance(outcomes[0], SyncReport) and outcomes[0].fetched == 1
    assert isinstance(outcomes[1], SyncReport) and outcomes[1].present == 1
    assert isinstance(outcomes[-1], SyncError) and "status 404" in str(outcomes[-1])


# ---- the /data/ the browser shares ---------------------------------------------------------


def raw_get(port: int, path: str, extra: str = "") -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{extra}"
                     "Connection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(1 << 16):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_data_paths_cannot_leave_the_directory(tmp_path: Path) -> None:
    root = tmp_path / "results"
    root.mkdir()
    (root / "ok.json").write_bytes(RESULT)
    (tmp_path / "secret.json").write_bytes(b'{"TOPSECRET": 1}')
    (root / "in-link.json").symlink_to(root / "ok.json")
    (root / "out-link.json").symlink_to(tmp_path / "secret.json")
    (root / "proc.json").symlink_to("/proc/self/environ")
    (root / "sub").mkdir()
    (root / "sub" / "deep.json").write_bytes(RESULT)
    # A sparse file over the result limit: neither listed nor served.
    with open(root / "huge.json", "wb") as handle:
        handle.truncate(64 * 1024 * 1024 + 1)
    process = subprocess.Popen([sys.executable, "-m", "nhbench", "browse", str(root),
                                "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline().strip().rstrip("/").rsplit(":", 1)[1])
        status, index = raw_get(port, "/data/index.tsv")
        assert status == 200
        assert [line.split(b"\t")[0].rsplit(b"/", 1)[1] for line in index.splitlines()[1:]] \
            == [b"ok.json"]
        for path in ("/data/../secret.json", "/data/%2e%2e/secret.json",
                     "/data/..%2fsecret.json", "/fortio/data/%2Fetc%2Fpasswd",
                     "/data/out-link.json", "/data/in-link.json", "/data/proc.json",
                     "/data/sub/deep.json", "/data/huge.json", "/data/.x.json",
                     "/fortio/data/../../secret.json"):
            status, body = raw_get(port, path)
            assert status == 404, (path, status)
            assert b"TOPSECRET" not in body and b"PATH=" not in body
        assert raw_get(port, "/data/ok.json") == (200, RESULT)
        # The index's URLs take only a checked Host and an http(s) X-Forwarded-Proto.
        for extra, start in (("X-Forwarded-Proto: javascript\r\n", b"http://127.0.0.1:"),
                             ("X-Forwarded-Proto: https\r\n", b"https://127.0.0.1:"),
                             ("X-Forwarded-Host: evil.example\r\n", b"http://127.0.0.1:")):
            status, index = raw_get(port, "/data/index.tsv", extra)
            assert status == 200 and index.splitlines()[1].startswith(start), (extra, index)
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=20)
    assert "Traceback" not in stderr
