"""Fuzz target for result files: what `nhbench transform`, `nhbench report` and
`nhbench.load_result` do with a file from anyone (docs/reliability.md, "Result files").

Run by atheris (libFuzzer for Python, coverage of nhbench's modules) from `nox -s fuzz`
(`nox -s fuzz_python`), or by hand::

    PYTHONPATH=src python tests/fuzz/fuzz_results.py -max_total_time=60 build/fuzz/corpus/fuzz_results

Each input is one of:

0. raw bytes given to the loader as a file's content;
1. one of the seeds (nhbench's JSON in both its shapes, Nighthawk's, Fortio's; from
   tests/data) with up to eight structural mutations: a value anywhere replaced by a number
   of any size (NaN and infinities included), a string (lone surrogates and terminal
   escapes included), null, a list or an object; a key removed; a list element repeated;
   an encoded histogram replaced by the blob of (2);
2. an HdrHistogram V2 blob built from fuzzed header fields (cookie, payload length, offset,
   digits, lowest, highest, ratio) and fuzzed counts, compressed, given to the decoder.

What must hold: the loader raises `ResultFileError` or returns a `Result`, nothing else
(Nighthawk's own document also goes through every document format as `nhbench transform`
sends it, where only a one-line ValueError may come out); a
`Result` renders as human text (with no character a terminal acts on but newlines), as
Fortio's JSON and as nhbench's JSON without raising; the decoder raises only
`HistogramDecodeError`. Anything else (a traceback) is a finding.
"""

from __future__ import annotations

import base64
import json
import re
import struct
import sys
import zlib
from pathlib import Path
from typing import Any

import atheris

with atheris.instrument_imports(include=["nhbench"]):
    from nhbench._exceptions import ResultFileError
    from nhbench._histogram import HistogramDecodeError, decode
    from nhbench._load import read_result_text, result_from_document
    from nhbench.cli._transform import transform_text
    from nhbench.outputs import DOCUMENT_FORMATS, nighthawk_output

DATA = Path(__file__).resolve().parents[1] / "data"


def _seeds() -> list[str]:
    before = (DATA / "nhbench-json-earlier-format.json").read_text()
    texts = [
        before,
        (DATA / "fortio" / "fortio-1.66.5-load.json").read_text(),
        (DATA / "nighthawk" / "output_formatter.json.gold").read_text(),
    ]
    kind, data = read_result_text(before, "seed")
    # nhbench's JSON of today: Nighthawk's Output with the nhbench extension.
    texts.append(json.dumps(nighthawk_output(result_from_document(kind, data, "seed"))))
    return texts


SEEDS = _seeds()
# What a terminal acts on (nhbench._format.printable escapes these in the human output).
_UNSAFE = re.compile("[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f\\u202a-\\u202e\\u2066-\\u2069"
                     "\\ud800-\\udfff]")
_STRINGS = ("\ud800", "\x1b]0;t\x07\x1b[2J", "a\r\nb", "\u202e", "9" * 5000, "1e400", "NaN",
            "-1", "0s", "1e300s", "global", "HTTP", "-Infinity", "", "\x00")


def _blob(fdp: atheris.FuzzedDataProvider) -> str:
    cookie = fdp.PickValueInList([0x1C849313, 0x1C849303, fdp.ConsumeIntInRange(0, 2**32 - 1)])
    counts = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 512))
    payload_len = fdp.PickValueInList([len(counts), fdp.ConsumeIntInRange(0, 2**32 - 1)])
    sigfig = fdp.ConsumeIntInRange(0, 7)
    lowest = fdp.PickValueInList([1, 0, 1000, fdp.ConsumeIntInRange(0, 2**64 - 1)])
    highest = fdp.PickValueInList([60_000_000_000, 2, 2**62, fdp.ConsumeIntInRange(0, 2**64 - 1)])
    ratio = fdp.PickValueInList([1.0, fdp.ConsumeRegularFloat(), float("nan")])
    head = struct.pack(">IIIIQQd", cookie, payload_len, fdp.PickValueInList([0, 1]), sigfig,
                       lowest, highest, ratio)
    compressed = zlib.compress(head + counts)
    if fdp.ConsumeBool():
        compressed = compressed[:fdp.ConsumeIntInRange(0, len(compressed))]
    outer = fdp.PickValueInList([0x1C849314, 0x1C849304, fdp.ConsumeIntInRange(0, 2**32 - 1)])
    length = fdp.PickValueInList([len(compressed), fdp.ConsumeIntInRange(0, 2**32 - 1)])
    return base64.b64encode(struct.pack(">II", outer, length) + compressed).decode()


