"""`Options`: every setting of a run, validated, with Nighthawk's names.

Python spells the options in snake_case (``max_pending_requests``); the CLI spells the same
options as Nighthawk's flags (``--max-pending-requests``). Everything is validated here, once,
so the C core only ever sees sane values, and every error names the option and the allowed
range (see `format_validation_error`).

Units and conventions:

* Times (``duration``, ``timeout``, ``request_timeout``, ``drain_timeout``, ``start_delay``)
  are seconds as floats; strings with a unit are accepted too: ``"5"``, ``"5s"``,
  ``"500ms"``, ``"250us"``, ``"2m"``, ``"1h"``.
* ``rps`` and ``connections`` are per worker, as in Nighthawk: ``concurrency=4, rps=1000``
  asks for 4000 requests per second in total.
* ``percentiles`` are percentages, the way people type them (``50, 90, 99, 99.9``): the same
  convention as `Statistic.p` (``result.latency.p(99)``). The output reports them as
  Nighthawk does, as fractions (``"percentile": 0.99``), exactly at the asked points.
"""


from __future__ import annotations

import ipaddress
from typing import Any, Literal

from pydantic import ValidationError, ValidationInfo, model_validator

from .._exceptions import OptionsError
from .._predicates import DEFAULT_FAILURE_PREDICATES
from ._errors import format_validation_error
from ._response_checks import ResponseChecks
from ._run_checks import check, normalise
from ._run_cluster import Cluster
from ._run_groups import Grouping
from ._run_load import DEFAULT_DURATION, Pool, Rate, Timing
from ._run_observe import DEFAULT_STATS_INTERVAL, LiveStats, Observation
from ._run_output import Output
from ._run_protocols import GRPC_DEFAULT_FAILURE_PREDICATES, Grpc, Http2
from ._run_proxy import (
    DEFAULT_PROXY_PORT,
    Proxy,
    ProxyEndpoint,
    ProxyTls,
    parse_proxy,
    parse_proxy_url,
    parse_tunnel_tls_context,
)
from ._run_push import PushedMetrics
from ._run_requests import RequestBody, RequestLine, RequestSources
from ._run_schedule import Schedule
from ._run_targets import Targets, TargetUri
from ._run_tls import Tls, TlsContext
from ._run_trace import Traces
from ._run_until import Until
from ._run_verdict import Verdict
from ._targets import endpoint_authority, parse_endpoint
from ._values import (
    Target,
    affinity_cpus,
    echo_scheme,
    parse_header,
    parse_uri,
)

__all__ = ["Options", "make_options"]


