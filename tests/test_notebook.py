"""Notebook-native results (docs/notebooks.md): the one-line repr, the HTML a notebook shows
for a Result and a Campaign, DataFrames, matplotlib figures, load_result, and
docs/notebooks/quickstart.ipynb executed in a real Jupyter kernel.

Every result here comes from a real run against the real test server.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest

import nhbench
from nhbench._format import format_latency, format_rate
from nhbench._names import REQUEST_TO_RESPONSE, SCHEDULED_TO_RESPONSE, describe_errors
from nhbench._svg import format_percentile_axis, percentile_x
from nhbench.campaign import sweep_charts
from nhbench.sweep import run_sweep

REPO = Path(__file__).resolve().parent.parent
NOTEBOOK = REPO / "docs" / "notebooks" / "quickstart.ipynb"
SERVER_CPU = max(os.sched_getaffinity(0))
CLIENT_CPU = min(os.sched_getaffinity(0))
LABEL = "<b>bold</b> & co"


@pytest.fixture(scope="module")
def server() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer(cpus=[SERVER_CPU]) as test_server:
        yield test_server


@pytest.fixture(scope="module")
def slow(server: nhbench.TestServer) -> nhbench.Result:
    return nhbench.run(server.url + "?a=1&b=2", rps=200, duration="1s", connections=2,
                       cpus=[CLIENT_CPU])


@pytest.fixture(scope="module")
def fast(server: nhbench.TestServer) -> nhbench.Result:
    return nhbench.run(server.url, rps=600, duration="1s", connections=2, cpus=[CLIENT_CPU],
                       label=[LABEL])


@pytest.fixture(scope="module")
def refused() -> nhbench.Result:
    """A run whose every request fails: nothing listens on the port."""

    from support.sockets import reserved_port

    with reserved_port() as port:  # bound, never listened on: refused
        return nhbench.run(f"http://127.0.0.1:{port}/", rps=50, duration="0.5s",
                           connections=1, cpus=[CLIENT_CPU])


class _Tables(HTMLParser):
    """Tables (rows of cell texts), SVG count and caption texts of an HTML fragment."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[str]]] = []
        self.captions: list[str] = []
        self._cell: list[str] | None = None
        self._caption: list[str] | None = None
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "caption":
            self._caption = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "caption" and self._caption is not None:
            self.captions.append("".join(self._caption))
            self._caption = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._caption is not None:
            self._caption.append(data)


def _parse(fragment: str) -> _Tables:
    parser = _Tables()
    parser.feed(fragment)
    parser.close()
    return parser


def _svgs(fragment: str) -> list[str]:
    return re.findall(r"<svg\b.*?</svg>", fragment, flags=re.DOTALL)


# -- repr ------------------------------------------------------------------------------------


def test_repr_and_str_are_one_line(slow: nhbench.Result) -> None:
    expected = (f"<Result 200 rps asked, {slow.achieved_rps:.1f} achieved, "
                f"p99 {format_latency(slow.latency.p(99))}, 0 errors>")
    assert repr(slow) == expected
    assert str(slow) == expected  # pydantic's __str__ would list every field
    assert slow.counters["benchmark.http_2xx"] > 0


def test_statistic_repr_is_one_line(slow: nhbench.Result) -> None:
    latency = slow.latency
    assert repr(latency) == (
        f"<Statistic {SCHEDULED_TO_RESPONSE}: {latency.count} samples, "
        f"p50 {format_latency(latency.p(50))}, p99 {format_latency(latency.p(99))}, "
        f"max {format_latency(latency.max)}>")
    sizes = slow.stat("benchmark_http_client.response_header_size")
    assert str(sizes).startswith(f"<Statistic {sizes.id}: {sizes.count} samples, min ")
    assert repr(slow.stat("benchmark_http_client.latency_5xx")) == \
        "<Statistic benchmark_http_client.latency_5xx: no samples>"


def test_repr_of_a_failed_run(refused: nhbench.Result) -> None:
    assert not refused.success and refused.error_count > 0
    assert repr(refused) == (f"<Result 50 rps asked, 0.0 achieved, p99 -, "
                             f"{refused.error_count} errors, FAILED>")


# -- Result._repr_html_ ----------------------------------------------------------------------


