"""`MachineFacts`: what a report says about a machine (the data only; collection is in
``_facts.py``).

Every fact is optional. A fact that could not be read is None and `unknown` maps its field
name to the reason ("lscpu not installed", "permission denied reading MSR 0x620"), so a
report can say *why* it is missing instead of failing or guessing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ._k8s_model import ClusterFacts

__all__ = ["MachineFacts", "NicFacts"]


class NicFacts(BaseModel):
    """The network interface that carries traffic to the target address."""

    model_config = ConfigDict(extra="forbid")

    interface: str | None = None
    address: str | None = Field(default=None, description="Local IP address on that interface.")
    driver: str | None = None
    driver_version: str | None = None
    firmware: str | None = None


class MachineFacts(BaseModel):
    """Facts about one machine (the target host or the load generator)."""

    model_config = ConfigDict(extra="forbid")

    role: str = Field(description="'target' or 'loadgen'.")
    host: str = Field(description="Host name as reached ('local' or user@host:port).")
    collected_at: datetime | None = None
    hostname: str | None = None
    os: str | None = Field(default=None, description="e.g. 'Debian GNU/Linux 12 (bookworm)'.")
    kernel: str | None = None
    architecture: str | None = None
    cpu_model: str | None = None
    cpus: int | None = Field(default=None, description="Online logical CPUs.")
    sockets: int | None = None
    cores_per_socket: int | None = None
    threads_per_core: int | None = None
    numa_nodes: int | None = None
    cpu_cores: list[list[int]] | None = Field(
        default=None,
        description="Logical CPUs grouped by physical core (thread siblings), from sysfs "
        "topology or lscpu -p: what a CPU set's cores and threads (2C4T) are counted from.",
    )
    stepping: str | None = None
    smt: bool | None = Field(default=None, description="SMT (hyper-threading) active.")
    turbo: bool | None = Field(default=None, description="Turbo/boost enabled.")
    governors: str | None = Field(
        default=None, description="Scaling governors grouped, e.g. '144x performance'."
    )
    min_frequency: str | None = Field(
        default=None, description="Minimum scaling frequency grouped, e.g. '144x 800 MHz'."
    )
    max_frequency: str | None = Field(
        default=None, description="Maximum scaling frequency grouped, e.g. '144x 3500 MHz'."
    )
    uncore_frequency: str | None = None
    irqbalance: str | None = Field(
        default=None, description="'active', 'inactive' or 'not installed'."
    )
    nic: NicFacts | None = None
    calibration: dict[str, Any] | None = Field(
        default=None,
        description="'nhbench calibrate' figures of this machine (sweep/adapt --calibrate or "
        "--calibration FILE); None when not asked for.",
    )
    cluster: ClusterFacts | None = Field(
        default=None,
        description="Kubernetes node facts (target only; None when no cluster tool is on "
        "the host and no --watch-pod or --k8s-service asked for them).",
    )
    unknown: dict[str, str] = Field(
        default_factory=dict, description="Field name -> why it could not be read."
    )
