"""``nhbench ui`` in headless Chromium: start a run from the form, watch its live charts gain
points while it runs (counted at two moments), stop it, open its result, find it in the
list and compare it with an earlier run.

``nhbench ui`` runs as a subprocess over a directory holding one earlier run; the target is
our test server. The short version (a 20 s run stopped after a few seconds) runs in CI;
the long one (a 2 minute run watched for 40 s, marked slow, run with NHB_UI_MARATHON=1)
checks that the stream keeps flowing. A screenshot of the live page goes to
/tmp/nhbench-ui-live.png (docs/img/ui-live.png is one).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.peers import chromedriver_binary, chromium_binary
from support.ui import UI

import nhbench

pytestmark = pytest.mark.timeout(400)


@pytest.fixture(scope="module")
def server() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer() as test_server:
        yield test_server


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory, server: nhbench.TestServer) -> Iterator[UI]:
    root = tmp_path_factory.mktemp("ui")
    earlier = nhbench.run(server.url, rps=100, duration="1s", connections=2,
                          label=["earlier run"])
    (root / "earlier.json").write_text(earlier.render("json"))
    served = UI(root)
    yield served
    served.stop()


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
                     "--disable-dev-shm-usage", "--window-size=1300,1000"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(options=options, service=Service(chromedriver))
    browser.set_page_load_timeout(60)
    yield browser
    browser.quit()


def css(driver: Any, selector: str) -> list[Any]:
    return list(driver.find_elements("css selector", selector))


def points(driver: Any, series: str) -> int:
    value = css(driver, f"#line-{series}")[0].get_attribute("points").strip()
    return len(value.split()) if value else 0


def shown(driver: Any, selector: str) -> bool:
    """Whether an element matching `selector` is displayed, asked once: the stop reloads the
    live page, so two queries in a row may see two different pages."""
    from selenium.common.exceptions import StaleElementReferenceException

    try:
        return any(element.is_displayed() for element in css(driver, selector))
    except StaleElementReferenceException:
        return False


def wait(driver: Any, ok: Any, timeout: float) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout, poll_frequency=0.1).until(lambda d: ok(d))


@pytest.mark.parametrize(("duration", "watch"), [
    ("20s", 2.0),
    # The marathon: a person watching a long run. Only with NHB_UI_MARATHON=1 (it takes
    # minutes), so CI runs the short one.
    pytest.param("120s", 40.0, marks=[
        pytest.mark.slow,
        pytest.mark.skipif(os.environ.get("NHB_UI_MARATHON") != "1",
                           reason="the long browser run: NHB_UI_MARATHON=1")]),
], ids=["short", "long"])
def test_start_watch_stop_list_and_compare(driver: Any, ui: UI, server: nhbench.TestServer,
                                           duration: str, watch: float) -> None:
    base = f"http://127.0.0.1:{ui.port}"
    driver.get(base + "/")
    css(driver, "#new-run")[0].click()
    wait(driver, lambda d: d.current_url.endswith("/run"), 10)
    label = f"browser run {duration}"
    for field, value in (("uri", server.url), ("rps", "200"), ("connections", "2"),
                         ("duration", duration), ("stats_interval", "0.2s"),
                         ("label", label)):
        element = css(driver, f"#{field}")[0]
        element.clear()
        element.send_keys(value)
    css(driver, "#start")[0].click()
    wait(driver, lambda d: "/runs/" in d.current_url, 10)
    # The charts gain points as the intervals arrive, while the run goes on.
    wait(driver, lambda d: points(d, "rps") >= 2, 20)
    first = points(driver, "rps")
    time.sleep(watch)
    second = points(driver, "rps")
    assert second >= first + watch / 0.2 / 3, (first, second)
    # Both charts draw every interval (another may have arrived since the count).
    assert points(driver, "p99") >= second
    assert css(driver, "#state")[0].text == "running"
    assert int(css(driver, "#points")[0].text.split()[0]) >= second
    driver.save_screenshot("/tmp/nhbench-ui-live.png")
    css(driver, "#stop")[0].click()
    # The stop's POST comes back to the live page, whose stream ends with the result.
    wait(driver, lambda d: shown(d, "#result-link"), 30)
    assert css(driver, "#state")[0].text.startswith("done")
    css(driver, "#result-link")[0].click()
    wait(driver, lambda d: "/result/" in d.current_url, 10)
    assert label in driver.find_element("css selector", "h1").text
    # The list has it; tick it and the earlier run, compare.
    driver.get(base + "/")
    rows = {row.get_attribute("data-path"): row for row in css(driver, "#results tbody tr")}
    ours = [path for path, row in rows.items() if label in row.text]
    assert len(ours) == 1, list(rows)
    for path in (ours[0], "earlier.json"):
        rows[path].find_element("css selector", "input[type=checkbox]").click()
    css(driver, "#compare")[0].click()
    wait(driver, lambda d: "/compare?" in d.current_url, 10)
    body = driver.find_element("css selector", "body").text
    assert label in body and "earlier run" in body
    assert driver.get_log("browser") == []
    result = nhbench.load_result(Path(ui_root(ui)) / ours[0])
    assert result.interrupted and result.duration < float(duration[:-1])


def ui_root(ui: UI) -> str:
    args = ui.proc.args
    assert isinstance(args, list)
    return str(args[args.index("ui") + 1])


def test_the_ui_on_fortios_echo_port(driver: Any, tmp_path: Path) -> None:
    """``nhbench fortio server`` serves the UI through its HTTP echo port (the C server
    forwards /fortio/): the form, the live page and its stream, the stop and the result all
    load through that port, and every link stays under /fortio/, which alone reaches the
    UI there. The run's target is the same port's echo."""
    from support.ui import FortioServer

    fortio = FortioServer(tmp_path)
    try:
        base = f"http://127.0.0.1:{fortio.port}/fortio/"
        assert fortio.ui_url == base
        driver.get(base)
        css(driver, "#new-run")[0].click()
        wait(driver, lambda d: d.current_url == base + "run", 10)
        for field, value in (("uri", f"http://127.0.0.1:{fortio.port}/echo"), ("rps", "100"),
                             ("connections", "2"), ("duration", "20s"),
                             ("stats_interval", "0.2s"), ("label", "shared port")):
            element = css(driver, f"#{field}")[0]
            element.clear()
            element.send_keys(value)
        css(driver, "#start")[0].click()
        wait(driver, lambda d: d.current_url.startswith(base + "runs/"), 10)
        wait(driver, lambda d: points(d, "rps") >= 2, 20)
        first = points(driver, "rps")
        time.sleep(2.0)
        assert points(driver, "rps") >= first + 3
        css(driver, "#stop")[0].click()
        wait(driver, lambda d: shown(d, "#result-link"), 30)
        css(driver, "#result-link")[0].click()
        wait(driver, lambda d: d.current_url.startswith(base + "result/"), 10)
        assert "shared port" in driver.find_element("css selector", "h1").text
        assert driver.get_log("browser") == []
    finally:
        stderr = fortio.stop()
    # The run's requests were the echo's, on the port that served the UI.
    stats = json.loads(stderr.rsplit("stats ", 1)[1].splitlines()[0])
    assert stats["status"]["200"] >= 200, stats
