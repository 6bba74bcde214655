"""Big results made fast, checked for correctness only (the speed is measured by
benchmarks/results_speed.py, never asserted here):

* a result's histograms are checked at load without building them (`_histogram.check`):
  the same totals and the same refusals as decoding them, on real results of every format
  the loader reads;
* workers' histograms are merged in the C core (`_histogram.merge_sparse`): the same
  buckets as adding them in Python, on real runs' histograms;
* the result browser keeps its summaries on disk between processes (`browse._scan`
  `index_path`): a new browser lists the same entries and renders the same page, and a
  file edited since (even with its size and modification time kept) is read again.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from support.hdrh_blobs import blob, zigzag_leb

import nhbench
from nhbench import _histogram
from nhbench._load import LOADERS, load_result, read_result_text
from nhbench.browse._pages import list_page
from nhbench.browse._scan import Catalogue, Entry, index_path
from nhbench.distributed import merge_stats

DATA = Path(__file__).parent / "data"
CPU = max(os.sched_getaffinity(0))

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def runs() -> dict[str, nhbench.Result]:
    """Real runs against our test server: two workers with live intervals, and one."""
    with nhbench.TestServer(cpus=[CPU]) as server:
        return {
            "two-workers.json": nhbench.run(server.url, rps=400, duration="1.5s",
                                            connections=2, concurrency=2,
                                            stats_interval="100ms", label=["two"]),
            "one-worker.json": nhbench.run(server.url, rps=300, duration="1s",
                                           connections=2, label=["one"]),
        }


@pytest.fixture(scope="module")
def result_files(runs: dict[str, nhbench.Result], tmp_path_factory: pytest.TempPathFactory,
                 ) -> list[Path]:
    """The runs as files, with the files of other tools and formats the loader reads."""
    root = tmp_path_factory.mktemp("formats")
    files = []
    for name, result in runs.items():
        (root / name).write_text(result.render("json"))
        files.append(root / name)
    files += [DATA / "nighthawk" / "output_formatter.medium.proto.gold",
              DATA / "nighthawk" / "output_formatter.medium.fortio-noquirks.gold",
              DATA / "fortio" / "fortio-1.66.5-load.json",
              DATA / "nhbench-json-earlier-format.json"]
    return files


# ---- checking histograms without building them -----------------------------------------------


def test_a_loaded_result_equals_the_models_built_from_its_document(
        result_files: list[Path]) -> None:
    """What the loader returns is the document's models field by field, histograms
    included: checking them without decoding changed nothing of the result."""
    for path in result_files:
        kind, data = read_result_text(path.read_bytes(), str(path))
        eager = LOADERS[kind](data)
        loaded = load_result(path)
        assert loaded.model_dump() == eager.model_dump(), path
        assert loaded == eager, path


def test_check_gives_decodes_totals_on_every_format(result_files: list[Path]) -> None:
    checked = 0
    for path in result_files:
        result = load_result(path)
        for entry in result.results:
            for statistic in entry.statistics:
                if not statistic.hdr_histogram:
                    continue
                decoded = _histogram.decode(statistic.hdr_histogram)
                assert _histogram.check(statistic.hdr_histogram) == decoded.total_count
                checked += 1
    assert checked >= 20  # the runs carry histograms: the comparison ran
    # What check decodes into is cleared after each, so the next sees only its own counts.
    assert _histogram._scratch.counts is not None and not any(_histogram._scratch.counts)


@pytest.mark.parametrize("bad", [
    blob(zigzag_leb(1) * 33, sigfig=1, highest=2),  # 33 counts for 32 counters
    blob(zigzag_leb(-(2**40)) + zigzag_leb(5), sigfig=1, highest=2),  # zeros past the end
    blob(zigzag_leb(-5) + zigzag_leb(1) * 31, sigfig=1, highest=2),  # past the end after data
    blob(b"", sigfig=5, highest=2**62),  # 47 MB of counters asked for
    blob(zigzag_leb(3), lowest=0),
])
def test_check_refuses_what_decode_refuses(bad: str, runs: dict[str, nhbench.Result]) -> None:
    with pytest.raises(_histogram.HistogramDecodeError) as decoded:
        _histogram.decode(bad)
    with pytest.raises(_histogram.HistogramDecodeError) as checked:
        _histogram.check(bad)
    assert str(checked.value) == str(decoded.value)
    # The next check starts from a cleared array, whatever the refused one wrote into it.
    good = runs["one-worker.json"].stat("benchmark_http_client.request_to_response").encoded()
    assert good is not None
    assert _histogram.check(good) == _histogram.decode(good).total_count
    assert not any(_histogram._scratch.counts or ())


# ---- merging workers' histograms in C ---------------------------------------------------------


def _python_merge(parts: list[list[tuple[int, int]]]) -> list[tuple[int, int]]:
    buckets: dict[int, int] = {}
    for part in parts:
        for index, count in part:
            buckets[index] = buckets.get(index, 0) + count
    return sorted((i, c) for i, c in buckets.items() if c)


def _core_stats(result: nhbench.Result) -> list[dict[str, object]]:
    """Each worker of `result` as the core's statistics dict (sparse buckets)."""
    parts = []
    for entry in result.results:
        if entry.name == "global":
            continue
        histograms = {}
        for statistic in entry.statistics:
            encoded = None if statistic.raw else statistic.encoded()
            if not encoded:
                continue
            decoded = _histogram.decode(encoded)
            histograms[statistic.id] = {
                "count": decoded.total_count, "min": round(statistic.min * 1e9),
                "max": round(statistic.max * 1e9), "sum": 0.0, "sumsq": 0.0,
                "counts": _histogram.sparse_counts(decoded)}
        parts.append({"counters": {c.name: c.value for c in entry.counters},
                      "histograms": histograms, "streams": {}})
    return parts