def test_html_headline_counters_and_chart(slow: nhbench.Result) -> None:
    fragment = slow._repr_html_()
    assert "<script" not in fragment.lower() and "<style" not in fragment.lower()
    parsed = _parse(fragment)
    headline, counters = parsed.tables
    latency = slow.latency
    assert headline[0] == ["asked", "achieved", "duration", "2xx", "errors",
                           "p50", "p90", "p99", "p99.9", "max"]
    assert headline[1] == [
        f"{format_rate(slow.requested_rps)} rps", f"{slow.achieved_rps:,.1f} rps",
        format_latency(slow.duration), f"{slow.succeeded:,}", "0",
        *(format_latency(latency.p(p)) for p in (50, 90, 99, 99.9)), format_latency(latency.max),
    ]
    assert parsed.captions == ["Counters (non-zero)"]
    assert counters[0] == ["counter", "value", "per second"]
    assert [row[:2] for row in counters[1:]] == [
        [name, f"{value:,}"] for name, value in slow.counters.nonzero().items()]
    # The chart: well-formed SVG, both latencies, the percentile axis, self-styled.
    (svg,) = _svgs(fragment)
    root = ET.fromstring(svg)
    assert root.get("fill") is None and root.get("font-size") == "11"
    assert len(root.findall("polyline")) == 2
    texts = [t.text for t in root.iter("text")]
    assert {"0%", "90%", "99%"} <= set(texts)
    assert "CO-corrected (scheduled_to_response)" in texts
    assert "uncorrected (request_to_response)" in texts
    # Every marker's tooltip names a value the statistic reports at that percentile.
    tooltips = [c.find("title").text for c in root.iter("circle")]  # type: ignore[union-attr]
    assert f"CO-corrected (scheduled_to_response): {format_latency(latency.p(99))} at 99%" \
        in tooltips
    assert f"uncorrected (request_to_response): " \
        f"{format_latency(slow.stat(REQUEST_TO_RESPONSE).p(90))} at 90%" in tooltips


def test_html_escapes_what_the_run_supplies(slow: nhbench.Result, fast: nhbench.Result) -> None:
    labelled = fast._repr_html_()
    assert LABEL not in labelled and "<b>bold" not in labelled
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; co" in labelled
    assert "?a=1&amp;b=2" in slow._repr_html_() and "?a=1&b=2" not in slow._repr_html_()
    # Escaped inside the SVG as well: the chart's tooltips and legend are XML.
    for svg in _svgs(labelled):
        ET.fromstring(svg)


def test_html_of_a_failed_run(refused: nhbench.Result) -> None:
    fragment = refused._repr_html_()
    headline = _parse(fragment).tables[0]
    assert headline[1][4] == f"{refused.error_count} ({describe_errors(refused.counters)})"
    assert headline[1][5:] == ["-"] * 5  # no response, no latency
    assert "FAILED: " in fragment
    (svg,) = _svgs(fragment)
    assert ">no data</text>" in svg


# -- DataFrames and histograms ---------------------------------------------------------------


def test_to_dataframe_long(slow: nhbench.Result) -> None:
    frame = slow.to_dataframe()
    assert list(frame.columns) == ["statistic", "percentile", "value", "count"]
    statistics = slow.global_result.statistics
    assert len(frame) == sum(len(s.percentiles) for s in statistics)
    assert set(frame.statistic) == {s.id for s in statistics if s.percentiles}
    for row in frame.itertuples():
        assert row.value == slow.stat(row.statistic).p(row.percentile)
    headline = frame[frame.statistic == SCHEDULED_TO_RESPONSE]
    assert list(headline.percentile) == [0.0, 50.0, 75.0, 90.0, 99.0, 99.9, 99.99, 100.0]
    assert headline["count"].iloc[-1] == slow.latency.count


