"""Hostile requests against ``nhbench ui`` (a subprocess, real sockets): a web page that
starts load at a URL is an attack tool if anyone can make it start one.

Every refusal is checked twice: the reply (403, Fortio's error shape for the REST API) AND
that nothing was sent: the run's target is a listening socket nobody accepts on
(`support.ui.Origin`), which would see a connection. Each protection also has its positive
control (the same request made right is served and reaches the origin), so the test fails
if a refusal is only a broken request.

* Loopback by default: ``nhbench ui`` without ``--listen`` is not reachable on the
  machine's other address.
* The token: on a non-loopback address one is generated and printed; a run or a stop
  without it (or with a wrong one) is refused; with it (header, query) served.
  ``--ui-unsafe-open`` serves without it and warns.
* CSRF: the form's POST without the session's CSRF value, with another session's, with a
  foreign ``Origin`` or ``Sec-Fetch-Site: cross-site``; a REST run or stop a browser makes
  for another site's page (a navigation or an ``<img>``).
* DNS rebinding: a Host header that does not name this machine.
* The caps (rate, connections, duration, until-stopped, as-fast-as-possible, runs at once)
  and the target allow-list (an address, a network, a name resolving outside it; a REST
  run's ``resolve`` address outside it, the URL's host allowed).
* Bodies: one larger than the limit, one without a length, one sent a byte a second;
  live streams beyond the cap.
* Fields a browser must not set (an output file, a payload file): refused by name.
"""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from support.ui import UI, Origin, form_session, local_address, request, rest

import nhbench

pytestmark = [pytest.mark.hostile, pytest.mark.timeout(240)]


@pytest.fixture
def origin() -> Iterator[Origin]:
    listening = Origin()
    yield listening
    listening.close()


@pytest.fixture
def uis(tmp_path: Path) -> Iterator[Any]:
    started: list[UI] = []

    def start(*args: str, listen: str = "127.0.0.1:0", **kwargs: Any) -> UI:
        started.append(UI(tmp_path, *args, listen=listen, **kwargs))
        return started[-1]

    yield start
    for ui in started:
        ui.stop()


def run_query(target: str, **extra: str) -> str:
    return "/fortio/rest/run?" + urlencode({"url": target, "qps": "5", "t": "3s",
                                           "async": "on", **extra})


def refused(reply: tuple[int, Any], origin: Origin, needle: str) -> None:
    status, document = reply
    assert status == 403, document
    assert document["error"] is True and needle in document.get("exception", ""), document
    assert not origin.connected(), "the refused run reached its target"


def served(reply: tuple[int, Any], origin: Origin) -> None:
    status, document = reply
    assert status == 200 and document["message"] == "started", document
    assert origin.connected(10), "the accepted run never reached its target"


# ---- where it listens, and the token --------------------------------------------------------


def test_the_default_address_is_loopback_only(uis: Any, tmp_path: Path) -> None:
    address = local_address()
    if address is None:
        pytest.skip("this machine has no non-loopback address")
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", 8080))
        except OSError:
            pytest.skip("port 8080 (the default) is taken")
    ui = uis(listen="")
    assert (ui.host, ui.port) == ("127.0.0.1", 8080)
    with pytest.raises(OSError):
        socket.create_connection((address, ui.port), timeout=5).close()


def test_a_non_loopback_address_requires_the_generated_token(uis: Any,
                                                             origin: Origin) -> None:
    address = local_address()
    if address is None:
        pytest.skip("this machine has no non-loopback address")
    ui = uis(listen=f"{address}:0")
    token = ui.token()
    assert len(token) >= 24
    host = f"{address}:{ui.port}"
    # Nothing, a wrong token, the token in the wrong header: refused, nothing sent.
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"X-Other": token}):
        refused(rest(ui.port, run_query(origin.url), address=address, host=host,
                     headers=headers), origin, "token is required")
    refused(rest(ui.port, run_query(origin.url, token="x" + token), address=address,
                 host=host), origin, "token is required")
    # Stopping needs it too (and stops nothing).
    status, document = rest(ui.port, "/fortio/rest/stop", address=address, host=host)
    assert status == 403, document
    # Reading does not: the status and the list are served.
    assert rest(ui.port, "/fortio/rest/status", address=address, host=host)[0] == 200
    # The token given: served, and the origin sees the run.
    served(rest(ui.port, run_query(origin.url), address=address, host=host,
                headers={"Authorization": f"Bearer {token}"}), origin)
    status, document = rest(ui.port, f"/fortio/rest/stop?token={quote(token)}",
                            address=address, host=host)
    assert status == 200 and document["Count"] == 1, document


