"""The result browser's quick read of a file for its list row (`Catalogue.summarise`).

The list reads only what a row shows (`nhbench.browse._scan.summary_document`); these
tests hold it to the full load: for real runs (one and two workers, intervals, a run whose
every request failed, a staged run), the Nighthawk and Fortio files of tests/data and
variants of them, the row from the quick read equals the row from `Catalogue.load`, and a
file the quick read refuses is refused with the full load's own message. A file whose fault
lies where the row does not look (a worker's histogram) is listed from its summary, refused
with the reason when it is opened, and listed as unreadable from then on.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import random
import socket
from pathlib import Path
from typing import Any

import pytest

import nhbench
from nhbench._exceptions import ResultFileError
from nhbench._load import check_result_document, parse_result_text
from nhbench.browse import Catalogue
from nhbench.browse._quick import quick_fields
from nhbench.browse._scan import Entry, summary_document

DATA = Path(__file__).parent / "data"
CPU = min(os.sched_getaffinity(0))


@pytest.fixture(scope="module")
def runs() -> dict[str, str]:
    """Real results as the JSON `nhbench run --output-format json` writes."""
    with nhbench.TestServer(cpus=[max(os.sched_getaffinity(0))]) as server:
        made = {
            "one.json": nhbench.run(server.url, rps=200, duration="0.5s", connections=2,
                                    cpus=[CPU], label=["one"]),
            "two.json": nhbench.run(server.url, rps=100, duration="1s", connections=2,
                                    concurrency=2, stats_interval="250ms", label=["two"]),
            "staged.json": nhbench.run(server.url, stage=["0.3s:100", "0.3s:200"],
                                       connections=2, cpus=[CPU], label=["staged"]),
            "max.json": nhbench.run(server.url, rps=0, duration="0.3s", connections=1,
                                    cpus=[CPU]),
        }
    with socket.socket() as sock:  # a port that was free a moment ago, now closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    made["refused.json"] = nhbench.run(f"http://127.0.0.1:{port}/", rps=50, duration="0.2s",
                                       connections=1, cpus=[CPU], label=["refused"])
    return {name: result.render("json") for name, result in made.items()}


def _global(document: dict[str, Any]) -> dict[str, Any]:
    return next(e for e in document["results"] if e.get("name") == "global")


def _variants(name: str, text: str) -> dict[str, str]:
    """`text` and documents made from it: other labels, URL, rate, time, a fired failure
    predicate, no nhbench extension (a Nighthawk file), no headline histogram counts..."""
    base = json.loads(text)
    out = {name: text}

    def variant(suffix: str, change: Any) -> None:
        document = copy.deepcopy(base)
        change(document)
        out[f"{name[:-5]}-{suffix}.json"] = json.dumps(document)

    def relabel(d: dict[str, Any]) -> None:
        d["options"]["labels"] = ["a <b>", "c\u00e9"]
        d["options"]["uri"] = "https://example.test:8443/x?y=1"
        d["options"]["requests_per_second"] = 777
        d["timestamp"] = "2020-02-29T12:00:00Z"

    def bare(d: dict[str, Any]) -> None:
        for entry in d["results"]:
            entry["user_defined_outputs"] = []

    def no_scheduled(d: dict[str, Any]) -> None:
        for entry in d["results"]:
            entry["statistics"] = [s for s in entry["statistics"]
                                   if s["id"] != "benchmark_http_client.scheduled_to_response"]

    def duplicated_labels(d: dict[str, Any]) -> None:
        d["options"]["labels"] = ["first"]

    variant("relabelled", relabel)
    variant("nighthawk", bare)
    variant("uncorrected", no_scheduled)
    variant("labels", duplicated_labels)
    # A key given twice (Nighthawk's reader merges repeated lists): the same text twice.
    out[f"{name[:-5]}-repeated.json"] = text.replace(
        '"labels":', '"labels": ["again"], "labels":', 1)
    return out


def _files(root: Path, runs: dict[str, str]) -> list[str]:
    written = []
    texts: dict[str, str] = {}
    for name, text in runs.items():
        texts.update(_variants(name, text))
    texts["nighthawk-gold.json"] = (DATA / "nighthawk" / "output_formatter.medium.proto.gold"
                                    ).read_text()
    texts["earlier.json"] = (DATA / "nhbench-json-earlier-format.json").read_text()
    texts["fortio.json"] = (DATA / "fortio" / "fortio-1.66.5-load.json").read_text()
    for name, text in texts.items():
        (root / name).write_text(text)
        written.append(name)
    return written


def _full(catalogue: Catalogue, relative: str) -> Entry | str:
    try:
        return Entry.from_result(relative, catalogue.load(relative))
    except ResultFileError as exc:
        return str(exc)


def _quick(catalogue: Catalogue, relative: str) -> Entry | str:
    try:
        return catalogue.summarise(relative)
    except ResultFileError as exc:
        return str(exc)


def test_the_quick_row_is_the_full_load_s_row(tmp_path: Path, runs: dict[str, str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = tmp_path / "results"
    root.mkdir()
    names = _files(root, runs)
    catalogue = Catalogue(root)
    kinds = set()
    for name in names:
        quick, full = _quick(catalogue, name), _full(catalogue, name)
        assert quick == full, name
        assert isinstance(quick, Entry), (name, quick)
        kinds.add((quick.p50 is None, quick.ok))
    assert len(names) == 5 * 6 + 3
    # Rows with latencies that passed and a failed run without any were among them.
    assert {(False, True), (True, False)} <= kinds
    listing = catalogue.scan()
    assert sorted(e.path for e in listing.entries) == sorted(names)
    assert all(e.kind == "result" for e in listing.entries)


def test_a_file_the_row_cannot_trust_is_refused_as_the_full_load_refuses_it(
        tmp_path: Path, runs: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    base = json.loads(runs["two.json"])
    bad: dict[str, Any] = {"not-json.json": "{", "a-list.json": "[1, 2]",
                           "not-utf8.json": b"\xff\xfe{}"}

    def document(change: Any) -> str:
        d = copy.deepcopy(base)
        change(d)
        return json.dumps(d)

    def headline_histogram(d: dict[str, Any]) -> None:
        extension = _global(d)["user_defined_outputs"][0]["typed_output"]["value"]
        extension["statistics"]["benchmark_http_client.scheduled_to_response"][
            "hdr_histogram"] = "HISTFAAAACB4nJNpmSzMwMDAxQABzFCaEUzOmNZgD2ELMAEAMOAC8w=="[:20]

    def negative_count(d: dict[str, Any]) -> None:
        _global(d)["statistics"][0]["count"] = "-5"

    def bad_uri(d: dict[str, Any]) -> None:
        d["options"]["uri"] = "ftp://example.test/"

    def no_global(d: dict[str, Any]) -> None:
        d["results"] = [e for e in d["results"] if e["name"] != "global"]

    def too_many_entries(d: dict[str, Any]) -> None:
        d["results"] = d["results"][:1] * 5000 + d["results"][-1:]

    def huge_label(d: dict[str, Any]) -> None:
        d["options"]["labels"] = [float("nan")]

    # Statistics and counters of shapes the summary's cut would have dropped: the full
    # load refuses them naming where they are, and so must the list.
    def worker(d: dict[str, Any]) -> dict[str, Any]:
        return next(e for e in d["results"] if e["name"] == "worker_0")

    def statistic_number(d: dict[str, Any]) -> None:
        _global(d)["statistics"].insert(3, 5)

    def worker_statistic_text(d: dict[str, Any]) -> None:
        worker(d)["statistics"].append("latency")

    def statistic_id_number(d: dict[str, Any]) -> None:
        worker(d)["statistics"].insert(0, {"id": 7})

    def worker_counter_list(d: dict[str, Any]) -> None:
        worker(d)["counters"].append(["upstream_cx_total", "1"])

    for name, change in (("statistic-number.json", statistic_number),
                         ("worker-statistic-text.json", worker_statistic_text),
                         ("statistic-id-number.json", statistic_id_number),
                         ("worker-counter-list.json", worker_counter_list),
                         ("headline-histogram.json", headline_histogram),
                         ("negative-count.json", negative_count), ("bad-uri.json", bad_uri),
                         ("no-global.json", no_global), ("entries.json", too_many_entries),
                         ("nan-label.json", huge_label)):
        bad[name] = document(change)
    for name, content in bad.items():
        path = tmp_path / name
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    (tmp_path / "good.json").write_text(runs["one.json"])
    catalogue = Catalogue(tmp_path)
    for name in bad:
        quick, full = _quick(catalogue, name), _full(catalogue, name)
        assert isinstance(full, str) and quick == full, name
        assert name in quick
    listing = catalogue.scan()
    by_path = {e.path: e for e in listing.entries}
    assert sorted(by_path) == sorted([*bad, "good.json"])
    assert by_path["good.json"].kind == "result"
    for name in bad:
        assert by_path[name].kind == "error" and by_path[name].error == _full(catalogue, name)


def test_a_fault_the_row_does_not_read_is_named_when_opened_and_listed_after(
        tmp_path: Path, runs: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    d = json.loads(runs["two.json"])
    worker = next(e for e in d["results"] if e["name"] == "worker_0")
    extension = worker["user_defined_outputs"][0]["typed_output"]["value"]
    stat_id = "benchmark_http_client.request_to_response"
    extension["statistics"][stat_id]["hdr_histogram"] = "HISTFAAAAAA="
    (tmp_path / "worker-histogram.json").write_text(json.dumps(d))
    (tmp_path / "good.json").write_text(runs["one.json"])
    catalogue = Catalogue(tmp_path)
    first = {e.path: e for e in catalogue.scan().entries}
    assert first["worker-histogram.json"].kind == "result"  # the row's own figures are sound
    with pytest.raises(ResultFileError) as refused:
        catalogue.load("worker-histogram.json")
    assert f"worker_0 {stat_id}: hdr_histogram does not decode" in str(refused.value)
    after = {e.path: e for e in catalogue.scan().entries}
    assert after["worker-histogram.json"].kind == "error"
    assert after["worker-histogram.json"].error == str(refused.value)
    assert after["good.json"].kind == "result"
    # The next browser process reads the index, with the file still unreadable.
    again = {e.path: e for e in Catalogue(tmp_path).scan().entries}
    assert again["worker-histogram.json"] == after["worker-histogram.json"]


# ---- the quick reader (`nhbench.browse._quick`) ------------------------------------------

def _quick_row(catalogue: Catalogue, relative: str) -> Entry | None:
    """The row `quick_fields` makes of the file, or None when it hands the file over (or
    the document's own checks, which come first, refuse it)."""
    name = str(catalogue.root / relative)
    try:
        kind, data = parse_result_text(catalogue.read(relative), name)
        summary = summary_document(data)
        check_result_document(kind, summary, name, sizes_of=data)
    except ResultFileError:
        return None
    fields = quick_fields(data) if kind == "nhbench" else None
    return None if fields is None else Entry.from_fields(relative, fields)


def test_the_quick_reader_s_row_is_the_full_load_s_row(tmp_path: Path, runs: dict[str, str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    names = _files(tmp_path, runs)
    catalogue = Catalogue(tmp_path)
    taken = set()
    for name in names:
        row = _quick_row(catalogue, name)
        if row is not None:
            taken.add(name)
            assert row == _full(catalogue, name), name
    # nhbench's own files take the quick path (one and two workers, intervals, as fast as
    # possible, other labels and URL, no scheduled_to_response); a staged run (its rate is
    # the stages'), one whose failure predicate fired (the verdict names the threshold of
    # the options), Nighthawk's, Fortio's and the earlier format's files do not. A key
    # given twice is merged by the parser both paths share.
    for run in ("one", "two", "max"):
        assert {f"{run}.json", f"{run}-relabelled.json", f"{run}-uncorrected.json"} <= taken
    assert not any(name.startswith(("staged", "refused")) for name in taken)
    assert not {"nighthawk-gold.json", "earlier.json", "fortio.json"} & taken
    assert not any(name.endswith("-nighthawk.json") for name in taken)
    assert {"one-repeated.json", "two-repeated.json"} <= taken


# What a mutation puts in place of a value: other types, out-of-range and huge numbers,
# markup, text that is no duration or count, empty containers.
_REPLACEMENTS: tuple[Any, ...] = (
    None, True, 0, -1, 1.5, -0.5, 2**64, 2**63, 10**30, 1e308, float("nan"), float("inf"), "",
    "x", "<script>alert(1)</script>", "-5", "1e3", "18446744073709551616", "1.5s", "-1s",
    "1e400s", "\ud800", [], {}, ["a"], {"value": 5},
)


def _leaves(document: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of every value of `document` (containers included)."""
    found = [path]
    if isinstance(document, dict):
        for key, value in document.items():
            found += _leaves(value, (*path, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found += _leaves(value, (*path, index))
    return found


def _row_reads(path: tuple[Any, ...], document: dict[str, Any]) -> bool:
    """Whether the quick reader reads the value at `path` (or a container of it)."""
    if len(path) <= 1:
        return True
    if path[0] == "options":
        return path[1] in ("labels", "uri", "requests_per_second")
    if path[0] != "results":
        return False
    if len(path) == 2:
        return True  # an entry
    entry = document["results"][path[1]]
    if path[2] in ("name", "execution_duration", "execution_start"):
        return True
    if entry.get("name") != "global":
        # A worker's: its name and times (above), the shape of its extension.
        return path[2] == "user_defined_outputs" and len(path) < 7
    if len(path) == 3:
        return True  # the global entry's statistics, counters, extension...
    if path[2] == "statistics":
        return document["results"][path[1]]["statistics"][path[3]].get(
            "id") in ("benchmark_http_client.scheduled_to_response",
                      "benchmark_http_client.request_to_response")
    if path[2] != "user_defined_outputs" or len(path) < 7:
        return True
    inner = path[6:]
    if inner[0] == "run":
        # The run's options: their names (the values are the options', checked when the
        # result is opened).
        return len(inner) == 1 or inner[1] in (
            "terminated_by", "failed_predicates", "validity") or inner == ("run", "options")
    if inner[0] == "statistics":
        return len(inner) == 1 or inner[1] in ("benchmark_http_client.scheduled_to_response",
                                               "benchmark_http_client.request_to_response")
    return True


def _mutants(document: dict[str, Any], rng: random.Random,
             ) -> list[tuple[bool, tuple[Any, ...], Any]]:
    """Documents made from `document` by one change each (a value replaced, a key
    removed, a key added), with whether the quick reader reads where the change is. Every
    value the row reads is changed every way; of the others a sample."""
    paths = _leaves(document)
    read = [p for p in paths if _row_reads(p, document)]
    others = [p for p in paths if not _row_reads(p, document)]
    chosen = read + rng.sample(others, min(len(others), 150))
    out = []
    for path in chosen:
        replacements = _REPLACEMENTS if path in read else rng.sample(_REPLACEMENTS, 3)
        for replacement in (*replacements, _DELETE, _EXTRA):
            mutant = copy.deepcopy(document)
            parent: Any = mutant
            for part in path[:-1]:
                parent = parent[part]
            if not path:
                continue
            if replacement is _DELETE:
                del parent[path[-1]]
            elif replacement is _EXTRA:
                if not isinstance(parent, dict):
                    continue
                parent["zz_extra"] = "<b>extra</b>"
            else:
                parent[path[-1]] = replacement
            out.append((path in read, path, mutant))
    return out


_DELETE = object()
_EXTRA = object()


@pytest.mark.parametrize("base", ["one.json", "two.json"])
def test_the_quick_reader_gives_the_full_load_s_row_or_hands_the_file_over(
        tmp_path: Path, runs: dict[str, str], base: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    document = json.loads(runs[base])
    # The timeline is no part of a row and the summary leaves it out: not mutated.
    for entry in document["results"]:
        for output in entry.get("user_defined_outputs", []):
            output["typed_output"]["value"].get("run", {}).pop("timeline", None)
    catalogue = Catalogue(tmp_path)
    (tmp_path / "base.json").write_text(json.dumps(document))
    unchanged = _quick_row(catalogue, "base.json")
    assert unchanged is not None and unchanged == _full(catalogue, "base.json")
    counts = {"taken": 0, "handed over": 0, "refused when opened": 0}
    for i, (read, path, mutant) in enumerate(_mutants(document, random.Random(base))):
        name = f"m{i}.json"
        (tmp_path / name).write_text(json.dumps(mutant))
        row = _quick_row(catalogue, name)
        if row is None:
            counts["handed over"] += 1
            continue
        full = _full(catalogue, name)
        if isinstance(full, Entry):
            assert row == full, (name, read, mutant)
            counts["taken"] += 1
        else:
            # A fault where the row does not read: the row is the file's own (what the
            # unchanged file's row was, the mutant's other fields being the same), and
            # the fault is named when the result is opened.
            assert not read, (name, full, path)
            assert dataclasses.replace(row, path="base.json") == unchanged, (name, full)
            counts["refused when opened"] += 1
    assert counts["taken"] > 100 and counts["handed over"] > 500, counts
