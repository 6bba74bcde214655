"""Hostile cases for ``nhbench fortio server``'s UI: Fortio's server listens on every
interface and its UI starts runs with no guard; here the UI keeps the UI's rules (loopback
clients only unless a token guards it, no run from another site's page, the token when one is given),
and a refused run sends nothing to its target (the echo server's own counters say so)."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any

from test_compat_fortio_server import free_port, serving


def call(url: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        # A refusal: Fortio's JSON error from the REST routes, the UI's page from its
        # cross-site check.
        return error.code, error.read()


def server_argv(http: str, data_dir: Any) -> list[str]:
    return ["server", "-http-port", http, "-grpc-port", "disabled", "-tcp-port", "disabled",
            "-udp-port", "disabled", "-redirect-port", "disabled", "-data-dir", str(data_dir)]


def test_a_cross_site_page_starts_no_run(tmp_path: Any) -> None:
    http = free_port()
    target = f"http://127.0.0.1:{http}/"
    with serving(server_argv(f"127.0.0.1:{http}", tmp_path)) as server:
        run = f"{server.ui_url()}rest/run?url={target}&qps=0&n=5"
        for headers in ({"Origin": "http://evil.example"},
                        {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}):
            status, body = call(run, headers)
            assert status == 403 and b"another site" in body, body
    assert server.stats()["requests"] == 0


def test_every_interface_asks_clients_off_loopback_for_a_token(tmp_path: Any) -> None:
    """The UI shares the echo port on every interface: a token is generated for the clients
    that are not on loopback (their refusal: tests/hostile/test_ui_forward_attacks.py)."""
    http = free_port()
    with serving(server_argv(f"0.0.0.0:{http}", tmp_path)) as server:
        assert server.ui_url() == f"http://localhost:{http}/fortio/"
        assert any("token (required from clients not on loopback" in line
                   for line in server.lines), server.stderr


def test_the_token_guards_the_ui_that_leaves_loopback(tmp_path: Any) -> None:
    http = free_port()
    env = dict(os.environ, NHBENCH_UI_TOKEN="s3cret-token")
    target = f"http://127.0.0.1:{http}/"
    with serving(server_argv(f"0.0.0.0:{http}", tmp_path), env=env) as server:
        ui = server.ui_url().replace("0.0.0.0", "127.0.0.1")
        run = f"{ui}rest/run?url={target}&qps=0&n=3"
        for headers in ({}, {"X-Nhbench-Token": "wrong"}):
            status, _ = call(run, headers)
            assert status == 403
        # The token itself never reaches the log.
        assert "s3cret-token" not in server.stderr
        status, document = call(run, {"X-Nhbench-Token": "s3cret-token"})
        assert status == 200 and document["DurationHistogram"]["Count"] == 3, document
    assert server.stats()["requests"] == 3
