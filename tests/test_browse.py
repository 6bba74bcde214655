"""``nhbench browse DIR`` and ``nhbench report RESULT.json -o page.html`` in a real browser.

The results are real runs against our test server (one worker, two workers, one with a
timeline, one whose every request is refused), a real sweep campaign (``nhbench sweep`` as
a subprocess) and a file that is not JSON. ``nhbench browse`` runs as a subprocess on that
directory; headless Chromium (Debian's, driven by chromedriver through selenium) loads each
page, and the tests assert on the rendered DOM: rows of the list, the filter hiding rows,
the charts' series and their points, the comparison's curves and deltas, and no message
on the browser's console. Screenshots go to /tmp/nhbench-browse-*.png for a person to look
at. One browser and one ``nhbench browse`` for the module: starting Chromium takes seconds.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.peers import chromedriver_binary, chromium_binary

import nhbench
from nhbench._format import format_latency, format_rate

PACKAGE_PARENT = str(Path(nhbench.__file__).resolve().parent.parent)
SERVER_CPU = max(os.sched_getaffinity(0))
CLIENT_CPU = min(os.sched_getaffinity(0))
SCREENSHOTS = Path("/tmp")

pytestmark = pytest.mark.timeout(300)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT, env.get("PYTHONPATH")]))
    return env


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nhbench", *args], check=False,
                          capture_output=True, text=True, timeout=timeout, env=_env(),
                          stdin=subprocess.DEVNULL)


def points_per_nine_curve(count: int) -> int:
    """The points of a distribution curve drawn from a full histogram of `count` samples:
    ten per "nine" from p0 to the first nine that reaches the last sample (p99 at least,
    p99.9999 at most: 2 x count samples need log10(2 count) nines), plus p50 and p75."""
    nines = min(6, max(2, math.ceil(math.log10(2 * count))))
    return 10 * nines + 1 + 2


# ---- the directory of results ----------------------------------------------------------------


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("results")
    with nhbench.TestServer(cpus=[SERVER_CPU]) as server:
        runs = {
            "single.json": nhbench.run(server.url, rps=300, duration="1s", connections=2,
                                       cpus=[CLIENT_CPU], label=["single"]),
            "multi.json": nhbench.run(server.url, rps=150, duration="1s", connections=2,
                                      concurrency=2, label=["multi"]),
            "runs/timeline.json": nhbench.run(server.url, rps=200, duration="1.5s",
                                              connections=2, cpus=[CLIENT_CPU],
                                              stats_interval="250ms", label=["timeline"]),
        }
        campaign = cli("sweep", server.url, "--steps", "100,200", "--duration", "0.5s",
                       "--cooldown", "0", "--cpus", str(CLIENT_CPU), "--out",
                       str(root / "sweep"), "--no-mpstat", "--label", "campaign")
        assert campaign.returncode == 0, campaign.stderr
    with socket.socket() as sock:  # a port that was free a moment ago, now closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    runs["refused.json"] = nhbench.run(f"http://127.0.0.1:{port}/", rps=50, duration="0.3s",
                                       connections=1, cpus=[CLIENT_CPU], label=["refused"])
    for name, result in runs.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(result.render("json"))
    (root / "broken.json").write_text("{not json")
    (root / "notes.txt").write_text("not a result, not listed")
    return root


@contextlib.contextmanager
def _browse_process(root: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """``nhbench browse`` on `root`, on a free port: its URL; stopped by SIGINT at the end,
    which must find nothing failed on the server's side."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "nhbench", "browse", str(root), "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env or _env(),
        stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    try:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", url), (
            url, proc.stderr.read() if proc.stderr and proc.poll() is not None else "")
        yield url
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            _, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 0 and "Traceback" not in stderr, stderr


