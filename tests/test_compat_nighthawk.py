"""``nhbench nighthawk``: the flag table against Nighthawk's own --help, TCLAP's grammar, and
the mapping of each flag onto nhbench's options (Nighthawk's defaults included).

The runs against real origins are in test_compat_nighthawk_runs.py; these tests need no
compiled extension.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nhbench._exceptions import OptionsError
from nhbench.compat._nighthawk import (
    TEST_SERVER_FLAGS,
    ClientRun,
    Done,
    Native,
    plan,
)
from nhbench.compat._nighthawk_flags import NIGHTHAWK_CLIENT_FLAGS
from nhbench.compat._tclap import HELP, VERSION, TclapArg, TclapParse, parse
from nhbench.options import Options

DATA = Path(__file__).parent / "data" / "nighthawk"
# TCLAP's own arguments: the grammar's, not the table's.
TCLAP_OWN = {"--", "--ignore_rest", "--version", "-h", "--help"}


def help_flags(name: str) -> dict[str, str | None]:
    """Every flag of a Nighthawk binary's --help (its "Where:" section) and its value's
    name (None for a switch)."""
    text = (DATA / name).read_text()
    where = text.split("Where:", 1)[1]
    flags: dict[str, str | None] = {}
    # An entry starts a paragraph: "-p <a|b>,  --protocol <a|b>" or "--h2"; a value's
    # alternatives may wrap onto the next line ("<trace|debug\n|info>").
    for paragraph in re.split(r"\n\s*\n", where):
        head = paragraph.strip()
        if not head.startswith("-"):
            continue
        first = head.replace("\n|", "|").splitlines()[0]
        spec = re.match(r"((?:-[^\s<,]+(?: <[^>]*>)?,?\s*)+)", first)
        assert spec is not None, head
        for flag, value in re.findall(r"(-[^\s<,]+)(?: <([^>]*)>)?", spec.group(1)):
            flags[flag] = value or None
    return flags


def test_the_table_is_every_flag_of_nighthawk_client() -> None:
    expected = {flag: value for flag, value in help_flags("nighthawk_client-help.txt").items()
                if flag not in TCLAP_OWN}
    table = {name: flag.value for flag in NIGHTHAWK_CLIENT_FLAGS for name in flag.names}
    missing = sorted(set(expected) - set(table))
    extra = sorted(set(table) - set(expected))
    assert not missing, f"nighthawk_client flags neither mapped nor refused: {missing}"
    assert not extra, f"flags nighthawk_client does not have: {extra}"
    # The same value names (metavars), so that the constraints are Nighthawk's.
    assert table == expected
    assert len(NIGHTHAWK_CLIENT_FLAGS) == len({flag.name for flag in NIGHTHAWK_CLIENT_FLAGS})


def test_every_flag_is_mapped_or_refused_and_mapped_ones_apply() -> None:
    for flag in NIGHTHAWK_CLIENT_FLAGS:
        assert bool(flag.nhbench) != bool(flag.refused), flag.name
        assert (flag.apply is not None) == bool(flag.nhbench), flag.name


def test_usage_lists_every_flag() -> None:
    action = plan(["client", "--help"])
    assert isinstance(action, Done) and action.status == 0
    for flag in NIGHTHAWK_CLIENT_FLAGS:
        for name in flag.names:
            assert name in action.stdout


# ---- TCLAP's grammar ---------------------------------------------------------------------------

ARGS = (
    TclapArg("rps", value="uint32_t"),
    TclapArg("protocol", "p", "http1|http2", allowed=("http1", "http2")),
    TclapArg("label", multi=True),
    TclapArg("h2", value=None),
)


def grammar(*argv: str) -> TclapParse | str:
    return parse(list(argv), ARGS, positional="uri format", program="nighthawk_client")


def test_values_switches_repeats_and_the_positional() -> None:
    parsed = grammar("--rps", "5", "-p", "http2", "--label", "a", "--h2", "--label", "-b",
                     "http://x/")
    assert not isinstance(parsed, str)
    assert parsed.values == {"rps": "5", "protocol": "http2", "label": ["a", "-b"], "h2": True}
    assert parsed.given["protocol"] == "-p" and parsed.positional == "http://x/"
    # The URI may come first, and after --.
    parsed = grammar("http://x/", "--rps", "1")
    assert not isinstance(parsed, str) and parsed.positional == "http://x/"
    parsed = grammar("--rps", "1", "--", "http://x/")
    assert not isinstance(parsed, str) and parsed.positional == "http://x/"
    # The value is the next argument whatever it looks like (TCLAP's ValueArg).
    parsed = grammar("--protocol", "http1", "--label", "--rps")
    assert not isinstance(parsed, str) and parsed.values["label"] == ["--rps"]


def test_help_and_version_when_reached() -> None:
    assert grammar("--rps", "1", "-h") == HELP
    assert grammar("--help", "--nope") == HELP
    assert grammar("--version") == VERSION
    # An error before --help wins, as in TCLAP (arguments are read in order).
    with pytest.raises(OptionsError, match="--nope"):
        grammar("--nope", "--help")


@pytest.mark.parametrize(("argv", "message"), [
    (["--rps=5"], r"--rps=5: .*next argument \(--rps VALUE\)"),
    (["-phttp2"], r"-phttp2: .*\(-p http2\).*clustered"),
    (["--nope", "1"], r"--nope: not a nighthawk_client flag"),
    (["-x"], r"-x: not a nighthawk_client flag"),
    (["--rps", "1", "--rps", "2"], r"--rps: given twice \(TCLAP: Argument already set!\)"),
    (["--h2", "--h2"], r"--h2: given twice"),
    (["--rps"], r"--rps: needs a value <uint32_t>"),
    (["-p", "HTTP2"], r"-p: 'HTTP2' is not one of http1\|http2"),
    (["http://a/", "http://b/"], r"http://b/: .*takes one uri format argument"),
    (["--", "--rps", "1"], r"--rps: after -- "),
])
def test_grammar_errors_name_the_argument(argv: list[str], message: str) -> None:
    with pytest.raises(OptionsError, match=message):
        grammar(*argv)


# ---- the mapping: Nighthawk's defaults and meanings ------------------------------------------


def client(*argv: str) -> Options:
    action = plan(["client", *argv])
    assert isinstance(action, ClientRun)
    return action.options


def client_with_json(*argv: str) -> Options:
    return client("--output-format", "json", *argv)


def test_nighthawks_defaults() -> None:
    options = client_with_json("http://127.0.0.1:1/")
    assert (options.rps, options.connections, options.concurrency) == (5, 100, 1)
    assert (options.effective_duration, options.timeout) == (5, 30)
    assert options.verbosity == "info" and options.protocol == "http1"
    assert options.max_active_requests == 100 and options.max_pending_requests == 0
    assert options.max_concurrent_streams == 2147483647
    assert options.max_requests_per_connection == 0  # Nighthawk's 4294937295: no limit
    # Nighthawk's default failure predicates (nhbench's add a retry-limit one).
    for name in ("benchmark.http_4xx", "benchmark.http_5xx",
                 "benchmark.pool_connection_failure", "benchmark.stream_resets"):
        assert options.failure_predicates[name] == 0
    # No per-request timeout, the drain bounded by --timeout, no "no 2xx" failure.
    assert (options.request_timeout, options.drain_timeout) == (0, 30)
    assert options.allow_no_success
    # Nighthawk does not verify certificates: neither does its front-end (docs/compat.md).
    assert not options.insecure
    assert client_with_json("https://127.0.0.1:1/").insecure


def test_human_is_nighthawks_layout() -> None:
    assert client("http://127.0.0.1:1/").output_format == "nighthawk_human"


def test_each_mapped_flag_sets_its_option() -> None:
    options = client_with_json(
        "--rps", "7", "--connections", "3", "--duration", "2", "--timeout", "4",
        "--concurrency", "2", "-p", "http2", "--max-concurrent-streams", "9",
        "--max-active-requests", "11", "--max-pending-requests", "12",
        "--max-requests-per-connection", "13", "--request-body-size", "14",
        "--request-method", "POST", "--request-header", "x-a: 1", "--request-header", "x-b: 2",
        "--address-family", "v4", "--burst-size", "3", "--prefetch-connections",
        "--sequencer-idle-strategy", "sleep", "--open-loop", "--jitter-uniform", ".001s",
        "--experimental-h1-connection-reuse-strategy", "lru", "--label", "a", "--label", "b",
        "--termination-predicate", "benchmark.http_2xx:9", "--simple-warmup",
        "--latency-response-header-name", "x-delta", "-v", "warn",
        "--upstream-bind-config", '{source_address:{address:"127.0.0.1",port_value:0}}',
        "http://127.0.0.1:1/")
    assert (options.rps, options.connections, options.duration, options.timeout) == (7, 3, 2, 4)
    assert options.drain_timeout == 4
    assert options.concurrency == 2 and options.protocol == "http2"
    assert (options.max_concurrent_streams, options.max_active_requests,
            options.max_pending_requests, options.max_requests_per_connection) == (9, 11, 12, 13)
    assert options.request_body_size == 14 and options.request_method == "POST"
    assert len(options.request_header) == 2
    assert options.address_family == "v4" and options.burst_size == 3
    assert options.prefetch_connections and options.open_loop and options.simple_warmup
    assert options.sequencer_idle_strategy == "sleep" and options.jitter_uniform == 0.001
    assert options.experimental_h1_connection_reuse_strategy == "lru"
    assert options.label == ("a", "b") and options.verbosity == "warn"
    assert options.termination_predicate == {"benchmark.http_2xx": 9}
    assert options.latency_response_header_name == "x-delta"
    assert options.upstream_bind_config is not None


def test_failure_predicate_replaces_the_defaults() -> None:
    # options_impl.cc clears the defaults when --failure-predicate is given.
    options = client_with_json("--failure-predicate", "benchmark.http_5xx:4294967295",
                               "http://127.0.0.1:1/")
    assert options.failure_predicates == {"benchmark.http_5xx": 4294967295}
    options = client_with_json("--no-default-failure-predicates", "http://127.0.0.1:1/")
    assert options.failure_predicates == {}


def test_h2_protocol_and_no_duration() -> None:
    assert client_with_json("--h2", "http://127.0.0.1:1/").protocol == "http2"
    assert client_with_json("--no-duration", "http://127.0.0.1:1/").no_duration
    with pytest.raises(OptionsError, match="--h2 and --protocol are mutually exclusive"):
        plan(["client", "--h2", "-p", "http2", "http://127.0.0.1:1/"])
    with pytest.raises(OptionsError, match="--duration and --no-duration"):
        plan(["client", "--duration", "1", "--no-duration", "http://127.0.0.1:1/"])


@pytest.mark.parametrize(("argv", "message"), [
    (["--rps", "0"], r"--rps: must be >= 1 and <= 1000000 \(got 0\)"),
    (["--rps", "-5"], r"--rps: must be a whole number"),
    (["--rps", "2.5"], r"--rps: must be a whole number"),
    (["--connections", "0"], r"--connections: must be >= 1"),
    (["--max-active-requests", "0"], r"--max-active-requests: must be >= 1"),
    (["--max-requests-per-connection", "0"], r"--max-requests-per-connection: must be >= 1"),
    (["--request-body-size", "4194305"], r"--request-body-size: must be >= 0 and <= 4194304"),
    (["--jitter-uniform", "10us"], r"--jitter-uniform: must be a duration"),
    (["--failure-predicate", "benchmark.http_4xx"], r"--failure-predicate: .*badly formatted"),
    (["--tls-context", "{nope"], r"--tls-context: not JSON"),
    # The options' own checks, named by the flag as typed rather than the field.
    (["--concurrency", "0"], r"^--concurrency: must be >= 1"),
    (["-v", "debug", "--request-header", "nocolon"], r"^--request-header: must be 'name: "),
])
def test_nighthawks_value_checks(argv: list[str], message: str) -> None:
    with pytest.raises(OptionsError, match=message):
        plan(["client", "--output-format", "json", *argv, "http://127.0.0.1:1/"])


def test_refused_flags_are_refused_by_name() -> None:
    for flag in NIGHTHAWK_CLIENT_FLAGS:
        if not flag.refused:
            continue
        value = (flag.value or "").split("|")[0] if "|" in (flag.value or "") else "x"
        argv = [flag.name] if flag.value is None else [flag.name, value]
        with pytest.raises(OptionsError) as caught:
            plan(["client", *argv, "http://127.0.0.1:1/"])
        assert str(caught.value) == f"{flag.name}: {flag.refused}; nothing was sent"


def test_a_uri_or_multi_target_is_needed() -> None:
    with pytest.raises(OptionsError, match="needs a URI or --multi-target"):
        plan(["client", "--output-format", "json"])
    options = client_with_json("--multi-target-endpoint", "127.0.0.1:1",
                               "--multi-target-endpoint", "127.0.0.1:2",
                               "--multi-target-path", "/x", "--multi-target-use-https")
    assert len(options.multi_target_endpoint) == 2 and options.multi_target_use_https
    assert options.insecure  # https endpoints, Nighthawk's certificate behaviour


def test_a_validation_context_verifies(tmp_path: Path) -> None:
    # A trusted CA in --tls-context asks for verification, as in Nighthawk: the CA is taken
    # and insecure stays off (the runs test shows a wrong CA failing the handshake).
    import subprocess

    key, ca = tmp_path / "key.pem", tmp_path / "ca.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(ca), "-days", "1", "-subj", "/CN=test"],
                   check=True, capture_output=True)
    tls = f'{{common_tls_context:{{validation_context:{{trusted_ca:{{filename:"{ca}"}}}}}}}}'
    options = client_with_json("--tls-context", tls, "https://127.0.0.1:1/")
    assert not options.insecure and (options.tls_context_options or {})["cacert"] == str(ca)
    socket = ('{name:"envoy.transport_sockets.tls",typed_config:{"@type":"type.googleapis.com/'
              'envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",'
              f'common_tls_context:{{validation_context:{{trusted_ca:{{filename:"{ca}"}}}}}}}}}}')
    options = client_with_json("--transport-socket", socket, "https://127.0.0.1:1/")
    assert not options.insecure and (options.tls_context_options or {})["cacert"] == str(ca)
    # Without a validation context, Nighthawk's behaviour: not verified.
    options = client_with_json("--tls-context", "{sni:'example.com'}", "https://127.0.0.1:1/")
    assert options.insecure


# ---- transform, service, test-server ---------------------------------------------------------


def test_transform_service_and_test_server_plans(tmp_path: Path) -> None:
    assert plan(["transform", "--output-format", "yaml"]) == Native(
        ("transform", "--output-format", "yaml", "-"))
    with pytest.raises(OptionsError, match="--output-format: required"):
        plan(["transform"])
    with pytest.raises(OptionsError, match="'xml' is not one of json"):
        plan(["transform", "--output-format", "xml"])
    assert plan(["service", "--listen", "127.0.0.1:0", "--listener-address-file", "f"]) == (
        Native(("service", "--listen", "127.0.0.1:0", "--listener-address-file", "f")))
    with pytest.raises(OptionsError, match="--service dummy-request-source: "):
        plan(["service", "--service", "dummy-request-source"])
    assert plan(["test-server", "-c", "b.yaml", "--concurrency", "2", "-l", "debug",
                 "--base-id", "7", "--service-cluster", "c"]) == Native(
        ("server", "--workers", "2", "--config", "b.yaml"))
    action = plan(["test-server", "--config-yaml", "static_resources: {}"])
    assert isinstance(action, Native) and action.argv[:3] == ("server", "--workers", "auto")
    assert Path(action.temporary[0]).read_text() == "static_resources: {}"
    Path(action.temporary[0]).unlink()
    with pytest.raises(OptionsError, match="--log-path: nhbench server keeps no log file"):
        plan(["test-server", "-c", "b.yaml", "--log-path", "x"])
    with pytest.raises(OptionsError, match="--mode validate: "):
        plan(["test-server", "-c", "b.yaml", "--mode", "validate"])
    with pytest.raises(OptionsError, match="needs -c/--config-path"):
        plan(["test-server"])
    for flag in TEST_SERVER_FLAGS:
        assert bool(flag.nhbench) != bool(flag.refused)


def test_unknown_command() -> None:
    with pytest.raises(OptionsError, match="nighthawk adaptive_load_client: not a Nighthawk"):
        plan(["adaptive_load_client"])
    with pytest.raises(OptionsError, match="missing command"):
        plan([])