def test_the_token_from_the_environment_guards_loopback_too(uis: Any, origin: Origin) -> None:
    ui = uis(environment={"NHBENCH_UI_TOKEN": "s3cret-token"})
    refused(rest(ui.port, run_query(origin.url)), origin, "token is required")
    served(rest(ui.port, run_query(origin.url),
                headers={"X-Nhbench-Token": "s3cret-token"}), origin)


def test_the_form_asks_for_the_token_once_per_session(uis: Any, origin: Origin) -> None:
    ui = uis("--token", "form-token")
    cookie, csrf = form_session(ui.port)
    fields = {"csrf": csrf, "uri": origin.url, "rps": "5", "duration": "2s",
              "connections": "1"}
    headers = {"Cookie": cookie}
    status, _, page = request(ui.port, "/run", method="POST", headers=headers,
                              body=urlencode({**fields, "token": "wrong"}).encode())
    assert status == 403 and b"token is required" in page
    assert not origin.connected()
    status, response, _ = request(ui.port, "/run", method="POST", headers=headers,
                                  body=urlencode({**fields, "token": "form-token"}).encode())
    assert status == 303 and origin.connected(10)
    # Another session (another browser) may not stop it without the token either.
    live = response["location"]
    cookie, csrf = form_session(ui.port, live)
    stop = live + "/stop"
    status, _, page = request(ui.port, stop, method="POST", headers={"Cookie": cookie},
                              body=urlencode({"csrf": csrf}).encode())
    assert status == 403 and b"token is required" in page
    assert rest(ui.port, "/fortio/rest/status?token=form-token")[1]["Statuses"]
    status, _, _ = request(ui.port, stop, method="POST", headers={"Cookie": cookie},
                           body=urlencode({"csrf": csrf, "token": "form-token"}).encode())
    assert status == 303


def test_unsafe_open_serves_without_a_token_and_says_so(uis: Any, origin: Origin) -> None:
    address = local_address()
    if address is None:
        pytest.skip("this machine has no non-loopback address")
    ui = uis("--ui-unsafe-open", listen=f"{address}:0")
    served(rest(ui.port, run_query(origin.url), address=address,
                host=f"{address}:{ui.port}"), origin)
    stderr = ui.stop()
    assert "WARNING: --ui-unsafe-open" in stderr and "token:" not in stderr


# ---- requests a browser makes for another site ---------------------------------------------


def test_the_form_needs_its_sessions_csrf_value(uis: Any, origin: Origin) -> None:
    ui = uis()
    cookie, csrf = form_session(ui.port)
    other_cookie, other_csrf = form_session(ui.port)
    fields = {"uri": origin.url, "rps": "5", "duration": "2s", "connections": "1"}
    own = f"http://127.0.0.1:{ui.port}"
    attempts = [
        ({"Cookie": cookie}, fields),                                     # no CSRF value
        ({"Cookie": cookie}, {**fields, "csrf": other_csrf}),             # another session's
        ({}, {**fields, "csrf": csrf}),                                   # no session
        ({"Cookie": "nhbench_ui=forged"}, {**fields, "csrf": csrf}),      # an unknown one
        ({"Cookie": cookie, "Origin": "http://evil.example"}, {**fields, "csrf": csrf}),
        ({"Cookie": cookie, "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate",
          "Sec-Fetch-Dest": "document"}, {**fields, "csrf": csrf}),
    ]
    for headers, body in attempts:
        status, _, page = request(ui.port, "/run", method="POST", headers=headers,
                                  body=urlencode(body).encode())
        assert status == 403, (headers, page[:300])
        assert not origin.connected(0.3), headers
    assert not origin.connected()
    status, _, _ = request(ui.port, "/run", method="POST",
                           headers={"Cookie": cookie, "Origin": own,
                                    "Sec-Fetch-Site": "same-origin"},
                           body=urlencode({**fields, "csrf": csrf}).encode())
    assert status == 303 and origin.connected(10)
    assert other_cookie != cookie