def test_to_dataframe_wide(slow: nhbench.Result) -> None:
    frame = slow.to_dataframe(wide=True)
    assert list(frame.index) == [s.id for s in slow.global_result.statistics]
    assert list(frame.columns) == ["raw", "count", "min", "mean", "pstdev", "p50", "p75",
                                   "p90", "p99", "p99.9", "p99.99", "max"]
    latency = slow.latency
    row = frame.loc[SCHEDULED_TO_RESPONSE]
    assert row["count"] == latency.count and row["max"] == latency.max
    for column, percent in (("p50", 50), ("p99", 99), ("p99.99", 99.99)):
        assert row[column] == latency.p(percent)
    sizes = frame.loc["benchmark_http_client.response_header_size"]
    assert sizes["raw"] and sizes["count"] == slow.succeeded and math.isnan(sizes["p50"])


def test_histogram_is_the_hdrh_histogram(slow: nhbench.Result) -> None:
    histogram = slow.histogram(SCHEDULED_TO_RESPONSE)
    assert type(histogram).__module__.startswith("hdrh")
    assert histogram.get_total_count() == slow.latency.count
    # The histogram and the statistic agree on the distribution, up to the bucket width
    # (3 significant digits) and the clamping to the exact max.
    value = histogram.get_value_at_percentile(90) / 1e9
    assert value == pytest.approx(slow.latency.p(90), rel=2e-3)


def test_missing_optional_dependencies_name_the_extra(slow: nhbench.Result,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=re.escape(
            "Result.to_dataframe() needs pandas: pip install 'nhbench[notebook]'")):
        slow.to_dataframe()
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=re.escape(
            "plot_percentiles() needs matplotlib: pip install 'nhbench[notebook]'")):
        slow.plot()


# -- figures ---------------------------------------------------------------------------------


def test_plot_percentiles_overlays_runs(slow: nhbench.Result, fast: nhbench.Result) -> None:
    from matplotlib.figure import Figure

    figure = nhbench.plot_percentiles([slow, fast], labels=["200 rps", "600 rps"])
    assert isinstance(figure, Figure)
    (axes,) = figure.axes
    assert [line.get_label() for line in axes.lines] == ["200 rps", "600 rps"]
    assert [t.get_text() for t in axes.get_legend().get_texts()] == ["200 rps", "600 rps"]
    assert axes.get_xscale() == "log"
    for line, result in zip(axes.lines, (slow, fast), strict=True):
        xs, ys = list(line.get_xdata()), list(line.get_ydata())
        assert xs[0] == 1.0 and ys[0] == pytest.approx(result.latency.min * 1e3)
        # p99 sits at x = 100, and the last point is the max (every sample is below it).
        assert ys[xs.index(pytest.approx(100.0))] == pytest.approx(result.latency.p(99) * 1e3)
        assert ys[-1] == pytest.approx(result.latency.max * 1e3)
    labels = [t.get_text() for t in axes.get_xticklabels()]
    assert labels[:3] == ["0%", "90%", "99%"]
    # Renders without a display (no pyplot, no backend selected).
    import io

    png = io.BytesIO()
    figure.savefig(png, format="png")
    assert png.getvalue().startswith(b"\x89PNG")


def test_plot_defaults_and_errors(slow: nhbench.Result, fast: nhbench.Result) -> None:
    figure = slow.plot()
    assert [line.get_label() for line in figure.axes[0].lines] == ["200 rps"]
    figure = nhbench.plot_percentiles(fast, labels=["one"])  # one result, not a list
    assert [line.get_label() for line in figure.axes[0].lines] == ["one"]
    figure = nhbench.plot_percentiles([slow, fast], statistic=REQUEST_TO_RESPONSE)
    assert [line.get_label() for line in figure.axes[0].lines] == ["200 rps", LABEL]
    assert REQUEST_TO_RESPONSE in figure.axes[0].get_title()
    with pytest.raises(ValueError, match="1 labels for 2 results"):
        nhbench.plot_percentiles([slow, fast], labels=["only one"])
    with pytest.raises(ValueError, match="no results to plot"):
        nhbench.plot_percentiles([])


def test_percentile_axis() -> None:
    assert [percentile_x(p) for p in (0.0, 0.9)] == [1.0, pytest.approx(10.0)]
    assert [format_percentile_axis(10.0**k) for k in range(6)] == [
        "0%", "90%", "99%", "99.9%", "99.99%", "99.999%"]


# -- load_result -----------------------------------------------------------------------------


