"""The two steps of `Options` that span its parts, each a list in a written order.

**Normalisation** runs on the options as given, before any field is validated: it fills in
what one option implies for another (``h2c`` means ``protocol=http2``, a payload means POST,
stages mean no fixed duration...) and refuses what cannot be combined before a default hides
it. Pydantic would run "before" model validators in an order that depends on where each is
defined (last defined first, across base classes too), so the parts define plain functions
and `NORMALISE` calls them in this order; each entry says why it stands where it does.

**Checks** run on the validated options, once every field is known. `CHECKS` says their
order, which decides which of two problems a user hears about first.

A new step or check goes in its concern's module (`_run_<concern>.py`) and gets one line
here, placed by what it reads and what it fills in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationInfo

from ._response_checks import check_response_checks
from ._run_cluster import check_ray, ray_address_is_not_the_url
from ._run_groups import check_groups
from ._run_load import check_totals, duration_default
from ._run_model import Data
from ._run_protocols import (
    check_echo,
    check_grpc,
    check_http3,
    echo_options,
    grpc_uri,
    h2c_means_http2,
)
from ._run_proxy import check_proxy
from ._run_push import check_pushed_metrics
from ._run_requests import check_request_source, payload_means_post, replay_offsets_first
from ._run_schedule import check_schedule_shapes, schedule_shapes_first
from ._run_targets import check_targets, multi_target_uri
from ._run_tls import check_client_cert
from ._run_trace import check_trace
from ._run_until import check_until, until_first

if TYPE_CHECKING:
    from ._run import Options

__all__ = ["CHECKS", "NORMALISE", "check", "normalise"]

Step = Callable[[Data, ValidationInfo, type[BaseModel]], Data]
Check = Callable[["Options", ValidationInfo], None]

NORMALISE: tuple[Step, ...] = (
    # First: `--ray http://host/` hands argparse the URL as Ray's address. Every later step
    # reads the URI (its scheme says gRPC, echo or HTTP), so the URI is found first.
    ray_address_is_not_the_url,
    # Rewrites the URI (Fortio's -grpc: http:// becomes grpc://) and writes protocol http2
    # down; before echo (which reads the scheme) and before h2c, so that a gRPC URI with
    # another protocol is refused as gRPC's ("gRPC runs over HTTP/2"), not as h2c's conflict.
    grpc_uri,
    # Refuses HTTP-only options on tcp:// and udp:// as the user gave them: before h2c and
    # the payload fill in protocol and method, which would then be refused by the wrong
    # name. Fills in udp's short request time-out.
    echo_options,
    # Endpoints without a URI stand in for it with an empty URI; after the Ray step, which
    # takes a URL for the URI only when no URI is given at all.
    multi_target_uri,
    # A replay at its original pace is an explicit schedule: its offsets go in as if given,
    # before the schedule step reads them and before the duration default is filled in.
    replay_offsets_first,
    # --until's bound is the run's duration: set before the schedule shapes, whose own
    # conflicts with duration would otherwise name an option the user never gave.
    until_first,
    # Stages, an exact count or offsets mean no fixed duration: decided before the
    # duration default (last) fills in 5 s.
    schedule_shapes_first,
    # Fortio's rule: a payload or content type makes the request a POST unless a method is
    # given. Reads the URI's final scheme (an echo request has no method).
    payload_means_post,
    # h2c is protocol http2 for cleartext; after grpc_uri and echo_options (see them).
    h2c_means_http2,
    # Last: fills in the default duration (and concurrency "auto" for a CPU list) unless an
    # earlier step said the run has no fixed duration.
    duration_default,
)

CHECKS: tuple[Check, ...] = (
    # The order decides which of two problems is reported; it is the order these checks had
    # as methods of the one class they were defined in, kept so that every message stays.
    check_totals,  # connections and streams over all workers, before the core allocates
    check_schedule_shapes,  # warm-ups, stages, offsets and what each excludes
    check_request_source,  # reads the replay file or plugin config (a bad one: bad input)
    check_targets,  # URI or endpoints, transport pairs, the Envoy TLS configs
    check_proxy,  # the proxy or Nighthawk's tunnel, and what a tunnel carries
    check_client_cert,  # --cert and --key (or the Envoy config's) load together
    check_echo,  # tcp:// and udp://: udp's time-out and payload size
    check_grpc,  # options that apply to gRPC runs only, or not to them
    check_http3,  # what QUIC cannot honour (reads the mapped TLS configs)
    check_trace,  # --trace: a collector for the sample rate, a protocol that carries headers
    check_response_checks,  # --check: a protocol whose session evaluates them
    check_groups,  # --group-by: target needs targets, a header needs a protocol with headers
    check_ray,  # Ray's own options
    check_pushed_metrics,  # a flush interval needs a sink; sinks need the intervals
    check_until,  # --until: live statistics, enough intervals, rate only in a closed loop
)


def normalise(data: Any, info: ValidationInfo, model: type[BaseModel]) -> Any:
    """The options as given (a mapping), with `NORMALISE` applied in order; anything else
    is left to pydantic's own error."""
    if not isinstance(data, Mapping):
        return data
    for step in NORMALISE:
        data = step(data, info, model)
    return data


def check(options: Options, info: ValidationInfo) -> None:
    """Run `CHECKS` in order; each raises PydanticCustomError naming the option."""
    for each in CHECKS:
        each(options, info)