@pytest.mark.parametrize("headers", [
    # A link or a form (GET) on another site: a top-level navigation.
    {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"},
    # An <img src> on another site.
    {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"},
    # A fetch() from another site's script (its Origin).
    {"Origin": "http://evil.example"},
    {"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"},
], ids=["navigation", "img", "fetch", "same-site"])
def test_a_rest_run_for_another_sites_page_is_refused(uis: Any, origin: Origin,
                                                      headers: dict[str, str]) -> None:
    ui = uis()
    status, _, body = request(ui.port, run_query(origin.url), headers=headers)
    assert status == 403, body
    assert not origin.connected()
    served(rest(ui.port, run_query(origin.url)), origin)


def test_a_rebound_host_name_is_refused(uis: Any, origin: Origin) -> None:
    ui = uis()
    status, _, _ = request(ui.port, run_query(origin.url), host="attacker.example")
    assert status == 403
    status, _, _ = request(ui.port, "/run", method="POST", host="attacker.example",
                           body=urlencode({"uri": origin.url}).encode())
    assert status == 403
    assert not origin.connected()


# ---- caps and the allow-list ----------------------------------------------------------------


@pytest.mark.parametrize(("args", "query", "needle"), [
    (["--max-rate", "100"], {"qps": "101"}, "rate: 101 requests/s is more than the cap"),
    ([], {"qps": "-1"}, "as fast as possible is refused"),
    (["--max-connections", "8"], {"c": "9"}, "connections: 9 is more than the cap of 8"),
    (["--max-duration", "10"], {"t": "11s"}, "duration: 11s is more than the cap"),
    ([], {"t": "on"}, "a run until stopped is refused"),
    (["--max-duration", "10"], {"n": "1000", "qps": "50"}, "duration: 20s is more"),
    (["--allow-target", "10.0.0.0/8"], {}, "is not in the allow-list"),
    (["--allow-target", "192.0.2.1", "--allow-target", "example.invalid"], {},
     "is not in the allow-list"),
], ids=["rate", "max-speed", "connections", "duration", "until-stopped", "count",
        "allow-network", "allow-address-and-name"])
def test_caps_and_allow_list_refuse_before_sending(uis: Any, origin: Origin, args: list[str],
                                                   query: dict[str, str], needle: str) -> None:
    ui = uis(*args)
    refused(rest(ui.port, run_query(origin.url, **query)), origin, needle)
    # Through the form too.
    cookie, csrf = form_session(ui.port)
    status, _, page = request(ui.port, "/run", method="POST", headers={"Cookie": cookie},
                              body=urlencode({"csrf": csrf, "uri": origin.url,
                                              "rps": "5", "duration": "2s",
                                              "connections": "1"}).encode())
    if "allow" in " ".join(args):
        assert status == 403 and b"allow-list" in page
        assert not origin.connected()
    else:
        assert status == 303 and origin.connected(10)


def test_an_allowed_target_is_served(uis: Any, origin: Origin) -> None:
    ui = uis("--allow-target", "127.0.0.0/8", "--allow-target", "10.0.0.0/8")
    served(rest(ui.port, run_query(origin.url)), origin)


def test_a_name_resolving_outside_the_allowed_network_is_refused(uis: Any) -> None:
    listening = Origin()
    try:
        ui = uis("--allow-target", "10.0.0.0/8")
        # localhost resolves to loopback, outside 10/8.
        refused(rest(ui.port, run_query(f"http://localhost:{listening.port}/")), listening,
                "'localhost' is not in the allow-list")
    finally:
        listening.close()


@pytest.mark.parametrize(("allow", "target", "resolve"), [
    (["127.0.0.1"], "127.0.0.1", "127.0.0.2"),
    # A name on the list must not carry the run to an address that is not.
    (["backend.invalid"], "backend.invalid", "127.0.0.2"),
    # localhost is 127.0.0.1 (and maybe ::1): the name passes only if all of it does.
    (["127.0.0.1", "::1"], "localhost", "127.0.0.2"),
], ids=["address", "listed-name", "name-target"])
def test_resolve_outside_the_allow_list_is_refused(uis: Any, allow: list[str], target: str,
                                                   resolve: str) -> None:
    # Fortio's resolve dials the given address whatever the URL's host: with an allow-list
    # the address must pass the same check as the host. The origin listens where resolve
    # points (127.0.0.2), so a run let through would reach it.
    listening = Origin("127.0.0.2")
    try:
        ui = uis(*(arg for entry in allow for arg in ("--allow-target", entry)))
        url = f"http://{target}:{listening.port}/"
        refused(rest(ui.port, run_query(url, resolve=resolve)), listening,
                "resolve: '127.0.0.2' is not in the allow-list")
        # The JSON body spelling of the same run.
        body = json.dumps({"url": url, "resolve": resolve, "qps": "5", "t": "3s"}).encode()
        refused(rest(ui.port, "/fortio/rest/run?async=on", method="POST", body=body,
                     headers={"Content-Type": "application/json"}), listening,
                "resolve: '127.0.0.2' is not in the allow-list")
    finally:
        listening.close()


def test_resolve_with_several_addresses_is_refused(uis: Any) -> None:
    # Fortio's resolve is one host; a list would let one allowed entry vouch for the run
    # and spread it, so it is refused (400, Fortio's shape) before the allow-list is asked.
    listening = Origin("127.0.0.2")
    try:
        ui = uis("--allow-target", "127.0.0.0/8")
        status, document = rest(ui.port, run_query(f"http://127.0.0.1:{listening.port}/",
                                                   resolve="127.0.0.1,127.0.0.2"))
        assert status == 400 and document["error"] is True, document
        assert "one address or host name" in document["exception"]
        assert not listening.connected()
    finally:
        listening.close()


@pytest.mark.parametrize("allow", [["127.0.0.0/8"], ["backend.invalid", "127.0.0.2"]],
                         ids=["network", "name-and-address"])
def test_resolve_inside_the_allow_list_is_served(uis: Any, allow: list[str]) -> None:
    # The positive control: the same run, its resolve address allowed, reaches it.
    listening = Origin("127.0.0.2")
    try:
        ui = uis(*(arg for entry in allow for arg in ("--allow-target", entry)))
        host = "backend.invalid" if "backend.invalid" in allow else "127.0.0.1"
        served(rest(ui.port, run_query(f"http://{host}:{listening.port}/",
                                       resolve="127.0.0.2")), listening)
    finally:
        listening.close()


def test_runs_at_once_are_capped(uis: Any, origin: Origin) -> None:
    ui = uis("--max-runs", "1")
    with nhbench.TestServer() as server:
        status, first = rest(ui.port, run_query(server.url, t="20s"))
        assert status == 200, first
        refused(rest(ui.port, run_query(origin.url)), origin, "1 already running")
        rest(ui.port, f"/fortio/rest/stop?runid={first['RunID']}&wait=on")
    served(rest(ui.port, run_query(origin.url)), origin)


def test_fields_a_browser_may_not_set_are_refused_by_name(uis: Any, origin: Origin,
                                                          tmp_path: Path) -> None:
    ui = uis()
    cookie, csrf = form_session(ui.port)
    for field, value in (("output", str(tmp_path / "x.json")), ("payload_file", "/etc/passwd"),
                         ("prometheus_listen", "127.0.0.1:0")):
        status, _, page = request(ui.port, "/run", method="POST", headers={"Cookie": cookie},
                                  body=urlencode({"csrf": csrf, "uri": origin.url,
                                                  field: value}).encode())
        assert status == 400 and f"not a field of the form: {field}".encode() in page
    assert not origin.connected()
    assert not (tmp_path / "x.json").exists()


# ---- bodies and streams ---------------------------------------------------------------------


def test_bodies_are_bounded(uis: Any, origin: Origin) -> None:
    ui = uis()
    status, _, _ = request(ui.port, "/fortio/rest/run", method="POST",
                           body=json.dumps({"url": origin.url, "pad": "x" * (2 << 20)}).encode())
    assert status == 413
    with socket.create_connection(("127.0.0.1", ui.port), timeout=30) as sock:
        sock.sendall(f"POST /fortio/rest/run HTTP/1.1\r\nHost: 127.0.0.1:{ui.port}\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n".encode())
        assert sock.recv(100).startswith(b"HTTP/1.1 411")
    assert not origin.connected()


def test_a_slow_body_is_cut_off(uis: Any, origin: Origin) -> None:
    ui = uis()
    body = json.dumps({"url": origin.url, "t": "2s", "labels": "x" * 40}).encode()
    closed_after = None
    with socket.create_connection(("127.0.0.1", ui.port), timeout=60) as sock:
        sock.sendall(f"POST /fortio/rest/run HTTP/1.1\r\nHost: 127.0.0.1:{ui.port}\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode())
        started = time.monotonic()
        # A byte a second, for longer than the server's 10 s (TIMEOUT) for the whole body.
        for byte in body[:25]:
            try:
                sock.sendall(bytes([byte]))
                readable, _, _ = select.select([sock], [], [], 1.0)
                if readable and sock.recv(100) == b"":
                    closed_after = time.monotonic() - started
                    break
            except OSError:
                closed_after = time.monotonic() - started
                break
    assert closed_after is not None and closed_after < 20, closed_after
    assert not origin.connected()


def test_live_streams_are_capped(uis: Any) -> None:
    ui = uis()
    with nhbench.TestServer() as server:
        status, run = rest(ui.port, run_query(server.url, t="20s"))
        assert status == 200
        streams = []
        try:
            for _ in range(8):
                sock = socket.create_connection(("127.0.0.1", ui.port), timeout=10)
                sock.sendall(f"GET /runs/{run['RunID']}/events HTTP/1.1\r\n"
                             f"Host: 127.0.0.1:{ui.port}\r\n\r\n".encode())
                assert b"200 OK" in sock.recv(1000)
                streams.append(sock)
            deadline = time.monotonic() + 10
            status = 0
            while time.monotonic() < deadline:
                status = request(ui.port, f"/runs/{run['RunID']}/events", timeout=10)[0]
                if status == 503:
                    break
            assert status == 503
        finally:
            for sock in streams:
                sock.close()
            rest(ui.port, "/fortio/rest/stop?wait=on")
