"""The result browser shows each result's validity verdict (docs/trust.md "Validity";
docs/outputs.md "The result browser"), over HTTP from a real ``nhbench browse``: the list's
validity column, the result page's badge and reasons, the campaign page's step column, and
the comparison page, where a run's validity must not be read as the comparison's verdict.

The results are real runs: an invalid one (one connection to a server that delays each
response by 5 ms cannot carry 2,000 requests per second: its releases are blocked), a run at
a rate its connections carry, the same run's JSON with its validity removed (a file from
before results carried it), and a sweep whose one step is the invalid run.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

import nhbench
from tests.support.cli import cli_env, nhbench_cli

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("validity")
    with nhbench.TestServer(static_delay="5ms") as slow:
        invalid = nhbench.run(slow.url, rps=2000, duration="1s", connections=1,
                              label=["starved"])
        # Calm by construction: its own process, ahead of the host's other work
        # (SCHED_FIFO where allowed), and connections enough that a response the busy host
        # delays past the next release (50 ms; the server is no real-time process) does not
        # block it. Made in this process over one connection, beside 3 CPU hogs and the
        # other test worker, the run waited for its CPU 34-79 % of the run and was invalid
        # 10 times in 10; in real time over one connection, once 2 of 20 releases found it busy.
        calm_file = directory / "calm.json"
        made = subprocess.run(
            [*_calm_prefix(), sys.executable, "-m", "nhbench", "run", slow.url, "--rps", "20",
             "--duration", "1s", "--connections", "4", "--label", "calm", "--output-format",
             "json", "--output", str(calm_file)],
            capture_output=True, text=True, timeout=60, env=cli_env(),
            stdin=subprocess.DEVNULL, check=False)
        assert made.returncode == 0, made.stderr
        calm = nhbench.load_result(calm_file)
        sweep = nhbench_cli("sweep", slow.url, "--steps", "2000", "--duration", "1s",
                            "--cooldown", "0", "--connections", "1", "--no-mpstat", "--out",
                            str(directory / "sweep"), "--label", "campaign")
        assert sweep.returncode == 0, sweep.stderr
    assert invalid.validity is not None and invalid.validity.verdict == "invalid"
    assert calm.validity is not None
    (directory / "invalid.json").write_text(invalid.render("json"))
    # A file whose reason is markup (a hostile or careless writer): shown as text.
    checks = [check.model_copy(update={"reason": _HOSTILE}) if check.name == "blocked"
              else check for check in invalid.validity.checks]
    hostile = invalid.model_copy(update={"validity": invalid.validity.model_copy(
        update={"checks": checks})})
    (directory / "hostile.json").write_text(hostile.render("json"))
    # The same run as an older nhbench wrote it: no validity key in its extension.
    text = calm.render("json")
    start = text.index('"validity"')
    old = json.loads(text)
    assert _drop_validity(old), text[start:start + 80]
    (directory / "old.json").write_text(json.dumps(old))
    assert nhbench.load_result(directory / "old.json").validity is None
    return directory


def _calm_prefix() -> tuple[str, ...]:
    """A command prefix that gives a run its CPU whenever it wants it: the real-time class
    (a mostly sleeping run at 20 requests per second), or where that is not allowed a
    priority above the host's (nice -10; nice runs the command as it is where even that is
    not)."""
    chrt = ("chrt", "--fifo", "1")
    if shutil.which("chrt") and subprocess.run([*chrt, "true"], capture_output=True,
                                               check=False).returncode == 0:
        return chrt
    return ("nice", "-n", "-10")


_HOSTILE = '<script>alert(1)</script><img src=x onerror="alert(2)">'


def _drop_validity(document: object) -> bool:
    """Remove every "validity" key (it is inside the nhbench extension); whether one was."""
    found = False
    if isinstance(document, dict):
        if "validity" in document:
            del document["validity"]
            found = True
        for value in document.values():
            found = _drop_validity(value) or found
    elif isinstance(document, list):
        for value in document:
            found = _drop_validity(value) or found
    return found


@pytest.fixture(scope="module")
def browse(root: Path) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "nhbench", "browse", str(root), "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(),
        stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", url), url
    yield url
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 0 and "Traceback" not in stderr, stderr


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 - our server
        assert response.status == 200
        return str(response.read().decode())


def _row(page: str, path: str) -> str:
    match = re.search(r'<tr [^>]*data-path="' + re.escape(path) + r'"[^>]*>(.*?)</tr>', page,
                      re.S)
    assert match, path
    return match.group(1)


def _cells(row: str) -> list[tuple[str, str]]:
    """(class, text) of each cell of a row."""
    return [(cls or "", html.unescape(re.sub(r"<[^>]+>", "", text)).strip())
            for cls, text in re.findall(r'<td(?: class="([^"]*)")?[^>]*>(.*?)</td>', row, re.S)]


def test_the_list_has_a_validity_column(browse: str, root: Path) -> None:
    page = _get(browse)
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", page.split("<tbody>")[0])
    assert headers[-3:] == ["verdict", "validity", "file"]
    rows = {path: _cells(_row(page, path))
            for path in ("invalid.json", "calm.json", "old.json", "sweep")}
    for path, cells in rows.items():
        assert len(cells) == len(headers), (path, cells)
    assert rows["invalid.json"][10] == ("validity validity-invalid", "invalid")
    # The calm run's own verdict, which a column stuck on "invalid" would not show.
    calm = nhbench.load_result(root / "calm.json").validity
    assert calm is not None and calm.verdict != "invalid", calm
    assert rows["calm.json"][10] == (f"validity validity-{calm.verdict}", calm.verdict)
    assert rows["old.json"][10] == ("validity", "-")
    # A campaign's row: the verdict of the step whose numbers it shows.
    assert rows["sweep"][10] == ("validity validity-invalid", "invalid")
    # The run's verdict (its own outcome) is a different column, still there.
    assert rows["invalid.json"][9][1] != "invalid"
    # The filter finds the invalid rows by the word.
    assert 'data-search="' in page
    search = re.search(r'data-path="invalid.json" data-search="([^"]*)"', page)
    assert search and "invalid" in search.group(1).split()


def test_the_result_page_shows_the_badge_and_the_reasons(browse: str, root: Path) -> None:
    page = _get(browse + "result/invalid.json")
    result = nhbench.load_result(root / "invalid.json")
    assert result.validity is not None
    badge = re.search(r'<p class="validity" id="validity">Validity: <span class="badge '
                      r'validity-(\w+)">(\w+)</span>', page)
    assert badge and badge.groups() == ("invalid", "invalid")
    reasons = re.search(r'<ul id="validity-reasons">(.*?)</ul>', page, re.S)
    assert reasons
    shown = [html.unescape(item) for item in re.findall(r"<li>(.*?)</li>", reasons.group(1))]
    assert shown == result.validity.reasons
    assert any(reason.startswith("invalid: blocked: ") for reason in shown)
    # Right under the run's own verdict, and apart from it.
    assert page.index('id="verdict"') < page.index('id="validity"')


def test_a_result_without_a_verdict_says_it_was_not_assessed(browse: str) -> None:
    page = _get(browse + "result/old.json")
    assert 'id="validity">Validity: not assessed' in page
    assert "validity-reasons" not in page


def test_the_campaign_page_shows_each_steps_validity(browse: str) -> None:
    page = _get(browse + "campaign/sweep")
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", page)
    assert "validity" in headers
    assert re.search(r'<td class="validity-invalid">invalid</td>', page), page


def test_the_comparison_keeps_validity_apart_from_its_verdicts(browse: str) -> None:
    page = _get(browse + "compare?id=calm.json&id=invalid.json")
    runs = page.split('<table id="runs">')[1].split("</table>")[0]
    assert re.findall(r"<th>([^<]*)</th>", runs) == ["run", "time", "what", "verdict",
                                                      "validity", "file"]
    assert '<td class="validity validity-invalid">invalid</td>' in runs
    warning = re.search(r'<p class="warning" id="validity-warning">(.*?)</p>', page, re.S)
    assert warning and "starved (invalid)" in warning.group(1)
    # The statistical comparison's verdicts are its own words, never a validity's.
    table = page.split('<table id="verdicts">')[1].split("</table>")[0]
    verdicts = set(re.findall(r'<td class="verdict [^"]*">([^<]*)</td>', table))
    assert verdicts and verdicts <= {"regressed", "improved", "no significant change",
                                     "not tested"}, verdicts


def test_a_reason_that_is_markup_is_shown_as_text(browse: str) -> None:
    page = _get(browse + "result/hostile.json")
    assert _HOSTILE not in page and "<script>alert" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=" in page
