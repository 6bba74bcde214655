"""The client's accounting identity, in one place for the hostile suites and
test_client_hardening.py.

Every request the sequencer released ends exactly once (docs/engine.md): as a response (by
status class), or as an error (a failed connection, a reset or protocol error, a request
time-out, a request given up after the retry limit), or, when the run ended first, as a
cancellation. Releases the open loop dropped for lack of room (``benchmark.pool_overflow``)
were never released and are not in the sum.
"""

from __future__ import annotations

from collections.abc import Mapping

RESPONSES = (
    "benchmark.http_1xx", "benchmark.http_2xx", "benchmark.http_3xx", "benchmark.http_4xx",
    "benchmark.http_5xx", "benchmark.http_xxx",
)
ERRORS = (
    "benchmark.pool_connection_failure", "benchmark.stream_resets", "benchmark.request_timeout",
    # Added by the hardening of the client; absent from older builds, where it counts as zero.
    "upstream_rq_retry_limit_exceeded",
)
CANCELLED = ("upstream_rq_cancelled",)


def get(counters: Mapping[str, int], name: str) -> int:
    """A counter's value; zero when this build does not know the counter at all.

    ``Result.counters`` raises KeyError for an unknown name (so typos are noticed) and a
    plain dict from JSON leaves zero counters out; ``Mapping.get`` covers both."""
    return int(counters.get(name, 0) or 0)


def responses(counters: Mapping[str, int]) -> int:
    return sum(get(counters, name) for name in RESPONSES)


def errors(counters: Mapping[str, int]) -> int:
    return sum(get(counters, name) for name in ERRORS)


def accounting(counters: Mapping[str, int]) -> dict[str, int]:
    """The identity's terms, for assertion messages."""
    return {
        "released": get(counters, "sequencer.released"),
        "responses": responses(counters),
        "errors": errors(counters),
        "cancelled": sum(get(counters, name) for name in CANCELLED),
        **{name: get(counters, name) for name in (*RESPONSES, *ERRORS, *CANCELLED,
                                                  "benchmark.pool_overflow", "upstream_rq_total",
                                                  "upstream_rq_retry", "upstream_cx_total",
                                                  "upstream_cx_protocol_error")
           if get(counters, name)},
    }


def assert_accounting(counters: Mapping[str, int]) -> None:
    """released = responses + errors + cancelled, exactly."""
    terms = accounting(counters)
    assert terms["released"] == terms["responses"] + terms["errors"] + terms["cancelled"], terms