@pytest.fixture(scope="module")
def browse(results_dir: Path) -> Iterator[str]:
    """``nhbench browse`` on the results, on a free port; its URL."""
    with _browse_process(results_dir) as url:
        yield url


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    chromium, chromedriver = chromium_binary(), chromedriver_binary()
    if chromium is None or chromedriver is None:
        pytest.skip("needs Chromium and chromedriver (apt-get install chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="needs selenium (test extra)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1300,1800",
                     "--allow-file-access-from-files"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(options=options, service=Service(chromedriver))
    browser.set_page_load_timeout(60)
    yield browser
    browser.quit()


def load(driver: Any, url: str, screenshot: str | None = None) -> None:
    """Open `url`, check the console stayed silent, save a screenshot if asked."""
    driver.get(url)
    messages = driver.get_log("browser")
    assert messages == [], messages
    if screenshot:
        driver.save_screenshot(str(SCREENSHOTS / f"nhbench-browse-{screenshot}.png"))


def wait_for_url(driver: Any, ok: Any, timeout: float = 10.0) -> None:
    """Wait until the page's URL satisfies `ok`: a click only starts a navigation, and reading
    ``current_url`` at once may still see the old page (it did, on a loaded machine)."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout).until(lambda d: ok(d.current_url))
    assert ok(driver.current_url), driver.current_url


def by_css(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, selector))


def series_points(svg: Any) -> dict[str, int]:
    """Each polyline of a chart: its series name and how many points it draws."""
    return {line.get_attribute("data-series"): len(line.get_attribute("points").split())
            for line in svg.find_elements("css selector", "polyline")}


def visible_rows(driver: Any) -> list[Any]:
    return [row for row in by_css(driver, "#results tbody tr") if row.is_displayed()]


def loaded(results_dir: Path, name: str) -> nhbench.Result:
    return nhbench.load_result(results_dir / name)


# ---- the list --------------------------------------------------------------------------------


def test_list_has_every_result_the_campaign_and_the_bad_file(
        driver: Any, browse: str, results_dir: Path) -> None:
    load(driver, browse, "list")
    rows = by_css(driver, "#results tbody tr")
    kinds = sorted((row.get_attribute("data-kind"), row.get_attribute("data-path"))
                   for row in rows)
    assert kinds == [("campaign", "sweep"), ("error", "broken.json"),
                     ("result", "multi.json"), ("result", "refused.json"),
                     ("result", "runs/timeline.json"), ("result", "single.json")]
    # The unreadable file is listed last, with the loader's one-line reason.
    assert rows[-1].get_attribute("data-path") == "broken.json"
    assert "not JSON" in rows[-1].text and "line 1 column 2" in rows[-1].text
    single = loaded(results_dir, "single.json")
    row = next(r for r in rows if r.get_attribute("data-path") == "single.json")
    cells = [cell.text for cell in row.find_elements("css selector", "td")]
    assert cells[1] == "single"
    assert cells[4:9] == [format_rate(single.requested_rps), format_rate(single.achieved_rps),
                          format_latency(single.latency.p(50)),
                          format_latency(single.latency.p(99)), "0"]
    assert cells[9] == "OK"
    refused = next(r for r in rows if r.get_attribute("data-path") == "refused.json")
    assert "fail" in refused.get_attribute("class").split()
    assert refused.find_elements("css selector", "td")[9].text.startswith("FAILED")


def test_browse_walks_the_directory_as_it_starts(results_dir: Path, tmp_path: Path) -> None:
    # `nhbench browse` reads the directory (and writes its index) as it starts, before any
    # page is asked for, so that the first list finds its rows made.
    cache = tmp_path / "cache"
    with _browse_process(results_dir, {**_env(), "XDG_CACHE_HOME": str(cache)}) as url:
        deadline = time.monotonic() + 60
        while not list(cache.rglob("*.json")) and time.monotonic() < deadline:
            time.sleep(0.05)
        indexes = list(cache.rglob("*.json"))
        assert len(indexes) == 1, "no index written before the first request"
        entries = json.loads(indexes[0].read_text())["entries"]
        assert {"single.json", "multi.json", "refused.json", "runs/timeline.json",
                "broken.json", "sweep"} <= set(entries)
        with urllib.request.urlopen(url, timeout=60) as response:
            page = response.read().decode()
        assert 'data-path="runs/timeline.json"' in page and 'data-path="broken.json"' in page


def test_filter_hides_the_rows_without_the_words(driver: Any, browse: str) -> None:
    from selenium.webdriver.common.keys import Keys

    load(driver, browse)
    box = by_css(driver, "#filter")[0]
    assert len(visible_rows(driver)) == 6
    box.send_keys("multi")
    assert [r.get_attribute("data-path") for r in visible_rows(driver)] == ["multi.json"]
    assert by_css(driver, "#shown")[0].text == "1 of 6"
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys("ok 127.0.0.1")  # every word must match: the three runs that passed
    paths = sorted(r.get_attribute("data-path") for r in visible_rows(driver))
    assert paths == ["multi.json", "runs/timeline.json", "single.json"]
    driver.save_screenshot(str(SCREENSHOTS / "nhbench-browse-filtered.png"))
    box.send_keys(Keys.CONTROL, "a", Keys.DELETE)
    assert len(visible_rows(driver)) == 6
    assert driver.get_log("browser") == []


# ---- one result ------------------------------------------------------------------------------


def test_result_page_headline_and_distribution(
        driver: Any, browse: str, results_dir: Path) -> None:
    result = loaded(results_dir, "single.json")
    load(driver, browse + "result/single.json", "single")
    assert by_css(driver, "#verdict")[0].text == "OK"
    figures = by_css(driver, "#figures .figure .value")
    assert figures[0].text == format_latency(result.latency.p(99))
    assert figures[1].text == f"{format_rate(result.achieved_rps)} rps"
    assert figures[2].text == f"{format_rate(result.requested_rps)} rps"
    (svg,) = by_css(driver, "#distribution svg")
    expected = {
        "CO-corrected (scheduled_to_response)": points_per_nine_curve(result.latency.count),
        "uncorrected (request_to_response)": points_per_nine_curve(
            result.stat("benchmark_http_client.request_to_response").count),
    }
    assert series_points(svg) == expected
    ticks = {t.text for t in svg.find_elements("css selector", "text.tick")}
    assert {"0%", "90%", "99%"} <= ticks
    # No timeline section without --stats-interval, no worker table with one worker.
    assert by_css(driver, "#timeline") == [] and by_css(driver, "#workers") == []
    counters = {row.find_elements("css selector", "td")[0].text:
                row.find_elements("css selector", "td")[1].text
                for row in by_css(driver, "#counters tbody tr")}
    assert counters == {name: f"{value:,}" for name, value in result.counters.nonzero().items()}
    options = {row.find_element("css selector", "th").text for row in by_css(driver, "#options tr")}
    assert {"uri", "rps", "connections", "label"} <= options


def test_result_page_of_a_two_worker_run(driver: Any, browse: str, results_dir: Path) -> None:
    result = loaded(results_dir, "multi.json")
    load(driver, browse + "result/multi.json", "multi")
    rows = [[cell.text for cell in row.find_elements("css selector", "td")]
            for row in by_css(driver, "#workers tbody tr")]
    assert [row[0] for row in rows] == ["worker_0", "worker_1"]
    assert sum(int(row[1].replace(",", "")) for row in rows) == result.succeeded
    assert by_css(driver, "#figures .figure .value")[2].text == \
        f"{format_rate(result.requested_rps)} rps"


def test_result_page_with_a_timeline(driver: Any, browse: str, results_dir: Path) -> None:
    result = loaded(results_dir, "runs/timeline.json")
    assert len(result.timeline) >= 5
    load(driver, browse + "result/runs/timeline.json", "timeline")
    latency_chart, rate_chart = by_css(driver, "#timeline svg")
    with_latency = sum(1 for record in result.timeline if record.p50 is not None)
    assert series_points(latency_chart) == {name: with_latency
                                            for name in ("p50", "p90", "p99", "max")}
    assert series_points(rate_chart) == {"responses/s": len(result.timeline),
                                         "errors/s": len(result.timeline)}


def test_a_failed_run_and_an_unreadable_file(driver: Any, browse: str) -> None:
    load(driver, browse + "result/refused.json", "refused")
    # The default failure predicate (a connection failure) fires first.
    assert by_css(driver, "#verdict")[0].text.startswith("FAILED: ")
    (svg,) = by_css(driver, "#distribution svg")
    assert "no data" in svg.text
    # An unreadable file gets a page with its reason (Chromium logs the 422 status as a
    # console error, which is the browser reporting the status, not a fault of the page).
    driver.get(browse + "result/broken.json")
    assert "not JSON" in by_css(driver, "#error-message")[0].text
    driver.get_log("browser")


@pytest.mark.parametrize("path", ["/result/../broken.json", "/result/%2e%2e/%2e%2e/etc/passwd",
                                  "/files/..%2f..%2fetc/passwd", "/files/.hidden.json",
                                  "/result//etc/passwd"])
def test_paths_outside_the_directory_are_refused(browse: str, results_dir: Path,
                                                 path: str) -> None:
    # Sent as they are (a browser would normalise the dots away before asking).
    import http.client

    (results_dir / ".hidden.json").write_text("{}")
    host, port = browse[len("http://"):-1].split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    connection.request("GET", path)
    response = connection.getresponse()
    body = response.read().decode()
    connection.close()
    assert response.status == 404, body
    assert "root:" not in body


def test_a_foreign_host_header_is_refused(browse: str) -> None:
    import http.client

    host, port = browse[len("http://"):-1].split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    connection.request("GET", "/", headers={"Host": f"attacker.example:{port}"})
    response = connection.getresponse()
    response.read()
    connection.close()
    assert response.status == 403


# ---- comparison ------------------------------------------------------------------------------


def test_compare_three_runs(driver: Any, browse: str, results_dir: Path) -> None:
    load(driver, browse)
    chosen = ["single.json", "multi.json", "runs/timeline.json"]
    button = by_css(driver, "#compare")[0]
    assert not button.is_enabled()
    for path in chosen:
        by_css(driver, f'#results input[value="{path}"]')[0].click()
    assert button.is_enabled()
    assert by_css(driver, "#selected")[0].text == "3 selected"
    button.click()
    # The click starts the navigation; the new page is there once the URL says so.
    wait_for_url(driver, lambda url: "/compare?" in url)
    assert driver.get_log("browser") == []
    driver.save_screenshot(str(SCREENSHOTS / "nhbench-browse-compare.png"))
    # Rows are in the list's order (newest first), which is the order of the ids.
    names = [row.find_elements("css selector", "td")[0].text
             for row in by_css(driver, "#runs tbody tr")]
    assert sorted(names) == ["multi", "single", "timeline"]
    results = {name: loaded(results_dir, path) for name, path in
               zip(("single", "multi", "timeline"), chosen, strict=True)}
    (svg,) = by_css(driver, "#distribution svg")
    assert series_points(svg) == {name: points_per_nine_curve(results[name].latency.count)
                                  for name in names}
    header = [cell.text for cell in by_css(driver, "#deltas thead th")]
    assert header == ["", names[0], names[1], f"Δ vs {names[0]}", names[2],
                      f"Δ vs {names[0]}"]
    rows = {row.find_element("css selector", "th").text:
            [cell.text for cell in row.find_elements("css selector", "td")]
            for row in by_css(driver, "#deltas tbody tr")}
    assert list(rows) == ["requested rps", "achieved rps", "p50", "p90", "p99", "p99.9", "max",
                          "mean", "errors", "error rate", "duration"]
    base, other = results[names[0]], results[names[1]]
    difference = other.requested_rps - base.requested_rps
    assert rows["requested rps"][:3] == [
        format_rate(base.requested_rps), format_rate(other.requested_rps),
        f"{'+' if difference >= 0 else '-'}{format_rate(abs(difference))} "
        f"({difference / base.requested_rps:+.1%})"]
    assert rows["errors"][2] == "+0"
    assert rows["p99"][0] == format_latency(base.latency.p(99))
    # The statistical verdict of each run against the first: the same object as
    # nhbench compare and Result.compare give (seeded, so the same text).
    verdicts = {row.find_element("css selector", "th").text:
                [cell.text for cell in row.find_elements("css selector", "td")]
                for row in by_css(driver, "#verdicts tbody tr")}
    assert list(verdicts) == ["p50", "p90", "p99", "p99.9", "mean", "rate", "error_rate"]
    expected = [results[name].compare(base) for name in names[1:]]
    for statistic, cells in verdicts.items():
        assert cells == [text for comparison in expected for text in
                         (comparison[statistic].interval_text(), comparison[statistic].verdict)]


def test_compare_refuses_one_or_too_many(driver: Any, browse: str) -> None:
    driver.get(browse + "compare?id=single.json")
    assert "compare 2 to 8 results (1 selected)" in by_css(driver, "#error-message")[0].text
    driver.get(browse + "compare?" + "&".join(["id=single.json"] * 9))
    assert "(9 selected)" in by_css(driver, "#error-message")[0].text
    driver.get_log("browser")


# ---- a campaign ------------------------------------------------------------------------------


def test_campaign_page_lists_steps_and_links_its_report(
        driver: Any, browse: str, results_dir: Path) -> None:
    campaign = nhbench.load_campaign(results_dir / "sweep")
    load(driver, browse + "campaign/sweep", "campaign")
    rows = by_css(driver, "#steps tbody tr")
    assert len(rows) == len(campaign.steps) == 2
    first = rows[0].find_elements("css selector", "td")
    assert first[2].text == "100" and first[4].text == format_rate(campaign.steps[0].achieved_rps)
    report = by_css(driver, "#report-link")[0].get_attribute("href")
    assert report.endswith("/files/sweep/report.html")
    # A step's own page, then the campaign's report.html served as it is.
    rows[1].find_element("css selector", "a").click()
    wait_for_url(driver, lambda url: url.endswith("/result/sweep/" + campaign.steps[1].directory
                                                  + "/result.json"))
    assert by_css(driver, "#distribution svg")
    assert driver.get_log("browser") == []
    load(driver, report, "campaign-report")
    assert driver.title.startswith("nhbench sweep")


# ---- nhbench report RESULT.json -o page.html -------------------------------------------------


def test_report_writes_a_self_contained_page(driver: Any, results_dir: Path,
                                             tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    proc = cli("report", str(results_dir / "runs" / "timeline.json"), "-o", str(page))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    text = page.read_text()
    # Nothing to fetch: no external URL in a src or href, and no script on this page.
    assert not re.search(r'(src|href)="(https?:)?//', text) and "<script" not in text
    load(driver, page.as_uri(), "report-file")
    result = loaded(results_dir, "runs/timeline.json")
    assert by_css(driver, "nav") == []  # no links back into a browser that is not there
    (svg,) = by_css(driver, "#distribution svg")
    assert series_points(svg)["CO-corrected (scheduled_to_response)"] == \
        points_per_nine_curve(result.latency.count)
    assert len(by_css(driver, "#timeline svg")) == 2
    # Without -o the page goes to stdout, byte for byte the same.
    again = cli("report", str(results_dir / "runs" / "timeline.json"))
    assert again.returncode == 0 and again.stdout == text


# ---- the command -----------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "needle", "status"), [
    (["/nonexistent-results"], "is not a directory", 2),
    (["{dir}", "--listen", "nonsense"], "--listen:", 2),
    (["{dir}", "--listen", "127.0.0.1:{busy}"], "--listen: cannot listen on", 1),
])
def test_browse_bad_input_is_one_line(args: list[str], needle: str, status: int,
                                      tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = cli("browse", *(a.format(dir=tmp_path, busy=port) for a in args), timeout=30)
    assert proc.returncode == status, proc.stderr
    assert proc.stderr.count("\n") == 1 and needle in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_browse_stops_on_sigterm_and_serves_an_empty_directory(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "nhbench", "browse", str(tmp_path), "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
        stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        from urllib.request import urlopen

        with urlopen(url, timeout=30) as response:  # noqa: S310 - our own loopback server
            body = response.read().decode()
        assert "No results here yet" in body
        proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        proc.communicate(timeout=10)
        assert proc.returncode == 0
        # The wait loop wakes every 0.5 s: a generous bound, not a timing measurement.
        assert time.monotonic() - started < 5
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_report_with_a_directory_refuses_output(tmp_path: Path) -> None:
    proc = cli("report", str(tmp_path), "-o", str(tmp_path / "x.html"))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "--output: only for a result file" in proc.stderr
    assert not (tmp_path / "x.html").exists()


# ---- what a directory holds (no browser) -----------------------------------------------------


def test_catalogue_skips_hidden_and_deep_files_and_lists_odd_ones(
        results_dir: Path, tmp_path: Path) -> None:
    from nhbench.browse import MAX_DEPTH, Catalogue, error_page, list_page

    source = (results_dir / "single.json").read_text()
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "hidden.json").write_text(source)
    (tmp_path / ".hidden.json").write_text(source)
    deep = tmp_path.joinpath(*[f"d{i}" for i in range(MAX_DEPTH + 1)])
    deep.mkdir(parents=True)
    (deep / "too-deep.json").write_text(source)
    (deep.parent / "deepest-listed.json").write_text(source)
    # Valid to the loader, but without the "global" entry every summary reads.
    (tmp_path / "no-global.json").write_text(json.dumps(
        {"options": {"uri": "http://127.0.0.1/"}, "results": []}))
    (tmp_path / "list.json").write_text("[1, 2]")
    listing = Catalogue(tmp_path).scan()
    by_path = {entry.path: entry for entry in listing.entries}
    assert sorted(by_path) == sorted(["list.json", "no-global.json",
                                      "/".join(deep.parent.relative_to(tmp_path).parts)
                                      + "/deepest-listed.json"])
    assert by_path["list.json"].kind == "error"
    assert "not a result" in by_path["list.json"].error
    assert by_path["no-global.json"].kind == "error"
    assert "no-global.json" in by_path["no-global.json"].error
    assert listing.notes == [f"directories more than {MAX_DEPTH} levels deep were not searched"]
    page = list_page(listing, str(tmp_path))
    assert page.count('data-kind="error"') == 2 and "not searched" in page
    assert "<script>alert" not in error_page(404, "<script>alert(1)</script>")


def test_catalogue_of_a_campaign_directory_itself(results_dir: Path) -> None:
    from nhbench.browse import Catalogue, campaign_page

    catalogue = Catalogue(results_dir / "sweep")
    listing = catalogue.scan()
    kinds = sorted(entry.kind for entry in listing.entries)
    assert kinds == ["campaign", "result", "result"]  # the campaign, then its two steps
    assert listing.notes == ["this directory is itself a sweep campaign"]
    page = campaign_page(catalogue.manifest("."), ".", has_report=True)
    assert page.count('name="id"') == 2 and "/files/report.html" in page


def test_report_refuses_what_is_not_a_result(results_dir: Path, tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    proc = cli("report", str(results_dir / "broken.json"), "-o", str(page))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "not JSON" in proc.stderr and "Traceback" not in proc.stderr
    assert not page.exists()
    proc = cli("report", str(results_dir / "single.json"), "-o", str(tmp_path / "no" / "x.html"))
    assert proc.returncode == 2 and proc.stderr.startswith("nhbench: error: --output:")


def test_a_result_without_histograms_is_drawn_from_its_percentiles(
        results_dir: Path, tmp_path: Path) -> None:
    # What Nighthawk's and Fortio's files are like: percentiles, no encoded histogram. Our
    # json without its nhbench entry (where the encodings live) is a Nighthawk file.
    from nhbench.browse import result_page

    data = json.loads((results_dir / "single.json").read_text())
    for entry in data["results"]:
        entry["user_defined_outputs"] = []
    (tmp_path / "bare.json").write_text(json.dumps(data))
    result = nhbench.load_result(tmp_path / "bare.json")
    assert not result.latency.has_histogram
    page = result_page(result, "bare.json")
    points = {name: len(text.split()) for text, name in
              re.findall(r'<polyline points="([^"]*)"[^>]*data-series="([^"]*)"', page)}
    reported = [p for p in result.latency.percentiles if p.percentile < 1]
    assert len(reported) >= 5
    assert points["CO-corrected (scheduled_to_response)"] == len(reported)


def test_nighthawk_and_fortio_files_are_listed_and_drawn(tmp_path: Path) -> None:
    # Files the other tools wrote (tests/data: Nighthawk's own test output and a file written
    # by fortio 1.66.5) are results in the list, and their pages draw the percentiles they
    # report (neither carries an HdrHistogram).
    from nhbench.browse import Catalogue, result_page

    data = Path(__file__).parent / "data"
    (tmp_path / "nighthawk.json").write_bytes(
        (data / "nighthawk" / "output_formatter.medium.proto.gold").read_bytes())
    (tmp_path / "fortio.json").write_bytes(
        (data / "fortio" / "fortio-1.66.5-load.json").read_bytes())
    listing = Catalogue(tmp_path).scan()
    by_path = {entry.path: entry for entry in listing.entries}
    assert sorted(by_path) == ["fortio.json", "nighthawk.json"]
    assert all(entry.kind == "result" for entry in by_path.values()), by_path
    assert by_path["nighthawk.json"].url == "https://www.google.com/"
    assert by_path["fortio.json"].url.startswith("http://127.0.0.1:")
    for name in ("nighthawk.json", "fortio.json"):
        result = nhbench.load_result(tmp_path / name)
        page = result_page(result, name)
        series = re.findall(r'<polyline points="([^"]*)"', page)
        assert series and all(len(points.split()) >= 5 for points in series), name
        # Neither tool measures from the scheduled time: the headline is their
        # request_to_response, said to be uncorrected, and its p99 is a value (for
        # Nighthawk's file the next point it wrote, p99.0625, also said).
        assert "p99 (not CO-corrected)" in page and 'id="not-corrected"' in page
        assert by_path[name].p99 is not None and by_path[name].p50 is not None
    assert 'id="not-exact"' in result_page(nhbench.load_result(tmp_path / "nighthawk.json"),
                                           "nighthawk.json")
