"""`ClusterFacts`: what a report says about the Kubernetes node under test (the data only;
collection and parsing are in ``_k8s.py``).

As for `MachineFacts`, every fact is optional: a fact that could not be read is None and
`unknown` maps its field name to the reason ("istioctl not installed", "kubectl: the
connection to the server was refused").
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ClusterFacts", "ContainerCpus", "K8sService", "WatchedPod"]


class ContainerCpus(BaseModel):
    """One container of a watched pod: where it runs and what it asked for."""

    model_config = ConfigDict(extra="forbid")

    pod: str
    pod_uid: str | None = Field(
        default=None, description="The pod's UID: a pod recreated under the same name has "
        "another one.")
    container: str
    cpus: str = Field(description="CPU list as kubelet's cpu_manager_state gives it.")
    source: str = Field(
        description="'exclusive' (its own entry in cpu_manager_state), 'shared pool' (the "
        "state's defaultCpuSet) or 'all CPUs' (CPU manager policy none).")
    cpu_request: str | None = None
    cpu_limit: str | None = None
    memory_request: str | None = None
    memory_limit: str | None = None


class WatchedPod(BaseModel):
    """A ``--watch-pod NAME=NS/POD[/CONTAINER]`` group, resolved on the node."""

    model_config = ConfigDict(extra="forbid")

    group: str
    given: str = Field(description="NS/POD[/CONTAINER] as given.")
    matched: str = Field(description="How POD was matched: 'pod name' or 'name prefix'.")
    cpus: list[int] = Field(description="The union of the containers' CPUs.")
    containers: list[ContainerCpus]


class K8sService(BaseModel):
    """The target found from ``--k8s-service NS/NAME[:PORT]``."""

    model_config = ConfigDict(extra="forbid")

    given: str
    port_name: str | None = None
    port: int
    node_port: int
    node: str
    address: str = Field(description="The node's InternalIP.")
    url: str


class ClusterFacts(BaseModel):
    """Versions of the container runtime, Kubernetes, Calico and Istio on the target node,
    kubelet's CPU manager policy, the watched pods and the target service."""

    model_config = ConfigDict(extra="forbid")

    docker: str | None = None
    containerd: str | None = None
    kubernetes_server: str | None = None
    kubelet: str | None = None
    calico: str | None = None
    istio: str | None = None
    cpu_manager_policy: str | None = None
    pods: list[WatchedPod] = Field(default_factory=list)
    service: K8sService | None = None
    unknown: dict[str, str] = Field(
        default_factory=dict, description="Field name -> why it could not be read.")
