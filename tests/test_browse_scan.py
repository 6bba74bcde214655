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
import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest

import nhbench
from nhbench._exceptions import ResultFileError
from nhbench.browse import Catalogue
from nhbench.browse._scan import Entry

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

    for name, change in (("headline-histogram.json", headline_histogram),
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
