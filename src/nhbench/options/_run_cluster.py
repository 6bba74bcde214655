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

__all__ = ["Cluster", "check_ray", "loadgen_problem", "ray_address_is_not_the_url"]


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
    loadgen: Annotated[
        tuple[str, ...],
        Flag(metavar="ssh://USER@HOST[:PORT]|docker://CONTAINER|kubectl://NS/POD[/CONTAINER]",
             append=True, group="Distributed load (SSH, containers)"),
    ] = Field(
        default=(),
        description="Generate the load from this load generator (repeatable; "
        "docs/distributed.md): nhbench runs there with these options (its own --cpus, "
        "--concurrency and --rps per worker), every load generator starts at one scheduled "
        "time, and their histograms and counters are merged exactly, as with --ray. Its "
        "nhbench version must be this one's.",
    )
    loadgen_python: Annotated[
        str | None, Flag(metavar="COMMAND", group="Distributed load (SSH, containers)"),
    ] = Field(
        default=None,
        description="With --loadgen: the command that runs the Python with nhbench on the "
        "load generators (default python3), e.g. /opt/nhbench/bin/python.",
    )
    loadgen_ssh_key: Annotated[
        str | None, Flag(metavar="FILE", group="Distributed load (SSH, containers)"),
    ] = Field(default=None, description="With --loadgen ssh://: private key file (the SSH "
              "agent and ~/.ssh/id_* are tried too).")
    loadgen_known_hosts: Annotated[
        str | None, Flag(metavar="FILE", group="Distributed load (SSH, containers)",
                         default="~/.ssh/known_hosts"),
    ] = Field(default=None, description="With --loadgen ssh://: known_hosts file to check "
              "host keys against (an unknown key is refused).")
    loadgen_password_env: Annotated[
        str | None, Flag(metavar="VAR", group="Distributed load (SSH, containers)"),
    ] = Field(default=None, description="With --loadgen ssh://: read the SSH password from "
              "environment variable VAR (never from a flag).")
    loadgen_jump: Annotated[
        str | None, Flag(metavar="USER@HOST[:PORT]", group="Distributed load (SSH, containers)"),
    ] = Field(default=None, description="With --loadgen ssh://: connect through this jump "
              "host.")


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
    if options.loadgen and options.ray is not None:
        raise PydanticCustomError("options_file", "{a}: {msg}",
                                  {"a": "loadgen", "msg": "one placement: --loadgen or --ray"})
    for given in options.loadgen:
        problem = loadgen_problem(given)
        if problem:
            raise PydanticCustomError("options_file", "{a}: {msg}",
                                      {"a": "loadgen", "msg": f"{given!r}: {problem}"})
    for name in ("loadgen_python", "loadgen_ssh_key", "loadgen_known_hosts",
                 "loadgen_password_env", "loadgen_jump"):
        if getattr(options, name) is not None and not options.loadgen:
            raise PydanticCustomError("options_needs", "{a}: needs {b}",
                                      {"a": name, "b": "loadgen"})


def loadgen_problem(text: str) -> str | None:
    """What is wrong with a ``--loadgen`` value, None when its form is right (the SSH
    target's own syntax is checked when the run connects, by the SSH layer)."""
    scheme, sep, rest = text.partition("://")
    if not sep or scheme not in ("ssh", "docker", "kubectl"):
        return "expected ssh://USER@HOST[:PORT], docker://CONTAINER or kubectl://NS/POD[/CONTAINER]"
    if not rest or any(c.isspace() for c in rest):
        return f"{scheme}:// needs a name without spaces"
    if scheme == "docker" and "/" in rest:
        return "docker://CONTAINER takes one container name or id"
    if scheme == "kubectl":
        parts = rest.split("/")
        if len(parts) not in (2, 3) or not all(parts):
            return "expected kubectl://NAMESPACE/POD[/CONTAINER]"
    return None
