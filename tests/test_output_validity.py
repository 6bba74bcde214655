"""Which output formats carry the validity verdict (docs/trust.md "Validity", "Output
formats"): nhbench's JSON and YAML (its extension), the human report, and the Prometheus
exposition, as families of their own after Nighthawk's, read here by a real consumer
(prometheus_client's parser). Nighthawk's byte-for-byte formats and Fortio's exact shapes do
not: their part is checked to be unchanged by the verdict.

The result is a real run that is invalid for sure: one connection to a server that delays
each response by 5 ms cannot carry 2,000 requests per second.
"""

from __future__ import annotations

import pytest

import nhbench


@pytest.fixture(scope="module")
def invalid() -> nhbench.Result:
    with nhbench.TestServer(static_delay="5ms") as slow:
        result = nhbench.run(slow.url, rps=2000, duration="1s", connections=1)
    assert result.validity is not None and result.validity.verdict == "invalid"
    return result


def test_prometheus_carries_the_verdict_and_each_check(invalid: nhbench.Result) -> None:
    parser = pytest.importorskip("prometheus_client.parser")
    text = invalid.render("prometheus")
    families = {f.name: f for f in parser.text_string_to_metric_families(text)}
    state = {s.labels["verdict"]: s.value for s in families["nhbench_validity"].samples}
    assert state == {"valid": 0, "suspect": 0, "invalid": 1}
    assert invalid.validity is not None
    checks = {s.labels["check"]: s.value for s in families["nhbench_validity_check"].samples}
    tested = {c.name: c.verdict for c in invalid.validity.checks if c.verdict != "not tested"}
    assert checks == {name: {"valid": 0, "suspect": 1, "invalid": 2}[verdict]
                      for name, verdict in tested.items()}
    assert checks["blocked"] == 2
    # Nighthawk's families come first, exactly as without a verdict.
    bare = invalid.model_copy(update={"validity": None}).render("prometheus")
    assert "nhbench_validity" not in bare
    assert text.startswith(bare)


@pytest.mark.parametrize("name", ["dotted", "csv", "fortio", "experimental_fortio_pedantic",
                                  "nighthawk_human"])
def test_nighthawks_exact_formats_do_not_carry_it(invalid: nhbench.Result, name: str) -> None:
    text = invalid.render(name)
    assert "validity" not in text.lower()
    assert text == invalid.model_copy(update={"validity": None}).render(name)


def test_nhbench_formats_carry_it(invalid: nhbench.Result) -> None:
    again = nhbench.Result.model_validate_json(invalid.render("json"))
    assert again.validity is not None and again.validity.verdict == "invalid"
    assert "verdict: invalid" in invalid.render("yaml")
    assert "VALIDITY: INVALID" in invalid.render("human")