def test_load_result_round_trip(fast: nhbench.Result, tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    path.write_text(fast.render("json"))
    loaded = nhbench.load_result(path)
    assert loaded.counters.nonzero() == fast.counters.nonzero()
    assert loaded.latency.p(99.9) == fast.latency.p(99.9)
    assert repr(loaded) == repr(fast)
    # The histograms come back from their encoding, so the notebook view is the same.
    assert loaded._repr_html_() == fast._repr_html_()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "no such file"),
        ("dir", "is a directory"),
        ("{not json", "not JSON (Expecting property name enclosed in double quotes at line 1 "
                      "column 2)"),
        (b"{\x80}", "not JSON (not UTF-8 text)"),
        ("[1, 2]", "not a result: no format nhbench reads has this shape"),
        # Fortio's JSON is read too (tests/test_output_fortio.py); one without
        # its URL is an invalid one.
        ('{"RunType": "HTTP", "DurationHistogram": {}}',
         "invalid Fortio's JSON output: URL: missing (nhbench reads Fortio's HTTP results)"),
        # Nighthawk's JSON is read; this one has no uri, which nhbench needs.
        ('{"options": {}, "results": [], "version": {"version": {"major_number": 0}}}',
         "invalid Nighthawk's JSON output: options.uri: Field required"),
        ('{"options": {"uri": "http://127.0.0.1/"}, "results": [{"name": 5}]}',
         "invalid nhbench JSON: results.0.name: Input should be a valid string"),
        ('{"options": {"uri": "ftp://x/"}, "results": []}', "invalid nhbench JSON: options"),
    ],
)
def test_load_result_bad_files(tmp_path: Path, content: str | bytes | None,
                               reason: str) -> None:
    path = tmp_path / "bad.json"
    if content == "dir":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(nhbench.ResultFileError) as caught:
        nhbench.load_result(path)
    message = str(caught.value)
    assert message.startswith(f"cannot load result {str(path)!r}: ")
    assert reason in message
    assert "\n" not in message and caught.value.path == str(path)
    assert isinstance(caught.value, nhbench.NHBenchError)


def test_load_result_checks_the_histograms(fast: nhbench.Result, tmp_path: Path) -> None:
    document = json.loads(fast.render("json"))
    statistic = document["results"][-1]["statistics"][0]
    # The histograms are in the nhbench user_defined_outputs entry.
    extras = document["results"][-1]["user_defined_outputs"][0]["typed_output"]["value"]
    encoded = extras["statistics"][statistic["id"]]
    encoded["hdr_histogram"] = "HISTFAAA" + encoded["hdr_histogram"][8:40]
    path = tmp_path / "corrupt.json"
    path.write_text(json.dumps(document))
    with pytest.raises(nhbench.ResultFileError, match=re.escape(
            f"invalid nhbench JSON: global {statistic['id']}: hdr_histogram does not decode")):
        nhbench.load_result(path)


def test_html_of_a_result_without_histograms(fast: nhbench.Result, tmp_path: Path) -> None:
    # A result file without its histograms, and without p90 in its percentiles: the view
    # shows what the file has and "-" for what it cannot compute, rather than failing.
    document = json.loads(fast.render("json"))
    for entry in document["results"]:
        # The histograms are in the nhbench user_defined_outputs entry.
        entry["user_defined_outputs"][0]["typed_output"]["value"].pop("statistics", None)
        for statistic in entry["statistics"]:
            statistic["percentiles"] = [p for p in statistic.get("percentiles", [])
                                        if p["percentile"] != 0.9]
    path = tmp_path / "bare.json"
    path.write_text(json.dumps(document))
    loaded = nhbench.load_result(path)
    fragment = loaded._repr_html_()
    headline = _parse(fragment).tables[0]
    assert headline[1][5:] == [format_latency(fast.latency.p(50)), "-",
                               format_latency(fast.latency.p(99)),
                               format_latency(fast.latency.p(99.9)),
                               format_latency(fast.latency.max)]
    assert ">no data</text>" in fragment
    assert repr(loaded) == repr(fast)


# -- Campaign._repr_html_ --------------------------------------------------------------------


