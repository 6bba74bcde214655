"""The syntax of ``--watch-pod NAME=NS/POD[/CONTAINER]`` and ``--k8s-service
NS/NAME[:PORT]``; what they resolve to is the cluster's to say (``nhbench.hosts``' _k8s)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PodRef", "ServiceRef", "parse_pod_ref", "parse_service_ref"]


@dataclass(frozen=True)
class PodRef:
    """``NAME=NS/POD[/CONTAINER]``."""

    group: str
    namespace: str
    pod: str
    container: str | None

    @property
    def given(self) -> str:
        return f"{self.namespace}/{self.pod}" + (f"/{self.container}" if self.container else "")


@dataclass(frozen=True)
class ServiceRef:
    """``NS/NAME[:PORT]`` (PORT: the service port's name or number)."""

    namespace: str
    name: str
    port: str | None

    @property
    def given(self) -> str:
        return f"{self.namespace}/{self.name}" + (f":{self.port}" if self.port else "")


def _k8s_name(text: str) -> bool:
    # DNS-1123 labels and subdomains (what namespaces, pods, containers and services are).
    return bool(text) and all(c.isalnum() and c.isascii() and not c.isupper() or c in "-."
                              for c in text) and text[0].isalnum() and text[-1].isalnum()


def parse_pod_ref(text: str) -> PodRef:
    """``ingress=istio-system/istio-ingressgateway[/istio-proxy]``; ValueError says why not."""
    group, sep, rest = text.partition("=")
    group = group.strip()
    parts = rest.strip().split("/")
    if not sep or not group or len(parts) not in (2, 3):
        raise ValueError(f"{text!r}: expected NAME=NAMESPACE/POD[/CONTAINER] such as "
                         "ingress=istio-system/istio-ingressgateway")
    for part in parts:
        if not _k8s_name(part):
            raise ValueError(f"{text!r}: {part!r} is not a Kubernetes name (lower-case "
                             "letters, digits, '-' and '.')")
    return PodRef(group, parts[0], parts[1], parts[2] if len(parts) == 3 else None)


def parse_service_ref(text: str) -> ServiceRef:
    """``istio-system/istio-ingressgateway[:http2]``; ValueError says why not."""
    path, sep, port = text.strip().partition(":")
    parts = path.split("/")
    if len(parts) != 2 or (sep and not port):
        raise ValueError(f"{text!r}: expected NAMESPACE/NAME[:PORT] such as "
                         "istio-system/istio-ingressgateway:http2")
    for part in (*parts, *([port] if port else [])):
        if not _k8s_name(part):
            raise ValueError(f"{text!r}: {part!r} is not a Kubernetes name")
    return ServiceRef(parts[0], parts[1], port or None)