class Options(
    # One part per concern, each in its own module (_run_<concern>.py) with its fields and
    # their validators. Pydantic lists the fields of the bases last base first, so the parts
    # are written from the last fields to the first: read this list bottom-up for the field
    # order (the CLI's flags, --help, docs/options.md and every echo of the options follow it,
    # and a field validator sees the fields before its own in `info.data`).
    Grouping,  # group_by
    ResponseChecks,  # check
    Observation,  # latency_response_header_name, stream_stats, verbosity
    Cluster,  # ray, hosts
    Grpc,  # grpc ... grpc_deadline
    TlsContext,  # tls_context, transport_socket
    Proxy,  # proxy, tunnel_protocol, tunnel_uri, tunnel_tls_context
    Targets,  # multi_target_endpoint ... unix_socket
    RequestSources,  # request_source_plugin_config ... replay_timing
    RequestBody,  # payload ... http1_0
    Schedule,  # jitter_uniform ... schedule_offsets
    Tls,  # sni ... tls_session_reuse
    Http2,  # protocol, h2c, max_concurrent_streams, max_active_requests
    PushedMetrics,  # statsd ... stats_flush_interval
    Traces,  # trace, trace_sample_rate
    LiveStats,  # stats_interval, prometheus_listen
    Timing,  # address_family, drain_timeout, start_delay
    Output,  # percentiles ... label
    Until,  # until, max_duration
    Verdict,  # failure_predicate ... slo
    Pool,  # max_pending_requests ... burst_size
    RequestLine,  # request_method, request_header, request_body_size
    Rate,  # rps ... request_timeout
    TargetUri,  # uri: first, so that every field validator sees it
):
    """All the options of a run. Construct with keywords; instances are immutable.

    ``Options(uri="http://127.0.0.1:8080/", rps=1000, duration="10s")``
    """

    # ---- across the parts: one normalisation and one check, each a list in a written
    # order (_run_checks) ---------------------------------------------------------------------

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any, info: ValidationInfo) -> Any:
        return normalise(data, info, cls)

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> Options:
        check(self, info)
        return self

    @property
    def multiplexed(self) -> bool:
        """Whether requests share connections as streams (HTTP/2, HTTP/3, gRPC), so that
        max_active_requests sizes the core's per-worker request slots."""
        if self.protocol in ("http2", "http3"):
            return True
        return bool(self.uri) and self.target.scheme in ("grpc", "grpcs")

    # ---- derived values -------------------------------------------------------------------

    @property
    def is_grpc(self) -> bool:
        """a gRPC run (grpc:// or grpcs://, also from --grpc)."""
        return bool(self.uri) and self.target.scheme in ("grpc", "grpcs")

    @property
    def core_protocol(self) -> str:
        """The core's ``protocol`` key: ``tcp``/``udp`` for echo URIs, ``http2``
        for gRPC (with the ``grpc`` key), else ``protocol``."""
        scheme = self.target.scheme
        if scheme in ("tcp", "udp"):
            return scheme
        if scheme in ("grpc", "grpcs"):
            return "http2"
        return self.protocol

    @property
    def core_scheme(self) -> str:
        """The core's ``scheme`` key: ``https`` when the connection speaks TLS (https://,
        grpcs://, and HTTP/3, whose QUIC handshake is TLS 1.3), else ``http``."""
        scheme = self.target.scheme
        if scheme in ("https", "grpcs") or self.protocol == "http3":
            return "https"
        return "http"

    @property
    def target(self) -> Target:
        """The parsed URI; with several targets and no URI, the first endpoint's."""
        if self.uri:
            return parse_uri(self.uri)
        return self.targets[0]

    @property
    def targets(self) -> list[Target]:
        """Several targets (multi_target_endpoint), in order; else the URI's one."""
        if not self.multi_target_endpoint:
            return [parse_uri(self.uri)]
        scheme = "https" if self.multi_target_use_https else "http"
        out = []
        for endpoint in self.multi_target_endpoint:
            host, port = parse_endpoint(endpoint)
            out.append(Target(
                scheme=scheme, host=host, port=port, path=self.multi_target_path or "/",
                authority=endpoint_authority(host, port, scheme),
            ))
        return out

    @property
    def proxy_endpoint(self) -> ProxyEndpoint | None:
        """The HTTP proxy the connections go to (proxy or tunnel_uri), or None. proxy sends
        HTTP/1.1 requests to an http:// URI in absolute-form (curl's habit) and tunnels the
        rest; a Nighthawk tunnel (tunnel_uri) always tunnels."""
        if self.proxy is not None:
            scheme, host, port, auth = parse_proxy(self.proxy, "proxy",
                                                   default_port=DEFAULT_PROXY_PORT)
            if self.proxy_protocol == "http3" and self.core_protocol == "http3":
                return ProxyEndpoint(host, port, "connect-udp", auth)
            tls = None
            if scheme == "https":
                # SNI is a DNS name only (RFC 6066 section 3); the certificate is checked
                # against the proxy's name or address, as curl does.
                tls = ProxyTls(sni=None if _is_ip(host) else host, verify_name=host,
                               cacert=self.proxy_cacert, cacert_pem=None,
                               insecure=self.proxy_insecure)
            protocol: Literal["http1", "http2", "http3"] = self.proxy_protocol
            if self.core_protocol == "http3":
                # CONNECT-UDP on an HTTP/2 stream (the only other form check_proxy lets
                # through for HTTP/3).
                return ProxyEndpoint(host, port, "connect-udp", auth, tls, protocol)
            # Absolute-form needs a plain HTTP/1.1 proxy; over TLS or HTTP/2 every
            # connection tunnels.
            absolute = (self.target.scheme == "http" and self.core_protocol == "http1"
                        and tls is None and protocol == "http1")
            return ProxyEndpoint(host, port, "absolute" if absolute else "connect", auth,
                                 tls, protocol)
        if self.tunnel_uri is not None:
            host, port, auth = parse_proxy_url(self.tunnel_uri, "tunnel_uri", default_port=80)
            tls = None
            if self.tunnel_tls_context is not None:
                sni, cafile, capem = parse_tunnel_tls_context(self.tunnel_tls_context)
                verify = cafile is not None or capem is not None
                tls = ProxyTls(sni=sni, verify_name=None, cacert=cafile, cacert_pem=capem,
                               insecure=not verify)
            return ProxyEndpoint(host, port,
                                 "connect-udp" if self.core_protocol == "http3" else "connect",
                                 auth, tls, self.tunnel_protocol or "http1")
        return None

    @property
    def unix_socket_path(self) -> str | None:
        """The Unix socket the connections go to (unix_socket or a unix URL), or None."""
        if self.unix_socket is not None:
            return self.unix_socket
        return parse_uri(self.uri).unix_socket if self.uri else None

    @property
    def worker_cpus(self) -> list[int]:
        """One entry per worker: the CPU it is pinned to.

        * ``concurrency`` 'auto': one worker per CPU of ``cpus`` if given, else one per CPU
          of the process affinity mask. Giving ``cpus`` without ``concurrency`` means 'auto'.
        * ``concurrency`` N: N workers pinned round-robin over ``cpus`` if given, else over
          the affinity mask.
        """
        pool = list(self.cpus) if self.cpus is not None else affinity_cpus()
        if self.concurrency == "auto":
            return pool
        count = int(self.concurrency)
        return [pool[i % len(pool)] for i in range(count)]

    @property
    def workers(self) -> int:
        """Number of workers the run uses."""
        return len(self.worker_cpus)

    @property
    def effective_duration(self) -> float | None:
        """Seconds to run, or None for no_duration."""
        if self.no_duration:
            return None
        return self.duration if self.duration is not None else DEFAULT_DURATION

    @property
    def effective_stats_interval(self) -> float:
        """Seconds per live-statistics interval, 0 when off: `stats_interval` when given,
        else 1 s with `prometheus_listen` (its latencies are per interval), else the flush
        interval with pushed metrics (statsd, OTLP), else off. The CLI turns an unset value
        into 1 s when stderr is a terminal before the run."""
        if self.stats_interval is not None:
            return self.stats_interval
        if self.prometheus_listen:
            return DEFAULT_STATS_INTERVAL
        return self.effective_flush_interval if self.pushes_metrics else 0.0

    @property
    def failure_predicates(self) -> dict[str, int]:
        """The failure predicates in force: the defaults (unless disabled) and the user's."""
        base = {} if self.no_default_failure_predicates else dict(DEFAULT_FAILURE_PREDICATES)
        if base and echo_scheme(self.uri) is not None:
            # an echo that came back wrong fails an echo run, as a 5xx does HTTP.
            base["benchmark.echo_mismatch"] = 0
        if self.is_grpc and not self.no_default_failure_predicates:
            # a failed gRPC call comes with HTTP 200 (docs/protocols.md).
            base.update(GRPC_DEFAULT_FAILURE_PREDICATES)
        if self.abort_on is not None:
            base[f"benchmark.http_{self.abort_on}"] = 0
        base.update(self.failure_predicate)
        return base

    @property
    def percentile_points(self) -> list[float]:
        """The points to report as fractions in [0, 1], min (0) and max (1) included.

        Rounding to 10 decimals turns 99.9 / 100 = 0.9990000000000001 back into 0.999, so
        the output says exactly what was asked.
        """
        points = {0.0, 1.0, *(round(p / 100.0, 10) for p in self.percentiles)}
        return sorted(points)

    @property
    def headers(self) -> list[tuple[str, str]]:
        """The user's request headers as (name, value) pairs."""
        return [parse_header(item) for item in self.request_header]

    @property
    def tls_server_name(self) -> str | None:
        """The SNI to send: `sni`, else the URI's host unless it is an IP address."""
        if self.sni is not None:
            return self.sni
        host = self.target.host
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return host.lower().rstrip(".")
        return None

    @property
    def tls_verify_name(self) -> str:
        """The name (or IP address) the server's certificate must be valid for."""
        return self.sni if self.sni is not None else self.target.host.lower().rstrip(".")



def make_options(uri: str | Options | None = None, /, **kwargs: Any) -> Options:
    """Build Options from a URI (or Options) plus keywords, raising a one-line OptionsError.

    ``make_options(opts, rps=10)`` returns a copy of `opts` with rps changed, validated again.
    """
    if isinstance(uri, Options):
        if not kwargs:
            return uri
        data = uri.model_dump(exclude_unset=True)
        data.update(kwargs)
    else:
        data = dict(kwargs)
        if uri is not None:
            data["uri"] = uri
    try:
        return Options.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        option = str(errors[0]["loc"][0]) if errors and errors[0].get("loc") else None
        raise OptionsError(format_validation_error(exc), option=option) from exc


def _is_ip(host: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