def test_campaign_html(server: nhbench.TestServer, tmp_path: Path) -> None:
    campaign = run_sweep(server.url, out=tmp_path / "c", steps="40,80", duration="0.5s",
                         connections=2, cpus=str(CLIENT_CPU), captures=False, facts=False,
                         reports=True, label=[LABEL])
    loaded = nhbench.load_campaign(tmp_path / "c")
    fragment = loaded._repr_html_()
    assert fragment == campaign._repr_html_()
    assert "<script" not in fragment.lower() and LABEL not in fragment
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; co" in fragment
    steps = _parse(fragment).tables[0]
    assert steps[0][:4] == ["No.", "requested", "achieved", "p50"]
    assert [row[0] for row in steps[1:]] == ["1", "2"]
    for row, step in zip(steps[1:], loaded.steps, strict=True):
        assert row[1:3] == [format_rate(step.requested_rps), format_rate(step.achieved_rps)]
        assert row[5] == format_latency(step.latency["p99"])
    svgs = _svgs(fragment)
    assert "Latency vs offered load" in svgs[0] and "Achieved vs offered load" in svgs[1]
    # The same charts as report.html: the same data (tooltips), styled inline here.
    report_svgs = _svgs((tmp_path / "c" / "report.html").read_text())
    assert len(svgs) == len(report_svgs)
    assert report_svgs == sweep_charts(loaded.manifest)
    for inline, styled in zip(svgs, report_svgs, strict=True):
        assert re.findall(r"<title>.*?</title>", inline) == re.findall(r"<title>.*?</title>",
                                                                       styled)
        assert 'stroke="#eee"' in inline and 'stroke="#eee"' not in styled


# -- import lightness ------------------------------------------------------------------------


def test_import_nhbench_does_not_load_notebook_dependencies(fast: nhbench.Result,
                                                           tmp_path: Path) -> None:
    # A result's repr and HTML need neither pandas nor matplotlib, only the figures and
    # DataFrames do.
    path = tmp_path / "result.json"
    path.write_text(fast.render("json"))
    script = (
        "import sys, nhbench\n"
        "heavy = ('pandas', 'matplotlib', 'IPython', 'ipykernel', 'nbformat', 'nbclient')\n"
        "before = [m for m in heavy if m in sys.modules]\n"
        f"result = nhbench.load_result({str(path)!r})\n"
        "text = repr(result) + result._repr_html_()\n"
        "after = [m for m in heavy if m in sys.modules]\n"
        "print(before, after)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[] []"


# -- the quickstart notebook, in a real kernel ----------------------------------------------


def test_quickstart_notebook_is_committed_without_outputs() -> None:
    notebook = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert code and all(not cell["outputs"] and cell["execution_count"] is None for cell in code)


@pytest.mark.timeout(240)
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_quickstart_notebook_runs_in_a_kernel(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    # A kernel spec of this interpreter, found first on JUPYTER_PATH: the notebook runs on
    # the nhbench under test, whatever kernels the user has installed.
    spec = tmp_path / "jupyter" / "kernels" / "nhbench-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "nhbench test", "language": "python",
    }))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(notebook, kernel_name="nhbench-test", timeout=120,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = {cell.id: cell.outputs for cell in notebook.cells if cell.cell_type == "code"}
    for cell_id, cell_outputs in outputs.items():
        assert not [o for o in cell_outputs if o.output_type == "error"], cell_id

    def data(cell_id: str, mime: str) -> str:
        values = [o["data"][mime] for o in outputs[cell_id] if mime in o.get("data", {})]
        assert len(values) == 1, (cell_id, mime, outputs[cell_id])
        return str(values[0])

    for cell_id in ("run-slow", "run-fast"):
        fragment = data(cell_id, "text/html")
        assert "<svg" in fragment and "<table" in fragment and "<script" not in fragment
        assert "Counters (non-zero)" in fragment
        assert re.fullmatch(r"<Result \d+ rps asked, [\d.]+ achieved, p99 .+, 0 errors>",
                            data(cell_id, "text/plain"))
    assert "p99" in data("repr", "text/plain")
    assert data("compare", "image/png")  # the Figure is displayed, not only its repr
    assert "<table" in data("frame-long", "text/html")
    assert data("load", "text/plain") == "(True, True)"
    campaign = data("sweep", "text/html")
    assert "Latency vs offered load" in campaign and "<script" not in campaign
    assert "<table" in data("sweep-load", "text/html")
