"""Hostile result files, written by hand: HdrHistogram V2 blobs whose header may lie, and an
nhbench result document with extra statistics carrying them. The browser's and the
loader's hostile suites both build their files from these."""

from __future__ import annotations

import base64
import copy
import struct
import zlib
from typing import Any

__all__ = ["ENCODING", "COMPRESSION", "blob", "global_entry", "with_blobs", "zigzag_leb"]

ENCODING = 0x1C849313
COMPRESSION = 0x1C849314


def zigzag_leb(value: int) -> bytes:
    """One count as the V2 payload writes it: zigzag, then LEB128 (at most 9 bytes)."""
    value = ((value << 1) ^ (value >> 63)) & ((1 << 64) - 1)
    out = bytearray()
    for _ in range(9):
        if value < 0x80:
            out.append(value)
            break
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    return bytes(out)


def blob(counts: bytes, *, sigfig: int = 3, lowest: int = 1, highest: int = 60_000_000_000,
         ratio: float = 1.0, payload_len: int | None = None) -> str:
    """A compressed V2 blob (base64) with `counts` as its payload; the header says what the
    keywords say, true or not."""
    head = struct.pack(">IIIIQQd", ENCODING, len(counts) if payload_len is None else
                       payload_len, 0, sigfig, lowest, highest, ratio)
    compressed = zlib.compress(head + counts, 9)
    return base64.b64encode(struct.pack(">II", COMPRESSION, len(compressed))
                            + compressed).decode()


def global_entry(document: dict[str, Any]) -> dict[str, Any]:
    """The ``global`` result of an nhbench/Nighthawk document."""
    return next(entry for entry in document["results"] if entry["name"] == "global")


def with_blobs(base: dict[str, Any], blobs: list[str]) -> dict[str, Any]:
    """A copy of `base` whose global result has one more statistic per blob
    (``hostile.stat_<i>``), each a copy of its first statistic with that histogram."""
    document = copy.deepcopy(base)
    entry = global_entry(document)
    template = entry["statistics"][0]
    for i, encoded in enumerate(blobs):
        entry["statistics"].append(dict(copy.deepcopy(template), id=f"hostile.stat_{i}",
                                        hdr_histogram=encoded))
    return document
