"""Fortio's own report UI as the judge of the ``fortio`` and ``experimental_fortio_pedantic``
formats: a real nhbench run against our test server is written in both formats into a data
directory, the real ``fortio report`` (fortio 1.66.5) serves it, and headless Chromium
(selenium, chromedriver) opens Fortio's pages as a user would.

Checked: the browse page lists both files; opening each one draws Fortio's Chart.js chart
(canvas shown, the chart's datasets built from our Data buckets, no JS console errors); the
chart's title shows our labels, URL, requested and actual rate, connections, duration and
the error percentage Fortio derives from RetCodes; selecting both draws Fortio's overlay
comparison; the JSON Fortio serves back is our file and parses. Fortio's Go decoder (its
``HTTPRunnerResults`` struct) reads the pedantic file and refuses the plain one, as it
refuses Nighthawk's (docs/outputs.md says what that means).

Skipped, with the reason, where fortio, chromium or chromedriver is not installed.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.peers import fortio_report

import nhbench
from nhbench.outputs import render

FORTIO = shutil.which("fortio") or "/root/go/bin/fortio"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
GO = shutil.which("go") or "/usr/local/go/bin/go"

pytestmark = [
    pytest.mark.skipif(not os.access(FORTIO, os.X_OK), reason="fortio is not installed "
                       "(go install fortio.org/fortio@v1.66.5)"),
    pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason="chromium is not installed"),
    pytest.mark.skipif(not os.access(CHROMEDRIVER, os.X_OK),
                       reason="chromedriver is not installed (Debian: chromium-driver)"),
]

# Fortio's -a names files like this (periodic.go: ID from the start time and the labels);
# its report lists any *.json of the directory, newest name first.
PLAIN = "2026-01-02-030405_nhbench_fortio"
PEDANTIC = "2026-01-02-030406_nhbench_fortio_pedantic"


def js_round(value: float, digits: int) -> str:
    """Fortio's myRound (Math.round(v * 10^d) / 10^d) as JavaScript prints the number."""
    scale = 10**digits
    rounded = math.floor(value * scale + 0.5) / scale
    return f"{rounded:g}"


@pytest.fixture(scope="module")
def run() -> Iterator[tuple[nhbench.Result, dict[str, int]]]:
    with nhbench.TestServer() as server:
        result = nhbench.run(server.url + "?status=503:10", rps=200, duration=1.0,
                             connections=4, label=("nhbench", "ui"),
                             no_default_failure_predicates=True)
        written = {code: int(n) for code, n in server.stats()["status"].items()}
    yield result, written


@pytest.fixture(scope="module")
def data_dir(run, tmp_path_factory) -> Path:
    result, _ = run
    directory = tmp_path_factory.mktemp("fortio-data")
    (directory / f"{PLAIN}.json").write_text(render(result, "fortio"))
    (directory / f"{PEDANTIC}.json").write_text(render(result, "experimental_fortio_pedantic"))
    return directory


@pytest.fixture(scope="module")
def report(data_dir) -> Iterator[str]:
    """`fortio report` on a free loopback port (its redirector off); yields the base URL."""
    with fortio_report(FORTIO, data_dir) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(driver: Any, script: str, timeout: float = 30.0) -> Any:
    """Poll a JS expression until it is truthy (the chart is drawn after a fetch)."""
    deadline = time.monotonic() + timeout
    while True:
        value = driver.execute_script(f"return {script}")
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def console_errors(driver: Any) -> list[dict[str, Any]]:
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def test_the_browse_page_lists_both_files(report, browser):
    browser.get(report)
    names = [option.text for option in browser.find_elements("css selector", "#files option")]
    assert names == [PEDANTIC, PLAIN]
    assert console_errors(browser) == []