def test_merge_sparse_equals_adding_in_python(runs: dict[str, nhbench.Result]) -> None:
    workers = _core_stats(runs["two-workers.json"]) + _core_stats(runs["one-worker.json"])
    many = [workers[i % len(workers)] for i in range(64)]
    merged = merge_stats(many, len(many))
    compared = 0
    for stat_id, histogram in merged["histograms"].items():
        parts = [w["histograms"][stat_id]["counts"] for w in many  # type: ignore[index]
                 if stat_id in w["histograms"]]  # type: ignore[operator]
        assert histogram["counts"] == _python_merge(parts)
        assert histogram["count"] == sum(c for _, c in histogram["counts"])
        compared += bool(histogram["counts"])
    assert compared >= 5
    # Lists as pairs (a result's JSON), tuples, and nothing at all.
    pairs = [[[3, 1], [7, 2]], [(7, 5), (9, 1)], []]
    assert _histogram.merge_sparse(pairs) == [(3, 1), (7, 7), (9, 1)]
    assert _histogram.merge_sparse([]) == []
    # numpy's integers count as integers (through __index__), as Python's int() took them.
    import numpy as np

    assert _histogram.merge_sparse([[(np.int64(3), np.uint64(2))], [(3, 1)]]) == [(3, 3)]


@pytest.mark.parametrize(("parts", "error", "needle"), [
    ([[(-1, 1)]], ValueError, "bucket index -1 outside"),
    ([[(10**6, 1)]], ValueError, "bucket index 1000000 outside"),
    # Beyond 64 bits: clamped, then refused as outside (not OverflowError).
    ([[(10**30, 1)]], ValueError, f"bucket index {2**63 - 1} outside"),
    ([[(-(10**30), 1)]], ValueError, f"bucket index {-(2**63)} outside"),
    ([[(1, -1)]], ValueError, "a count outside 0..2^64-1"),
    ([[(1, 1 << 64)]], ValueError, "a count outside 0..2^64-1"),
    ([[(1, (1 << 64) - 1)], [(1, 1)]], ValueError, "overflows 64 bits"),
    ([[(1, 2, 3)]], TypeError, "not an (index, count) pair"),
    ([[(1, 1.5)]], TypeError, "a count is not an int"),
    ([[(1.5, 1)]], TypeError, "cannot be interpreted as an integer"),
    ([5], TypeError, "sequence of pairs"),
])
def test_merge_sparse_refuses_what_is_no_histogram(parts: list[object], error: type,
                                                   needle: str) -> None:
    with pytest.raises(error, match=None) as raised:
        _histogram.merge_sparse(parts)  # type: ignore[arg-type]
    assert needle in str(raised.value)


# ---- the browser's index ----------------------------------------------------------------------


def _write(root: Path, runs: dict[str, nhbench.Result]) -> None:
    for i in range(3):
        for name, result in runs.items():
            path = root / f"dir-{i}" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(result.render("json"))
    (root / "broken.json").write_text("{not json")


