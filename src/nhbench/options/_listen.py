"""Where the test server listens: HTTP listen addresses (TCP or unix sockets), and the
parsing shared by the admin and TCP/UDP echo addresses (``HOST:PORT`` is `parse_address`, in
`_values`, shared with everything else that names an address)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

from ._values import (
    ADDRESS_HELP,
    format_address,
    parse_address,
)

__all__ = ["DEFAULT_LISTEN", "MAX_UNIX_PATH", "Address", "Listen", "as_address_list",
           "format_listen", "parse_listen"]

# sockaddr_un.sun_path is 108 bytes on Linux, one of which is the terminating NUL.
MAX_UNIX_PATH = 107
DEFAULT_LISTEN: tuple[tuple[Literal["tcp", "unix"], str, int], ...] = (("tcp", "127.0.0.1", 0),)

Listen = tuple[Literal["tcp", "unix"], str, int]
Address = tuple[str, int]


def _unix_path(path: str, original: object) -> str:
    if not path:
        raise ValueError(f"a unix socket needs a path, as in unix:/tmp/nhbench.sock "
                         f"(got {original!r})")
    if "\0" in path:
        raise ValueError(f"a unix socket path must not contain NUL (got {original!r})")
    if len(os.fsencode(path)) > MAX_UNIX_PATH:
        raise ValueError(
            f"a unix socket path is at most {MAX_UNIX_PATH} bytes long (got {original!r})"
        )
    if path.startswith("@"):
        # Linux's abstract namespace: no file, no directory
        if len(path) < 2:
            raise ValueError(f"an abstract unix socket needs a name after @ (got {original!r})")
        return path
    # Absolute, so that what is printed and written to the address file can be used from
    # any directory.
    path = os.path.abspath(path)
    if len(os.fsencode(path)) > MAX_UNIX_PATH:
        raise ValueError(
            f"a unix socket path is at most {MAX_UNIX_PATH} bytes long once made absolute "
            f"(got {original!r})"
        )
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        raise ValueError(f"directory {directory!r} of the unix socket does not exist "
                         f"(got {original!r})")
    return path


def parse_listen(value: object) -> Listen:
    """One listen address: ``("tcp", numeric_host, port)`` or ``("unix", path, 0)``.

    Accepts what `parse_address` accepts, a unix socket path (``/tmp/x.sock``,
    ``./x.sock``, ``unix:/tmp/x.sock``, ``unix:x.sock``), and the tuples themselves.
    """
    if isinstance(value, (tuple, list)) and len(value) == 3:
        kind, where, port = value
        if kind == "unix":
            return ("unix", _unix_path(str(where), value), 0)
        if kind == "tcp":
            host, number = parse_address((where, port))
            return ("tcp", host, number)
        raise ValueError(f"kind must be 'tcp' or 'unix' (got {value!r})")
    if isinstance(value, Mapping) and "path" in value:
        return ("unix", _unix_path(str(value["path"]), value), 0)
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("unix:"):
            return ("unix", _unix_path(text[len("unix:"):], value), 0)
        if text.startswith(("/", "./", "../", "~", "@")):
            return ("unix", _unix_path(os.path.expanduser(text), value), 0)
        if "/" in text:
            raise ValueError(
                f"{ADDRESS_HELP}, or a unix socket path such as /tmp/x.sock or "
                f"unix:x.sock (got {value!r})"
            )
    try:
        host, port = parse_address(value)
    except ValueError as exc:
        message = str(exc)
        if message.startswith(ADDRESS_HELP):
            message = message.replace(
                ADDRESS_HELP, ADDRESS_HELP + ", or a unix socket path such as /tmp/x.sock", 1
            )
        raise ValueError(message) from None
    return ("tcp", host, port)


def format_listen(item: Listen) -> str:
    kind, where, port = item
    return f"unix:{where}" if kind == "unix" else format_address(where, port)


def as_address_list(value: Any) -> list[Any]:
    """A single address (string, 2-tuple host/port) is one item, not a list of them."""
    if value is None:
        return []
    if isinstance(value, (str, Mapping)):
        return [value]
    if (
        isinstance(value, (tuple, list))
        and len(value) in (2, 3)
        and isinstance(value[0], str)
        and isinstance(value[-1], int)
        and not isinstance(value[-1], bool)
    ):
        return [value]
    try:
        return list(value)
    except TypeError:
        return [value]
