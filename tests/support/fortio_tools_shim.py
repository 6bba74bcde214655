"""A test-only command line for compat/_fortio_nc.py and compat/_fortio_grpcping.py, so tests
drive them as processes (real stdin, stdout, stderr and exit status) before the Fortio
front-end wires them to its flags.

    python tests/support/fortio_tools_shim.py nc '{"dont_stop_on_eof": true}' host:port
    python tests/support/fortio_tools_shim.py grpcping '{"count": 3}' host:port

The JSON object holds NcValues / GrpcPingValues fields (``payload`` as text).
"""

from __future__ import annotations

import json
import sys

from nhbench.compat._fortio_grpcping import GrpcPingValues, grpcping_main
from nhbench.compat._fortio_nc import NcValues, nc_main


def main(argv: list[str]) -> int:
    command, fields, target = argv
    values = json.loads(fields)
    if command == "nc":
        return nc_main(NcValues(**values), target)
    if "payload" in values:
        values["payload"] = values["payload"].encode("utf-8")
    if "headers" in values:
        values["headers"] = [tuple(pair) for pair in values["headers"]]
    return grpcping_main(GrpcPingValues(**values), target)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
