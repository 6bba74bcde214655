"""The typed seam to C: what the core checks, at its boundaries, and what only Python checks.

docs/architecture.md ("Binding contract", "What C checks and why") lists every check on the
C side of the two configs. Pydantic owns the user-facing ranges; the C core
(``nhb_run_create_ex`` / ``nhb_server_create``) keeps only what protects memory, arithmetic
or its event loop, and the binding only what the conversion itself needs. These tests feed
``_core.ClientRun`` / ``_core.Server`` directly: each kept check accepts its limit and
refuses the next value with a ValueError naming the key; each removed range is still refused
by the options, with the user-facing message, and the core takes the value.

Nothing is started: constructing a ClientRun or a Server validates and allocates, and binds
or connects nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from nhbench import Options, OptionsError
from nhbench._core_config import client_core_config, server_core_config
from nhbench._run import load_core
from nhbench.options import make_options, make_server_options

pytestmark = pytest.mark.core

core = load_core()
URI = "http://127.0.0.1:9/"


def client(**over: Any) -> dict[str, Any]:
    """A valid ClientRun config (built by the seam itself) with `over` replacing keys."""
    config = client_core_config(Options(uri=URI), "127.0.0.1")
    config.update(over)
    return config


def server(**over: Any) -> dict[str, Any]:
    config = server_core_config(make_server_options())
    config.update(over)
    return config


def accepts(make: Callable[[dict[str, Any]], object], config: dict[str, Any]) -> None:
    # Constructed and dropped: nothing starts, so the destructor only frees.
    make(config)


def refuses(make: Callable[[dict[str, Any]], object], config: dict[str, Any], key: str) -> str:
    with pytest.raises(ValueError) as info:
        make(config)
    message = str(info.value)
    assert message.startswith(f"{key}:"), message
    assert "\n" not in message
    return message


def user_error(make: Callable[..., object], *args: Any, **kwargs: Any) -> str:
    with pytest.raises(OptionsError) as info:
        make(*args, **kwargs)
    return str(info.value)


# ---- ClientRun: the checks nhb_run_create_ex keeps ---------------------------------------------


def spec(request: bytes, body_size: int = 0) -> dict[str, Any]:
    return {"request": request, "body_size": body_size}


def test_client_request_must_not_be_empty() -> None:
    accepts(core.ClientRun, client(specs=[spec(b"x")]))
    refuses(core.ClientRun, client(specs=[spec(b"")]), "specs[0]")
    # The request set is the only way to say what to send: there must be one.
    refuses(core.ClientRun, client(specs=[]), "specs")
    config = client()
    del config["specs"]
    refuses(core.ClientRun, config, "specs")


def test_client_body_is_the_tail_of_the_request() -> None:
    request = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nbody"
    accepts(core.ClientRun, client(specs=[spec(request, len(request))]))
    message = refuses(core.ClientRun, client(specs=[spec(request, len(request) + 1)]), "specs[0]")
    assert "exceeds the request" in message


def test_client_worker_count_bounds() -> None:
    # One worker per `cpus` entry. The upper limit (NHB_MAX_WORKERS, 4096) is checked past
    # the limit only: 4096 workers at once allocate 4096 x 12 histograms of 216 KiB.
    accepts(core.ClientRun, client(cpus=[-1]))
    refuses(core.ClientRun, client(cpus=[]), "cpus")
    assert "1-4096 workers" in refuses(core.ClientRun, client(cpus=[-1] * 4097), "cpus")


def test_client_needs_a_connection() -> None:
    accepts(core.ClientRun, client(connections=1))
    refuses(core.ClientRun, client(connections=0), "connections")


@pytest.mark.parametrize("rps", [0.0, 1e-300, 1_000_000.0])
def test_client_rate_at_its_limits_is_accepted(rps: float) -> None:
    accepts(core.ClientRun, client(rps=rps))


@pytest.mark.parametrize("rps", [math.nextafter(1_000_000.0, math.inf), -1e-9, math.nan, math.inf])
def test_client_rate_past_its_limits_is_refused(rps: float) -> None:
    assert "0-1000000" in refuses(core.ClientRun, client(rps=rps), "rps")


def test_client_arrival_record_is_bounded_and_arrival_named() -> None:
    # The test hook's arrays are allocated with the run, 8 bytes an entry per worker.
    accepts(core.ClientRun, client(rps=10, arrival="poisson", record_arrivals=1000))
    refuses(core.ClientRun, client(rps=10, arrival="poisson", record_arrivals=10**8 + 1),
            "record_arrivals")
    refuses(core.ClientRun, client(rps=10, arrival="exponential"), "arrival")


@pytest.mark.parametrize("key", ["termination_predicates", "failure_predicates"])
def test_client_predicates_fill_a_fixed_array(key: str) -> None:
    accepts(core.ClientRun, client(**{key: [("benchmark.http_5xx", 5)] * 32}))
    assert "at most 32" in refuses(core.ClientRun, client(**{key: [("benchmark.http_5xx", 5)] * 33}), key)
    # A name becomes a counter index in the binding: an unknown one never reaches C.
    assert "unknown counter" in refuses(core.ClientRun, client(**{key: [("no.such", 1)]}), key)


@pytest.mark.parametrize("key", ["connect_timeout", "request_timeout", "drain_timeout", "start_delay",
                                 "stats_interval"])
def test_client_times_must_fit_nanoseconds(key: str) -> None:
    accepts(core.ClientRun, client(**{key: 0.0}))
    accepts(core.ClientRun, client(**{key: 1e10}))
    for bad in (math.nextafter(1e10, math.inf), -1e-9, math.inf, math.nan):
        refuses(core.ClientRun, client(**{key: bad}), key)


def test_client_duration_must_fit_signed_nanoseconds() -> None:
    accepts(core.ClientRun, client(duration=-1.0))  # no duration
    accepts(core.ClientRun, client(duration=5e9))
    refuses(core.ClientRun, client(duration=math.nextafter(5e9, math.inf)), "duration")
    refuses(core.ClientRun, client(duration=math.nan), "duration")


def test_client_stats_interval_is_off_or_at_least_a_millisecond() -> None:
    accepts(core.ClientRun, client(stats_interval=0.0))
    accepts(core.ClientRun, client(stats_interval=1e-3))
    assert "at least 1 ms" in refuses(core.ClientRun, client(stats_interval=1e-3 - 1e-9),
                                      "stats_interval")
    # The options hold a user to 0.1 s.
    assert "stats_interval: must be 0 (off) or at least 0.1 s" in user_error(
        make_options, URI, stats_interval="50ms")


# ---- ClientRun: ranges only the options hold -------------------------------------------------


def test_client_ranges_the_options_own_are_not_repeated_in_c() -> None:
    assert "connections: must be >= 1 and <= 1000000" in user_error(
        make_options, URI, connections=1_000_001)
    accepts(core.ClientRun, client(connections=1_000_001))
    assert "max_active_requests: must be >= 1" in user_error(
        make_options, URI, protocol="http2", max_active_requests=0)
    accepts(core.ClientRun, client(protocol="http2", h2_method="GET", h2_path="/",
                                   h2_authority=b"a", max_active_requests=0))  # 0: the default
    assert "timeout: must be > 0 and <= 3600" in user_error(make_options, URI, timeout=3601)
    accepts(core.ClientRun, client(connect_timeout=3601.0))
    assert "duration: must be > 0 and <= 31536000" in user_error(
        make_options, URI, duration=31_536_001)
    accepts(core.ClientRun, client(duration=31_536_001.0))
    # An empty :authority is silly but safe: nghttp2 sends it as given.
    accepts(core.ClientRun, client(protocol="http2", h2_method="GET", h2_path="/", h2_authority=b""))


# ---- Server: the checks nhb_server_create keeps -------------------------------------------------


@pytest.mark.parametrize("key", ["listen", "tcp_echo", "udp_echo"])
def test_server_address_lists_fill_a_fixed_array(key: str) -> None:
    def item(port: int) -> tuple[Any, ...]:
        return ("tcp", "127.0.0.1", port) if key == "listen" else ("127.0.0.1", port)

    accepts(core.Server, server(**{key: [item(20000 + i) for i in range(16)]}))
    assert "up to 16" in refuses(core.Server, server(**{key: [item(20000 + i) for i in range(17)]}), key)


def test_server_worker_count_bounds() -> None:
    accepts(core.Server, server(workers=4096))
    accepts(core.Server, server(workers=4096, cpus=[0, 1]))  # cycled over all of them
    refuses(core.Server, server(workers=0), "workers")
    refuses(core.Server, server(workers=4097), "workers")
    refuses(core.Server, server(workers=2**31 - 1, cpus=[0]), "workers")  # not cycled first


def test_server_payload_is_allocated_at_create() -> None:
    accepts(core.Server, server(max_payload_kb=0))  # 0 is a valid cap (options allow it)
    accepts(core.Server, server(max_payload_kb=262144))
    refuses(core.Server, server(max_payload_kb=262145), "max_payload_kb")


def test_server_header_limit_must_not_overflow_the_hpack_bound() -> None:
    accepts(core.Server, server(max_header_bytes=0))
    accepts(core.Server, server(max_header_bytes=2**62))
    refuses(core.Server, server(max_header_bytes=2**62 + 1), "max_header_bytes")


def test_server_stall_windows_that_would_spin_are_refused() -> None:
    accepts(core.Server, server(stall_every=100e-6, stall_for=99e-6))
    accepts(core.Server, server(stall_every=1.0, stall_for=1.0 - 1e-9))  # 1 ns shorter
    assert "at least 100 us" in refuses(core.Server, server(stall_every=99.999e-6, stall_for=1e-6),
                                        "stall_every")
    refuses(core.Server, server(stall_every=1.0, stall_for=1.0), "stall_for")
    # The options refuse both with the user's words.
    assert "stall_every: must be 0 (never) or at least 100us" in user_error(
        make_server_options, {"stall_every": "99us", "stall_for": "1us"})
    assert "must be shorter than" in user_error(
        make_server_options, {"stall_every": "1s", "stall_for": "1s"})


def test_server_certificate_names_fill_a_fixed_array() -> None:
    names = [f"n{i}.example" for i in range(17)]
    accepts(core.Server, server(tls={"self_signed": True, "san": names[:16]}))
    assert "at most 16" in refuses(core.Server, server(tls={"self_signed": True, "san": names}), "tls")


def test_server_tls_needs_files_or_self_signed() -> None:
    assert "needs a certificate and a key" in refuses(core.Server, server(tls={}), "tls")
    refuses(core.Server, server(tls={"cert": "", "key": ""}), "tls")


@pytest.mark.parametrize("key", ["max_echo_delay", "max_delay", "stall_every", "idle_timeout",
                                 "header_timeout"])
def test_server_times_must_fit_nanoseconds(key: str) -> None:
    accepts(core.Server, server(**{key: 1e10}))
    for bad in (math.nextafter(1e10, math.inf), -1e-9, math.inf, math.nan):
        refuses(core.Server, server(**{key: bad}), key)


def test_server_conversion_checks_stay_in_the_binding() -> None:
    refuses(core.Server, server(cpus=[2**31]), "cpus")  # would not fit the C int
    refuses(core.Server, server(listen=[("unix", "/tmp/" + "x" * 110, 0)]), "listen")  # sun_path
    refuses(core.Server, server(max_payload_kb=-1), "max_payload_kb")  # unsigned field
    with pytest.raises(ValueError, match="unknown config key 'bogus'"):
        core.Server(server(bogus=1))


# ---- Server: ranges only the options hold --------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message", "core_config"),
    [
        ({"workers": 1025}, "workers: must be >= 1 and <= 1024", {"workers": 1025}),
        ({"max_echo_delay": "3601s"}, "max_echo_delay: must be >= 0 and <= 3600",
         {"max_echo_delay": 3601.0}),
        ({"max_delay": "3601s"}, "max_delay: must be >= 0 and <= 3600", {"max_delay": 3601.0}),
        ({"max_payload_kb": 65537}, "max_payload_kb: must be >= 0 and <= 65536",
         {"max_payload_kb": 65537}),
        ({"max_header_bytes": 127}, "max_header_bytes: must be >= 128", {"max_header_bytes": 127}),
        ({"max_body_bytes": 2**40 + 1}, "max_body_bytes: must be >= 0 and <= 1099511627776",
         {"max_body_bytes": 2**40 + 1}),
        ({"max_concurrent_streams": 0}, "max_concurrent_streams: must be >= 1",
         {"max_concurrent_streams": 0}),
        ({"stall_for": "1s"}, "stall_for: needs stall_every", {"stall_for": 1.0}),
        ({"listen": []}, "listen: must name at least one address", {"listen": []}),
        ({"alpn": []}, "alpn: must name at least one of h2, http/1.1", {"alpn": []}),
        ({"static_delay": "2s", "max_delay": "1s"}, "static_delay: 2 s is over max_delay",
         {"max_delay": 1.0, "response": {"static_delay": 2.0}}),
    ],
)
def test_server_ranges_the_options_own_are_not_repeated_in_c(
    data: dict[str, Any], message: str, core_config: dict[str, Any]
) -> None:
    assert message in user_error(make_server_options, data)
    accepts(core.Server, server(**core_config))