@pytest.mark.parametrize("name", [PLAIN, PEDANTIC])
def test_opening_a_file_draws_the_chart_with_our_numbers(report, browser, run, data_dir, name):
    result, written = run
    browser.get(f"{report}browse?url={name}.json")
    assert wait_for(browser, "typeof chart !== 'undefined' && Object.keys(chart).length > 0")
    canvas = browser.find_element("id", "chart1")
    assert canvas.is_displayed() and canvas.size["width"] > 100 and canvas.size["height"] > 100
    browser.save_screenshot(str(data_dir.parent / f"{name}.png"))

    ours = json.loads((data_dir / f"{name}.json").read_text())
    buckets = ours["DurationHistogram"]["Data"]
    datasets = dict(browser.execute_script(
        "return chart.data.datasets.map(d => [d.label, d.data.length])"))
    # Fortio's chart: the cumulative curve starts at (0, 0) and 1/N at the minimum, then one
    # point per bucket end (Nighthawk's buckets are contiguous); two points per bucket bar.
    assert datasets == {"Cumulative %": len(buckets) + 2, "Error Histogram": 0,
                        "Histogram: Count": 2 * len(buckets)}
    bars = browser.execute_script(
        "return chart.data.datasets[2].data.filter((p, i) => i % 2 == 0)"
        ".reduce((s, p) => s + Number(p.y), 0)")
    total = result.stat("benchmark_http_client.request_to_response").count
    assert bars == total  # every sample in exactly one bar

    title = browser.execute_script("return chart.options.title.text")
    assert title[0].startswith(f"nhbench ui - {result.options.uri} - ")
    actual = js_round(result.counters["upstream_rq_total"] / result.duration, 1)
    ok = written.get("200", 0)
    errors = "no error" if ok == total else f"{js_round(100.0 * (total - ok) / total, 2)}% errors"
    assert title[1] == (
        f"Response time histogram at 200 target qps ({actual} actual) 4 connections for 1s "
        f"(actual time {js_round(result.duration, 1)}s), jitter: false, uniform: undefined, "
        f"{errors}")
    assert title[2].startswith(
        f"min {js_round(1000 * result.stat('benchmark_http_client.request_to_response').min, 3)}"
        " ms, average ")
    assert "p50 " in title[2] and "p99 " in title[2]
    assert browser.execute_script("return res.RetCodes[503]") == (
        written["503"] if name == PEDANTIC else str(written["503"]))
    assert console_errors(browser) == []


def test_selecting_both_overlays_them(report, browser):
    browser.get(f"{report}?sel={PLAIN}&sel={PEDANTIC}")  # names as the list shows them
    assert wait_for(browser, "typeof overlayChart !== 'undefined' && "
                    "Object.keys(overlayChart).length > 0")
    labels = browser.execute_script("return overlayChart.data.datasets.map(d => d.label)")
    assert labels == ["A: Cumulative %", "B: Cumulative %", "A: Histogram: Count",
                      "B: Histogram: Count"]
    # The same run in both formats: the two curves are the same numbers.
    same = browser.execute_script(
        "const [a, b] = overlayChart.data.datasets; return JSON.stringify(a.data) == "
        "JSON.stringify(b.data)")
    assert same
    assert console_errors(browser) == []


@pytest.mark.parametrize("name", [PLAIN, PEDANTIC])
def test_the_json_fortio_serves_back_is_our_file(report, data_dir, name):
    with urllib.request.urlopen(f"{report}data/{name}.json", timeout=10) as response:
        body = response.read()
    assert body == (data_dir / f"{name}.json").read_bytes()
    assert json.loads(body)["Labels"] == "nhbench ui"


@pytest.mark.skipif(not os.access(GO, os.X_OK), reason="go is not installed")
@pytest.mark.skipif(not (Path.home() / "go/pkg/mod/fortio.org/fortio@v1.66.5").is_dir(),
                    reason="fortio.org/fortio@v1.66.5 is not in the Go module cache")
def test_fortios_go_decoder_reads_pedantic_and_refuses_plain(data_dir, tmp_path):
    """Fortio's own HTTPRunnerResults struct, decoded by Go's encoding/json (built offline
    from the module cache that `go install fortio.org/fortio@v1.66.5` left)."""
    (tmp_path / "go.mod").write_text("module decode\n\ngo 1.22\n\n"
                                     "require fortio.org/fortio v1.66.5\n")
    (tmp_path / "main.go").write_text(
        'package main\n\nimport (\n\t"encoding/json"\n\t"fmt"\n\t"os"\n\n'
        '\t"fortio.org/fortio/fhttp"\n)\n\n'
        "func main() {\n\tfor _, name := range os.Args[1:] {\n"
        "\t\tb, _ := os.ReadFile(name)\n\t\tvar r fhttp.HTTPRunnerResults\n"
        "\t\tif err := json.Unmarshal(b, &r); err != nil {\n"
        '\t\t\tfmt.Println("ERROR", err)\n\t\t\tcontinue\n\t\t}\n'
        '\t\tfmt.Println("OK", r.DurationHistogram.Count, r.RetCodes[503], r.RequestedQPS)\n'
        "\t}\n}\n")
    env = {**os.environ, "GOPROXY": "off", "GOFLAGS": "-mod=mod", "GOSUMDB": "off"}
    subprocess.run([GO, "build", "-o", "decode", "."], cwd=tmp_path, env=env, check=True,
                   capture_output=True, timeout=300)
    out = subprocess.run([str(tmp_path / "decode"), str(data_dir / f"{PLAIN}.json"),
                          str(data_dir / f"{PEDANTIC}.json")],
                         check=True, capture_output=True, text=True, timeout=60).stdout
    plain, pedantic = out.splitlines()
    assert plain == ("ERROR json: cannot unmarshal number into Go struct field "
                     "HTTPRunnerResults.RunnerResults.RequestedQPS of type string")
    pedantic_json = json.loads((data_dir / f"{PEDANTIC}.json").read_text())
    assert pedantic == (f"OK {pedantic_json['DurationHistogram']['Count']} "
                        f"{pedantic_json['RetCodes']['503']} 200")
