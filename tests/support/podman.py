"""Debian's podman on the project's machines, with this host's two quirks worked around in
a mount namespace of podman's own (tests/test_loadgen_container.py, tests/test_image.py).

The host mounts cgroup v1 controllers beside a cgroup v2 tree: crun refuses such "hybrid"
hosts, so the v2 mount is hidden from podman (``umount`` inside ``unshare -m``) and podman
keeps its cgroups with cgroupfs. Its sandbox refuses to raise RLIMIT_NPROC, so a container's
limits are set low (RUN_LIMITS). Only the standard library: tests/test_image.py runs in a
venv without nhbench (`nox -s image`).
"""

from __future__ import annotations

import shlex
import subprocess

# podman itself, in a mount namespace without the cgroup v2 mount of a hybrid host.
PODMAN = ("unshare -m sh -c 'umount /sys/fs/cgroup/unified 2>/dev/null; "
          "exec podman --cgroup-manager=cgroupfs \"$@\"' podman")
# `podman run` options every container of the tests needs here.
RUN_LIMITS = ("--cgroups=disabled", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024")


def podman(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run podman with ARGS; the result whatever its exit status."""
    return subprocess.run(f"{PODMAN} {shlex.join(args)}", shell=True, capture_output=True,
                          text=True, timeout=timeout, check=False)
