"""``nhbench fortio nc`` and ``nhbench fortio grpcping`` command lines from the fields of
`NcValues` / `GrpcPingValues`, so the tools' tests drive them through the front-end as a user
does (Fortio's flags, real stdin, stdout, stderr and exit status)."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["fortio_tool_argv"]

# Each field as the Fortio flag that sets it (None: a switch).
_FLAGS: dict[str, str] = {
    "count": "-n", "payload": "-payload", "unix_socket": "-unix-socket", "cacert": "-cacert", "cert": "-cert",
    "key": "-key",
    "health_service": "-healthservice", "resolve_ip_type": "-resolve-ip-type",
}
_SWITCHES: dict[str, str] = {
    "health": "-health", "insecure": "-k", "dont_stop_on_eof": "-nc-dont-stop-on-eof",
}


def fortio_tool_argv(command: str, target: str, **values: Any) -> list[str]:
    """``python -m nhbench fortio COMMAND FLAGS TARGET`` for the given field values."""
    flags: list[str] = []
    for name, value in values.items():
        if name in _SWITCHES:
            if value:
                flags.append(_SWITCHES[name])
        elif name == "ping_delay_ns":
            flags += ["-grpc-ping-delay", f"{int(value)}ns"]
        elif name == "headers":
            for key, text in value:
                flags += ["-H", f"{key}: {text}"]
        else:
            flags += [_FLAGS[name], str(value)]
    return [sys.executable, "-m", "nhbench", "fortio", command, *flags, target]