def _value(fdp: atheris.FuzzedDataProvider) -> Any:
    kind = fdp.ConsumeIntInRange(0, 8)
    if kind == 0:
        return fdp.ConsumeInt(fdp.ConsumeIntInRange(1, 12))  # up to 2^95, either sign
    if kind == 1:
        return fdp.ConsumeFloat()  # NaN and infinities included
    if kind == 2:
        return fdp.PickValueInList(list(_STRINGS))
    if kind == 3:
        return fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 24))
    if kind == 4:
        return None
    if kind == 5:
        return fdp.ConsumeBool()
    if kind == 6:
        return []
    if kind == 7:
        return {}
    return fdp.ConsumeIntInRange(-3, 3)


def _containers(node: Any, out: list[Any], depth: int = 0) -> list[Any]:
    if depth > 12:
        return out
    if isinstance(node, dict):
        out.append(node)
        for item in node.values():
            _containers(item, out, depth + 1)
    elif isinstance(node, list):
        out.append(node)
        for item in node:
            _containers(item, out, depth + 1)
    return out


def _mutate(fdp: atheris.FuzzedDataProvider, doc: Any) -> None:
    for _ in range(fdp.ConsumeIntInRange(1, 8)):
        containers = _containers(doc, [])
        target = containers[fdp.ConsumeIntInRange(0, len(containers) - 1)]
        keys = list(target.keys()) if isinstance(target, dict) else list(range(len(target)))
        if not keys:
            continue
        key = keys[fdp.ConsumeIntInRange(0, len(keys) - 1)]
        action = fdp.ConsumeIntInRange(0, 3)
        if action == 0 and key == "hdr_histogram":
            target[key] = _blob(fdp)
        elif action == 2 and isinstance(target, dict):
            del target[key]
        elif action >= 2 and isinstance(target, list):
            target.extend([target[key]] * fdp.ConsumeIntInRange(1, 50))
        else:
            target[key] = _value(fdp)


def _check_text(raw: bytes | str) -> None:
    try:
        kind, data = read_result_text(raw, "fuzz.json")
    except ResultFileError as exc:
        assert "\n" not in str(exc), repr(str(exc))
        return
    if kind == "nighthawk":
        # What `nhbench transform` does with Nighthawk's own document: each format straight
        # from it, where ResultFileError or ValueError is the command's one-line refusal.
        for output_format in DOCUMENT_FORMATS:
            try:
                transform_text(raw if isinstance(raw, bytes) else raw.encode(), "fuzz.json",
                               output_format)
            except (ResultFileError, ValueError) as exc:
                assert "\n" not in str(exc), repr(str(exc))
    try:
        result = result_from_document(kind, data, "fuzz.json")
    except ResultFileError as exc:
        assert "\n" not in str(exc), repr(str(exc))
        return
    human = result.render("human")
    assert not _UNSAFE.search(human), repr(_UNSAFE.search(human))
    json.loads(result.render("fortio"))
    json.loads(result.render("json"))


def TestOneInput(data: bytes) -> None:  # noqa: N802 - atheris's name
    fdp = atheris.FuzzedDataProvider(data)
    mode = fdp.ConsumeIntInRange(0, 2)
    if mode == 0:
        _check_text(fdp.ConsumeBytes(fdp.remaining_bytes()))
    elif mode == 1:
        doc = json.loads(SEEDS[fdp.ConsumeIntInRange(0, len(SEEDS) - 1)])
        _mutate(fdp, doc)
        _check_text(json.dumps(doc, allow_nan=True))
    else:
        try:
            decode(_blob(fdp))
        except HistogramDecodeError:
            pass


def _prime(directory: Path) -> None:
    """Seed an empty corpus directory: each seed file as raw bytes (mode 0) and as the
    document to mutate (mode 1). The first byte picks the mode (ConsumeIntInRange reads
    from the front)."""
    for i, text in enumerate(SEEDS):
        (directory / f"seed-raw-{i}").write_bytes(b"\x00" + text.encode())
        (directory / f"seed-doc-{i}").write_bytes(bytes([1, i]) + bytes(range(64)))


def main() -> None:
    for arg in sys.argv[1:]:
        path = Path(arg)
        if not arg.startswith("-") and path.is_dir() and not any(path.iterdir()):
            _prime(path)
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
