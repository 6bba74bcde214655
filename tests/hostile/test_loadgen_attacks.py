"""A lying load generator against ``--loadgen``: what comes back over SSH is whatever the
remote end writes, and the controller merges it into the report.

The remote "agent" here is a real process reached through the real OpenSSH server of the
`sshd` fixture, started by ``--loadgen-python``; it runs a real load (the Ray load actor's
own `run`) and then lies in one way each: counters its workers do not add up to, a
histogram holding more values than its count, negative or fractional counts, a NaN sum, a
line that is not JSON, an answer to a request never made, an answer with no core result, a
line too long to be an answer, a pre-flight check answered with something else than a
refusal or nothing. Every one must fail the run with exit status 1 and one line
naming the load generator: never a traceback, never a merged report.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from support.cli import PACKAGE_PARENT, nhbench_cli

import nhbench

pytestmark = [pytest.mark.hostile, pytest.mark.serial, pytest.mark.timeout(300)]

LIAR = r'''
import json, sys
from nhbench.distributed._agent import _Agent
mode = sys.argv[1]
agent = _Agent()
def send(obj, raw=None):
    sys.stdout.write((raw if raw is not None else json.dumps(obj)) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    req = json.loads(line)
    op, rid = req["op"], req["id"]
    if op == "info":
        send({"id": rid, "ok": agent.info()})
    elif op == "clock":
        send({"id": rid, "ok": agent.clock()})
    elif op == "check":
        # Its check says its share fits (what the real agent's check would say here), or,
        # in one mode, something else than a refusal or nothing.
        send({"id": rid, "ok": 42 if mode == "check_not_refusal"
              else agent.check(req["args"]["options"])})
    elif op in ("stop", "progress"):
        send({"id": rid, "ok": None})
    elif op == "run":
        answer = agent.run(req["args"]["options"])
        core = answer["core"]
        if mode == "counter_mismatch":
            core["workers"][0]["counters"]["upstream_rq_total"] += 1000
        elif mode == "histogram_mismatch":
            hist = core["global"]["histograms"]["benchmark_http_client.request_to_response"]
            hist["counts"] = [list(p) for p in hist["counts"]] + [[5, 1000]]
        elif mode == "negative":
            for part in [core["global"], *core["workers"]]:
                part["counters"]["upstream_rq_total"] = -5
        elif mode == "fraction":
            core["global"]["counters"]["upstream_rq_total"] = 0.5
        elif mode == "nan":
            core["global"]["histograms"]["benchmark_http_client.request_to_response"]["sum"] = float("nan")
        elif mode == "no_core":
            answer = {"armed_ns": 1}
        elif mode == "not_json":
            send(None, raw="<html>definitely not json")
            continue
        elif mode == "unknown_id":
            send({"id": rid + 1000, "ok": answer})
            continue
        elif mode == "long_line":
            send(None, raw='{"id": %d, "ok": "%s"}' % (rid, "x" * (65 * 1024 * 1024)))
            continue
        elif mode == "workers_not_list":
            core["workers"] = {"a": 1}
        send({"id": rid, "ok": answer})
'''

MODES = ["counter_mismatch", "histogram_mismatch", "negative", "fraction", "nan", "no_core",
         "not_json", "unknown_id", "long_line", "workers_not_list", "check_not_refusal"]


@pytest.fixture(scope="module")
def server() -> Any:
    with nhbench.TestServer(subprocess=True, admin="127.0.0.1:0") as test_server:
        yield test_server


@pytest.mark.parametrize("mode", MODES)
def test_a_lying_load_generator_fails_the_run_naming_it(sshd: Any, server: Any, mode: str,
                                                        tmp_path: Path) -> None:
    liar = tmp_path / "liar.py"
    liar.write_text(LIAR)
    # The liar ignores the "-m nhbench.distributed._agent" the controller appends.
    python = shlex.join(["env", f"PYTHONPATH={PACKAGE_PARENT}", sys.executable, str(liar),
                         mode])
    proc = nhbench_cli("run", server.url, "--loadgen", f"ssh://{sshd.address}",
                       "--loadgen-ssh-key", str(sshd.user_key),
                       "--loadgen-known-hosts", str(sshd.known_hosts),
                       "--loadgen-python", python, "--rps", "20", "--duration", "0.5s",
                       env={"SSH_AUTH_SOCK": ""})
    assert proc.returncode == 1, (proc.stdout[-500:], proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr[-2000:]
    assert lines[0].startswith("nhbench: error: --loadgen: host_0 (ssh://"), lines[0]
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
