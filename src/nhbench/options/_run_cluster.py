"""Load from the nodes of a Ray cluster (`Cluster`; docs/distributed.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, Field, ValidationInfo
from pydantic_core import PydanticCustomError

from ._flags import Flag
from ._run_model import Data, RunPart
from ._values import uri_scheme

if TYPE_CHECKING:
    from ._run import Options

__all__ = ["Cluster", "check_ray", "ray_address_is_not_the_url"]


class Cluster(RunPart):
    """Where the load comes from when it is distributed."""

    ray: Annotated[
        str | None,
        Flag(metavar="ADDRESS", const="auto", default="", group="Distributed load (Ray)"),
    ] = Field(
        default=None,
        description="Generate the load from the nodes of a Ray cluster (docs/distributed.md): "
        "one load actor per node, each running these options (its own --concurrency, "
        "--cpus and --rps per worker), all started at one scheduled time, their "
        "histograms and counters merged exactly. ADDRESS is Ray's: 'auto' (the default "
        "when --ray is given alone: the cluster this machine belongs to, or RAY_ADDRESS), "
        "HOST:PORT of the head's GCS, or ray://HOST:PORT (Ray Client). Needs "
        "pip install 'nhbench[ray]'.",
    )
    hosts: Annotated[int | None, Flag(metavar="N", group="Distributed load (Ray)")] = Field(
        default=None, ge=1, le=10_000,
        description="With --ray: how many nodes generate load (one load actor each). "
        "Default: every alive node of the cluster.",
    )


# ---- the normalisation steps and the checks (their order: _run_checks) ---------------------


def ray_address_is_not_the_url(data: Data, info: ValidationInfo, model: type[BaseModel]) -> Data:
    # `--ray` takes an optional value, so `nhbench run --ray http://host/` gives argparse
    # the URL as Ray's address. No Ray address has an nhbench scheme, so such a value is
    # the URL, and --ray was given alone.
    ray = data.get("ray")
    if isinstance(ray, str) and data.get("uri") is None and uri_scheme(ray) in (
        "http", "https", "grpc", "grpcs", "tcp", "udp",
    ):
        data = {**data, "uri": ray, "ray": "auto"}
    return data


def check_ray(options: Options, info: ValidationInfo) -> None:
    if options.ray is not None and not options.ray.strip():
        raise PydanticCustomError("options_file", "{a}: {msg}",
                                  {"a": "ray", "msg": "empty Ray address"})
    if options.hosts is not None and options.ray is None:
        raise PydanticCustomError("options_needs", "{a}: needs {b}",
                                  {"a": "hosts", "b": "ray"})