def test_a_new_browser_lists_from_the_index_what_a_scan_lists(
        runs: dict[str, nhbench.Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        ) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = tmp_path / "results"
    _write(root, runs)
    first = Catalogue(root).scan()
    index = index_path(os.path.realpath(root))
    assert index is not None and index.is_file()
    assert not any(p.name.startswith(".index-") for p in index.parent.iterdir())

    # A new browser reads no result file: every summary comes from the index.
    def refuse(self: Catalogue, relative: str) -> nhbench.Result:
        raise AssertionError(f"{relative} read although indexed")

    with monkeypatch.context() as patched:
        patched.setattr(Catalogue, "load", refuse)
        second = Catalogue(root).scan()
    assert second == first
    assert list_page(second, str(root)) == list_page(first, str(root))
    assert [e.kind for e in first.entries].count("result") == 6
    assert first.entries[-1].kind == "error"

    # Without the index (removed), the same list again, from the files.
    index.unlink()
    assert Catalogue(root).scan() == first


def test_an_edited_file_is_read_again_even_with_its_size_and_time_kept(
        runs: dict[str, nhbench.Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        ) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = tmp_path / "results"
    _write(root, runs)
    Catalogue(root).scan()
    path = root / "dir-1" / "one-worker.json"
    before = path.stat()
    text = path.read_text()
    assert '"one"' in text
    path.write_text(text.replace('"one"', '"new"', 1))  # the label, same length
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    listing = Catalogue(root).scan()
    labels = {e.path: e.label for e in listing.entries}
    assert labels["dir-1/one-worker.json"] == "new"
    assert labels["dir-2/one-worker.json"] == "one"
    # A file removed since is gone from the list, and from the index.
    (root / "dir-2" / "one-worker.json").unlink()
    assert "dir-2/one-worker.json" not in {e.path for e in Catalogue(root).scan().entries}
    index = index_path(os.path.realpath(root))
    assert index is not None
    assert "dir-2/one-worker.json" not in json.loads(index.read_text())["entries"]


@pytest.mark.parametrize("damage", ["not json", "other version", "other root", "odd entry",
                                    "wrong field type"])
def test_an_index_that_is_not_this_ones_is_ignored(
        damage: str, runs: dict[str, nhbench.Result], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = tmp_path / "results"
    _write(root, runs)
    expected = Catalogue(root).scan()
    index = index_path(os.path.realpath(root))
    assert index is not None
    document = json.loads(index.read_text())
    # Each damage also plants a wrong label, which must not be shown. An entry is the list
    # of its fields' values, in the dataclass's order.
    names = [field.name for field in dataclasses.fields(Entry)]
    for _, fields in document["entries"].values():
        fields[names.index("label")] = "planted"
    if damage == "not json":
        index.write_text("{" + json.dumps(document)[:100])
    else:
        if damage == "other version":
            document["version"] = "0.0.0"
        elif damage == "other root":
            document["root"] = "/elsewhere"
        elif damage == "odd entry":
            next(iter(document["entries"].values()))[1].append(1)
        else:
            next(iter(document["entries"].values()))[1][names.index("ok")] = "yes"
        index.write_text(json.dumps(document))
    listing = Catalogue(root).scan()
    assert listing == expected
    assert "planted" not in {e.label for e in listing.entries}


def test_an_unwritable_cache_costs_only_the_reading(
        runs: dict[str, nhbench.Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        ) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache directory would be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    root = tmp_path / "results"
    _write(root, runs)
    first = Catalogue(root).scan()
    assert Catalogue(root).scan() == first
    assert len(first.entries) == 7


# ---- percentiles in one pass --------------------------------------------------------------------


def test_many_percentiles_in_one_pass_equal_one_at_a_time(
        runs: dict[str, nhbench.Result]) -> None:
    from nhbench._notebook import distribution

    compared = 0
    for result in runs.values():
        for statistic in result.global_result.statistics:
            if statistic.raw or not statistic.count:
                continue
            points = distribution(statistic)
            assert [value for _, value in points] == [statistic.p(f * 100.0) for f, _ in points]
            pairs = statistic._pairs()
            fractions = [f for f, _ in points] + [0.0, 0.123456, 1.0]
            together = _histogram.percentile_points(pairs, fractions)
            alone = [_histogram.percentile_points(pairs, [f])[0] for f in sorted(set(fractions))]
            assert together == alone
            compared += 1
    assert compared >= 6
