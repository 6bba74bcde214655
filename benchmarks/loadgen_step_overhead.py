"""What a ``--loadgen`` campaign step costs beyond its own duration: a sweep of short steps
from two SSH load generators, both this machine reached through a loopback OpenSSH server.

    python benchmarks/loadgen_step_overhead.py                 # 10 steps of 1 s
    python benchmarks/loadgen_step_overhead.py --steps 5 --duration 2

The sshd is the tests' (tests/support/sshd_fixture.py: its key, configuration and start
helpers; on 127.0.0.1, a generated host and user key, as the user running this); the target
is the test server in a subprocess. Each load generator runs the agent with this interpreter
and the imported nhbench package (``--loadgen-python "env PYTHONPATH=... python"``), so
``PYTHONPATH=OTHER/src`` measures another tree's code. The sweep runs in this process
(``nhbench.run_sweep`` with ``loadgen=``, no captures, facts or reports, so that what is
measured is the step itself). Per step it prints the step's wall time (the record's
``ended_at - started_at``: reaching the agents, the scheduled start's lead, the run, the
merge) minus its duration, then the first step apart (it pays the SSH logins and the agents'
start when the campaign keeps them) and the median and maximum of the others, the campaign's
wall time per step minus the duration, and how many agents started (the wrapper given as
``--loadgen-python`` counts them). The load average is printed before and after: the figures
move with what else runs on the machine. docs/distributed.md ("Campaigns with --loadgen")
and docs/benchmarks.md have the figures.
"""

from __future__ import annotations

import getpass
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import print_step_overheads, step_overhead_args, timed_sweep

import nhbench

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support.sshd_fixture import SSHD, _config, _free_port, _keygen, _wait_for_banner  # noqa: E402


def _start_sshd(directory: Path) -> tuple[subprocess.Popen[bytes], int]:
    _keygen(directory / "ssh_host_ed25519_key", "nhbench-bench-host")
    _keygen(directory / "user_key", "nhbench-bench-user")
    shutil.copyfile(directory / "user_key.pub", directory / "authorized_keys")
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    port = _free_port()
    config = directory / "sshd_config"
    text = _config(directory, port, penalties=True)
    config.write_text(text)
    check = subprocess.run([SSHD, "-t", "-f", str(config)], capture_output=True, text=True,
                           check=False)
    if check.returncode != 0 and "PerSourcePenalties" in check.stderr:
        config.write_text(_config(directory, port, penalties=False))
    with (directory / "sshd.log").open("ab") as log:
        process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config), "-p", str(port)],
                                   stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    if not _wait_for_banner(port, process, time.monotonic() + 30):
        process.kill()
        raise SystemExit(f"sshd did not start: {(directory / 'sshd.log').read_text()}")
    host_key = " ".join((directory / "ssh_host_ed25519_key.pub").read_text().split()[:2])
    (directory / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key}\n")
    return process, port


def main(argv: list[str] | None = None) -> int:
    args = step_overhead_args(argv, __doc__.splitlines()[0])
    if not os.access(SSHD, os.X_OK):
        raise SystemExit(f"{SSHD} is not installed (package openssh-server)")
    os.environ.pop("SSH_AUTH_SOCK", None)  # the user key only, as the tests
    root = Path(tempfile.mkdtemp(prefix="nhblg-", dir="/tmp"))
    sshd = None
    try:
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        sshd, port = _start_sshd(root)
        starts = root / "agents"
        wrapper = root / "wrap.sh"
        wrapper.write_text(f'echo $$ >> {shlex.quote(str(starts))}\nexec "$@"\n')
        package = str(Path(nhbench.__file__).resolve().parent.parent)
        python = shlex.join(["sh", str(wrapper), "env", f"PYTHONPATH={package}",
                             sys.executable])
        placement = f"ssh://{getpass.getuser()}@127.0.0.1:{port}"
        with nhbench.TestServer(subprocess=True) as server:
            steps, wall = timed_sweep(server.url, root / "campaign", args,
                                      loadgen=[placement, placement],
                                      loadgen_ssh_key=str(root / "user_key"),
                                      loadgen_known_hosts=str(root / "known_hosts"),
                                      loadgen_python=python)
        if not print_step_overheads(steps, args.steps, args.duration, wall,
                                    "connects, starts the agents"):
            return 1
        agents = len(starts.read_text().split()) if starts.exists() else 0
        print(f"agents started: {agents} (two load generators, {args.steps} steps)")
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return 0
    finally:
        if sshd is not None:
            sshd.terminate()
            sshd.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
