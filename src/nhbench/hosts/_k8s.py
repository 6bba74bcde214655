"""Collect `ClusterFacts` from the Kubernetes node under test (a `Host`: this machine or one
reached over SSH), resolve ``--watch-pod`` groups to CPU lists and ``--k8s-service`` to a
target URL.

As for the machine facts, one shell script prints every raw input in marked sections (one
round trip), and pure ``parse_*`` functions turn the sections into facts, so that parsing is
tested on recorded outputs (tests/data/k8s/) without a cluster. Every tool is optional: a
version that cannot be read stays None with the reason in ``unknown``.

Watched pods are resolved with ``kubectl get pods -n NS -o json`` (pod UID, container
names, container IDs, resources) and kubelet's ``cpu_manager_state`` (pod UID -> container
-> CPU set; the pre-1.18 format keyed by container ID is read too). A pod or a service that
cannot be resolved is a `K8sError`: a group that was asked for and cannot be watched, or a
target that cannot be found, must stop the sweep before it starts, naming why.

During a campaign `resolve_watched_pods` resolves the watched pods again before each step
(`watched_pods_script`: the pods' namespaces, the state file and the online CPUs only, one
round trip), since a pod restarted or rescheduled may have other CPUs, or be gone.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from .._exceptions import K8sError
from ..options import PodRef, ServiceRef, parse_cpu_list
from ._facts import parse_sections
from ._host import Host
from ._k8s_model import ClusterFacts, ContainerCpus, K8sService, WatchedPod

__all__ = [
    "DEFAULT_KUBELET_DIR",
    "K8sError",
    "cluster_script",
    "collect_cluster",
    "format_cpus",
    "parse_calicoctl_version",
    "parse_containerd_version",
    "parse_cpu_manager_state",
    "parse_crictl_version",
    "parse_docker_version",
    "parse_image_tag",
    "parse_istioctl_version",
    "parse_json_output",
    "parse_kubectl_version",
    "parse_kubelet_version",
    "resolve_pod",
    "resolve_service",
    "resolve_watched_pods",
    "watched_pods_script",
]

DEFAULT_KUBELET_DIR = "/var/lib/kubelet"

_MARK = "@@nhbench-section "
_TOOLS = ("docker", "containerd", "crictl", "kubelet", "calicoctl", "istioctl")


# --------------------------------------------------------------------------------------
# The script
# --------------------------------------------------------------------------------------


def cluster_script(kubectl: str, kubelet_dir: str, namespaces: Iterable[str],
                   service: ServiceRef | None) -> str:
    """The shell script whose sections `collect_cluster` parses. `kubectl` is a command
    (``kubectl``, ``k3s kubectl``, ``sudo kubectl --kubeconfig /etc/kubernetes/admin.conf``)
    and is used as given; every other name is quoted."""
    config = shlex.quote(f"{kubelet_dir.rstrip('/')}/config.yaml")
    k = _kubectl(kubectl)
    lines = [
        *_PRELUDE,
        f"s tools; for t in {' '.join(_TOOLS)}; do command -v \"$t\" >/dev/null 2>&1 && echo \"$t\"; done",
        f"s kubectl; {k} version --client -o json >/dev/null 2>&1 && echo found",
        "s docker; command -v docker >/dev/null 2>&1 && x docker version",
        "s containerd; command -v containerd >/dev/null 2>&1 && x containerd --version",
        "s crictl; command -v crictl >/dev/null 2>&1 && x crictl version",
        "s kubelet; command -v kubelet >/dev/null 2>&1 && x kubelet --version",
        "s calicoctl; command -v calicoctl >/dev/null 2>&1 && x calicoctl version",
        "s istioctl; command -v istioctl >/dev/null 2>&1 && x istioctl version -o json",
        f"s kubectl_version; v=$({k} version -o json 2>&1); st=$?; "
        "printf '%s\\nexit %s\\n' \"$v\" \"$st\"",
        # The image tags are a fallback, asked only of a server that answered.
        f"s calico_pods; [ \"$st\" = 0 ] && x {k} get pods -A -l k8s-app=calico-node -o json",
        f"s istiod_pods; [ \"$st\" = 0 ] && x {k} get pods -A -l app=istiod -o json",
        _state_line(kubelet_dir),
        f"s kubelet_config; grep -h '^cpuManagerPolicy' {config} 2>/dev/null",
        "s online; cat /sys/devices/system/cpu/online 2>/dev/null",
    ]
    lines += _pods_lines(k, namespaces)
    if service is not None:
        lines.append(f"s service; x {k} get service -n {shlex.quote(service.namespace)} "
                     f"{shlex.quote(service.name)} -o json")
        lines.append(f"s nodes; x {k} get nodes -o json")
    return "\n".join(lines) + "\n"


_PRELUDE = (
    'PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"; export PATH; LC_ALL=C; export LC_ALL',
    f"s() {{ printf '\\n{_MARK}%s\\n' \"$1\"; }}",
    # "exit N" after an output says whether the command worked; its stderr is kept,
    # since that is what says why it did not. It goes on a line of its own: kubelet writes
    # cpu_manager_state with Go's json.Marshal, which ends it without a newline.
    "x() { o=$(\"$@\" 2>&1); st=$?; printf '%s\\nexit %s\\n' \"$o\" \"$st\"; }",
)


def _kubectl(kubectl: str) -> str:
    # A kubeconfig naming an unreachable server would otherwise hold each call for
    # kubectl's default (no) request timeout: facts must never stall a sweep.
    return f"{kubectl} --request-timeout=10s"


def _state_line(kubelet_dir: str) -> str:
    state = shlex.quote(f"{kubelet_dir.rstrip('/')}/cpu_manager_state")
    return (f"s cpu_state; if [ -r {state} ]; then x cat {state}; elif [ -e {state} ]; then "
            f"x sudo -n cat {state}; else echo 'No such file or directory'; echo 'exit 1'; fi")


def _pods_lines(k: str, namespaces: Iterable[str]) -> list[str]:
    return [f"s pods:{namespace}; x {k} get pods -n {shlex.quote(namespace)} -o json"
            for namespace in dict.fromkeys(namespaces)]


def watched_pods_script(kubectl: str, kubelet_dir: str, namespaces: Iterable[str]) -> str:
    """The script `resolve_watched_pods` runs before each step: only what the watched pods'
    CPUs are read from (the pods of their namespaces, cpu_manager_state, the online CPUs)."""
    lines = [
        *_PRELUDE,
        _state_line(kubelet_dir),
        "s online; cat /sys/devices/system/cpu/online 2>/dev/null",
        *_pods_lines(_kubectl(kubectl), namespaces),
    ]
    return "\n".join(lines) + "\n"


def _status(text: str) -> tuple[str, int | None]:
    """(output, exit status) of a section written by the script's ``x`` helper."""
    lines = text.rstrip("\n").splitlines()
    if lines and lines[-1].startswith("exit ") and lines[-1][5:].strip().isdigit():
        return "\n".join(lines[:-1]), int(lines[-1][5:])
    return text, None


def _first_line(text: str, fallback: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return fallback


def parse_json_output(text: str) -> Any:
    """The JSON document in a command's output, skipping warnings printed before it (istioctl
    prints 'no running Istio pods in "istio-system"' before its JSON). None when there is
    none."""
    decoder = json.JSONDecoder()
    offset = 0
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith(("{", "[")):
            try:
                return decoder.raw_decode(text, offset + len(line) - len(line.lstrip()))[0]
            except (ValueError, RecursionError):
                pass
        offset += len(line)
    return None


_SHAPE_ERRORS = (TypeError, AttributeError, KeyError, ValueError, IndexError, RecursionError)
T = TypeVar("T")


def _guard(resolve: Callable[[], T], what: str, option: str) -> T:
    """`resolve()`, with JSON of an unexpected shape (a list where an object belongs, a port
    that is not a number) turned into one K8sError naming the command, not a traceback."""
    try:
        return resolve()
    except K8sError:
        raise
    except _SHAPE_ERRORS as exc:
        raise K8sError(f"{what} printed JSON nhbench cannot read ({type(exc).__name__}: "
                       f"{exc})", option) from None


# --------------------------------------------------------------------------------------
# Versions
# --------------------------------------------------------------------------------------


def parse_docker_version(text: str) -> tuple[str | None, str | None]:
    """(engine version, containerd version) from ``docker version``: the Server section's
    Engine (or, before Docker 17.06, the Server section's own) Version, and its containerd
    component's."""
    engine = containerd = None
    in_server = False
    component = ""
    for line in text.splitlines():
        if not line.startswith(" "):
            in_server = line.startswith("Server")
            component = ""
            continue
        if not in_server:
            continue
        stripped = line.strip()
        key, sep, value = stripped.partition(":")
        if sep and not value.strip():
            component = key.strip().lower()
            continue
        if key.strip() == "Version" and value.strip():
            if component in ("", "engine") and engine is None:
                engine = value.strip()
            elif component == "containerd" and containerd is None:
                containerd = value.strip()
    return engine, containerd


def parse_containerd_version(text: str) -> str | None:
    """``containerd github.com/containerd/containerd v1.6.8 9cd3357...`` -> v1.6.8."""
    words = _first_line(text, "").split()
    if len(words) >= 3 and words[0] == "containerd":
        return words[2]
    return None


def parse_crictl_version(text: str) -> tuple[str | None, str | None]:
    """(runtime name, runtime version) from ``crictl version``."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields.get("RuntimeName") or None, fields.get("RuntimeVersion") or None


def parse_kubectl_version(text: str) -> tuple[str | None, str | None]:
    try:
        return _kubectl_version(text)
    except _SHAPE_ERRORS:
        return None, None


def _kubectl_version(text: str) -> tuple[str | None, str | None]:
    """(server gitVersion, client gitVersion) from ``kubectl version -o json``."""
    document = parse_json_output(text)
    if not isinstance(document, dict):
        return None, None

    def version(key: str) -> str | None:
        info = document.get(key)
        return str(info["gitVersion"]) if isinstance(info, dict) and info.get("gitVersion") else None

    return version("serverVersion"), version("clientVersion")


def parse_kubelet_version(text: str) -> str | None:
    """``Kubernetes v1.22.3`` -> v1.22.3."""
    words = _first_line(text, "").split()
    return words[1] if len(words) == 2 and words[0] == "Kubernetes" else None


def parse_calicoctl_version(text: str) -> tuple[str | None, str | None]:
    """(cluster version, client version) from ``calicoctl version``; the cluster's is
    missing when calicoctl says 'Unable to detect installed Calico version'."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields.get("Cluster Version") or None, fields.get("Client Version") or None


def parse_istioctl_version(text: str) -> tuple[str | None, str | None]:
    try:
        return _istioctl_version(text)
    except _SHAPE_ERRORS:
        return None, None


def _istioctl_version(text: str) -> tuple[str | None, str | None]:
    """(control plane version, client version) from ``istioctl version -o json``: the
    meshVersion components' versions (several, when they differ, joined with ', ')."""
    document = parse_json_output(text)
    if not isinstance(document, dict):
        return None, None
    client = document.get("clientVersion")
    client_version = str(client["version"]) if isinstance(client, dict) and client.get("version") else None
    versions = []
    for component in document.get("meshVersion") or []:
        info = component.get("Info") if isinstance(component, dict) else None
        if isinstance(info, dict) and info.get("version"):
            versions.append(str(info["version"]))
    mesh = ", ".join(dict.fromkeys(versions)) or None
    return mesh, client_version


def parse_image_tag(text: str, container_hint: str) -> str | None:
    try:
        return _image_tag(text, container_hint)
    except _SHAPE_ERRORS:
        return None


def _image_tag(text: str, container_hint: str) -> str | None:
    """The image tag of the first container whose image names `container_hint` (calico's
    ``docker.io/calico/node:v3.21.4``, istiod's ``docker.io/istio/pilot:1.11.1``) in a
    ``kubectl get pods -o json`` list."""
    document = parse_json_output(text)
    if not isinstance(document, dict):
        return None
    for pod in document.get("items") or []:
        for container in (pod.get("spec") or {}).get("containers") or []:
            image = str(container.get("image") or "")
            name, _, tag = image.rpartition(":")
            if container_hint in name and tag and "/" not in tag:
                return tag.split("@")[0]
    return None


# --------------------------------------------------------------------------------------
# CPU manager state
# --------------------------------------------------------------------------------------


@dataclass
class CpuState:
    """kubelet's cpu_manager_state: policy, shared pool, and the exclusive assignments
    (pod UID -> container -> CPU list; or, in the pre-1.18 format, container ID -> list)."""

    policy: str
    default: str
    by_pod: dict[str, dict[str, str]]
    by_container_id: dict[str, str]


def parse_cpu_manager_state(text: str) -> CpuState:
    """The state file; ValueError when it is not one."""
    document = parse_json_output(text)
    if not isinstance(document, dict) or "policyName" not in document:
        raise ValueError(f"not a cpu_manager_state file: {_first_line(text, 'empty')[:80]}")
    by_pod: dict[str, dict[str, str]] = {}
    by_id: dict[str, str] = {}
    entries = document.get("entries") or {}
    if not isinstance(entries, dict):
        raise ValueError(f"cpu_manager_state entries is a {type(entries).__name__}, not an "
                         "object")
    for key, value in entries.items():
        if isinstance(value, dict):
            by_pod[str(key)] = {str(name): str(cpus) for name, cpus in value.items()}
        else:
            by_id[str(key)] = str(value)
    return CpuState(str(document["policyName"]), str(document.get("defaultCpuSet") or ""),
                    by_pod, by_id)


def format_cpus(cpus: Sequence[int]) -> str:
    """[5, 22, 77, 94] -> "5,22,77,94 (4)", as the lab script's header shows a CPU set."""
    return f"{','.join(map(str, cpus))} ({len(cpus)})"


# --------------------------------------------------------------------------------------
# Pods
# --------------------------------------------------------------------------------------


def _pod_names(pods: list[dict[str, Any]]) -> list[str]:
    return [str((pod.get("metadata") or {}).get("name")) for pod in pods]


def _match_pods(ref: PodRef, pods: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    exact = [pod for pod in pods if (pod.get("metadata") or {}).get("name") == ref.pod]
    if exact:
        return exact, "pod name"
    # A deployment's, daemon set's or stateful set's pods are named after it with a suffix.
    # During a rollout the old pods terminate while the new ones start: only the running
    # ones that are not being deleted are the group.
    prefixed = [pod for pod in pods
                if str((pod.get("metadata") or {}).get("name", "")).startswith(ref.pod + "-")
                and _not_running(pod) is None]
    return prefixed, "name prefix"


def _not_running(pod: dict[str, Any]) -> str | None:
    """Why `pod` does not run (its phase, or that it is being deleted), or None. A pod
    without a phase is taken as running, as recorded outputs may leave it out."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return "terminating"
    phase = (pod.get("status") or {}).get("phase", "Running")
    return None if phase == "Running" else f"{phase}, not Running"


def _resources(container: dict[str, Any]) -> dict[str, str | None]:
    resources = container.get("resources") or {}
    limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
    return {
        "cpu_request": _text(requests.get("cpu")), "cpu_limit": _text(limits.get("cpu")),
        "memory_request": _text(requests.get("memory")),
        "memory_limit": _text(limits.get("memory")),
    }


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _container_ids(pod: dict[str, Any]) -> dict[str, str]:
    ids: dict[str, str] = {}
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        raw = str(status.get("containerID") or "")
        if raw:
            ids[str(status.get("name"))] = raw.partition("://")[2] or raw
    return ids


def resolve_pod(ref: PodRef, pods_output: str, state: CpuState, online: str) -> WatchedPod:
    return _guard(lambda: _resolve_pod(ref, pods_output, state, online),
                  f"--watch-pod {ref.group}: kubectl get pods -n {ref.namespace}", "watch_pod")


def _resolve_pod(ref: PodRef, pods_output: str, state: CpuState, online: str) -> WatchedPod:
    """The CPUs of the pod(s) and container(s) `ref` names, from ``kubectl get pods -n NS
    -o json`` and the parsed cpu_manager_state. `online` is the node's online CPU list
    (for policy none). K8sError names what is missing."""
    flag = f"--watch-pod {ref.group}"
    document = parse_json_output(pods_output)
    if not isinstance(document, dict) or not isinstance(document.get("items"), list):
        raise K8sError(f"{flag}: kubectl get pods -n {ref.namespace} failed: "
                       f"{_first_line(pods_output, 'no output')}", "watch_pod")
    pods = [pod for pod in document["items"] if isinstance(pod, dict)]
    matched, how = _match_pods(ref, pods)
    if not matched:
        names = ", ".join(_pod_names(pods)[:10]) or "none"
        raise K8sError(f"{flag}: no pod named {ref.pod} or {ref.pod}-* in namespace "
                       f"{ref.namespace} (its pods: {names})", "watch_pod")
    containers: list[ContainerCpus] = []
    cpus: list[int] = []
    for pod in matched:
        name = str(pod["metadata"]["name"])
        uid = str(pod["metadata"].get("uid") or "")
        # Its CPUs are not the ones it will run on (a pending pod has no exclusive CPUs
        # yet; a terminating one is giving them back).
        why = _not_running(pod)
        if why is not None:
            raise K8sError(f"{flag}: pod {ref.namespace}/{name} is {why}", "watch_pod")
        spec_containers = [c for c in (pod.get("spec") or {}).get("containers") or []
                           if isinstance(c, dict)]
        cnames = [str(c.get("name")) for c in spec_containers]
        if ref.container is not None and ref.container not in cnames:
            raise K8sError(f"{flag}: pod {ref.namespace}/{name} has no container "
                           f"{ref.container} (its containers: {', '.join(cnames)})", "watch_pod")
        ids = _container_ids(pod)
        for container in spec_containers:
            cname = str(container.get("name"))
            if ref.container is not None and cname != ref.container:
                continue
            cpu_list, source = _container_cpus(state, uid, cname, ids.get(cname), online)
            if cpu_list is None:
                raise K8sError(f"{flag}: the CPU manager state has no CPUs for "
                               f"{ref.namespace}/{name}/{cname} and no shared pool", "watch_pod")
            try:
                parsed = parse_cpu_list(cpu_list)
            except ValueError as exc:
                raise K8sError(f"{flag}: cpu_manager_state CPU list {cpu_list!r}: {exc}",
                               "watch_pod") from None
            cpus += [cpu for cpu in parsed if cpu not in cpus]
            containers.append(ContainerCpus(pod=name, pod_uid=uid or None, container=cname,
                                            cpus=cpu_list,
                                            source=source, **_resources(container)))
    return WatchedPod(group=ref.group, given=ref.given, matched=how, cpus=sorted(cpus),
                      containers=containers)


def _container_cpus(state: CpuState, uid: str, container: str, container_id: str | None,
                    online: str) -> tuple[str | None, str]:
    exclusive = state.by_pod.get(uid, {}).get(container)
    if exclusive is None and container_id is not None:
        exclusive = state.by_container_id.get(container_id)
    if exclusive:
        return exclusive, "exclusive"
    if state.policy == "none" or not state.default:
        # Under policy none every container runs on every online CPU; the state keeps no
        # CPU set at all.
        return (online.strip() or None), "all CPUs"
    return state.default, "shared pool"


# --------------------------------------------------------------------------------------
# Services
# --------------------------------------------------------------------------------------


def resolve_service(ref: ServiceRef, service_output: str, nodes_output: str,
                    url: str | None) -> K8sService:
    return _guard(lambda: _resolve_service(ref, service_output, nodes_output, url),
                  f"--k8s-service {ref.given}: kubectl get service/nodes", "k8s_service")


def _resolve_service(ref: ServiceRef, service_output: str, nodes_output: str,
                     url: str | None) -> K8sService:
    """The target URL from the service's NodePort and a Ready node's InternalIP. `url`, when
    given, keeps its scheme and path (its host and port are replaced); otherwise the scheme
    is https for a port named https* or numbered 443, http for the others."""
    flag = f"--k8s-service {ref.given}"
    service = parse_json_output(service_output)
    if not isinstance(service, dict) or not isinstance(service.get("spec"), dict):
        raise K8sError(f"{flag}: kubectl get service failed: "
                       f"{_first_line(service_output, 'no output')}", "k8s_service")
    spec = service["spec"]
    ports = [p for p in spec.get("ports") or [] if isinstance(p, dict)]

    def shown(port: dict[str, Any]) -> str:
        node = f"->{port['nodePort']}" if port.get("nodePort") else " (no NodePort)"
        return f"{port.get('name') or '-'}:{port.get('port')}{node}"

    if ref.port is not None:
        chosen = [p for p in ports if ref.port in (str(p.get("name")), str(p.get("port")))]
        if not chosen:
            raise K8sError(f"{flag}: the service has no port {ref.port} (its ports: "
                           f"{', '.join(map(shown, ports)) or 'none'})", "k8s_service")
    else:
        chosen = [p for p in ports if p.get("nodePort")] or ports
        if len(chosen) > 1:
            raise K8sError(f"{flag}: the service has several ports; name one with "
                           f":PORT ({', '.join(map(shown, chosen))})", "k8s_service")
    port = chosen[0] if chosen else {}
    if not port.get("nodePort"):
        raise K8sError(f"{flag}: service type {spec.get('type', 'ClusterIP')} has no "
                       f"NodePort on {shown(port) if port else 'any port'}; expose it as "
                       "NodePort (or give the URL)", "k8s_service")
    node, address = _node_address(nodes_output, flag)
    name = str(port.get("name") or "") or None
    number = int(port.get("port") or 0)
    if url:
        scheme, _, rest = url.partition("://")
        path = "/" + rest.partition("/")[2] if "/" in rest else "/"
    else:
        secure = (name or "").startswith("https") or number == 443
        scheme, path = ("https" if secure else "http"), "/"
    host = f"[{address}]" if ":" in address else address
    return K8sService(given=ref.given, port_name=name, port=number,
                      node_port=int(port["nodePort"]), node=node, address=address,
                      url=f"{scheme}://{host}:{int(port['nodePort'])}{path}")


def _node_address(nodes_output: str, flag: str) -> tuple[str, str]:
    document = parse_json_output(nodes_output)
    if not isinstance(document, dict) or not isinstance(document.get("items"), list):
        raise K8sError(f"{flag}: kubectl get nodes failed: "
                       f"{_first_line(nodes_output, 'no output')}", "k8s_service")
    fallback: tuple[str, str] | None = None
    for node in document["items"]:
        status = node.get("status") or {}
        internal = [a.get("address") for a in status.get("addresses") or []
                    if a.get("type") == "InternalIP" and a.get("address")]
        if not internal:
            continue
        found = (str(node.get("metadata", {}).get("name")), str(internal[0]))
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in status.get("conditions") or [])
        if ready:
            return found
        fallback = fallback or found
    if fallback is not None:
        return fallback
    raise K8sError(f"{flag}: no node reports an InternalIP address", "k8s_service")


# --------------------------------------------------------------------------------------
# Putting it together
# --------------------------------------------------------------------------------------


def _versions(sections: dict[str, str], facts: ClusterFacts) -> None:
    tools = set(sections.get("tools", "").split())
    unknown = facts.unknown
    kubectl = sections.get("kubectl", "").strip() == "found"

    def failed(tool: str, text: str, status: int | None) -> str:
        # The client part comes first; the line that says why is an error line.
        for line in text.splitlines():
            if any(word in line.lower() for word in ("cannot", "error", "denied", "refused")):
                return f"{tool} failed: {line.strip()}"
        return f"{tool} failed: {_first_line(text, f'exit status {status}')}"

    if "docker" in tools:
        text, status = _status(sections.get("docker", ""))
        engine, bundled = parse_docker_version(text)
        facts.docker = engine
        if engine is None:
            unknown["docker"] = failed("docker version", text, status) if status else (
                "docker version shows no server")
        facts.containerd = bundled
    else:
        unknown["docker"] = "docker not installed"
    if facts.containerd is None and "containerd" in tools:
        text, status = _status(sections.get("containerd", ""))
        facts.containerd = parse_containerd_version(text)
    if facts.containerd is None and "crictl" in tools:
        text, status = _status(sections.get("crictl", ""))
        runtime, version = parse_crictl_version(text)
        if version:
            facts.containerd = version if runtime in (None, "containerd") else f"{runtime} {version}"
    if facts.containerd is None:
        unknown["containerd"] = ("containerd --version and crictl version printed no version"
                                 if tools & {"containerd", "crictl"}
                                 else "neither containerd nor crictl installed")

    text, status = _status(sections.get("kubectl_version", ""))
    server, _client = parse_kubectl_version(text)
    facts.kubernetes_server = server
    if server is None:
        unknown["kubernetes_server"] = ("kubectl not found" if not kubectl else
                                        f"kubectl version: {_server_error(text, status)}")
    if "kubelet" in tools:
        text, status = _status(sections.get("kubelet", ""))
        facts.kubelet = parse_kubelet_version(text)
        if facts.kubelet is None:
            unknown["kubelet"] = failed("kubelet --version", text, status)
    else:
        unknown["kubelet"] = "kubelet not installed on this host"

    calico_reason = "calicoctl not installed"
    if "calicoctl" in tools:
        text, status = _status(sections.get("calicoctl", ""))
        facts.calico, _ = parse_calicoctl_version(text)
        calico_reason = "calicoctl version: " + _first_line(
            "\n".join(line for line in text.splitlines() if "Unable" in line) or text,
            "no cluster version")
    asked = "; no server to ask for pods" if server is None else ""
    if facts.calico is None and server is not None:
        facts.calico = parse_image_tag(_status(sections.get("calico_pods", ""))[0], "calico/node")
        calico_reason += "; no calico-node pod (label k8s-app=calico-node)"
    if facts.calico is None:
        unknown["calico"] = calico_reason + asked

    istio_reason = "istioctl not installed"
    if "istioctl" in tools:
        text, status = _status(sections.get("istioctl", ""))
        facts.istio, _ = parse_istioctl_version(text)
        istio_reason = "istioctl version shows no control plane"
    if facts.istio is None and server is not None:
        facts.istio = parse_image_tag(_status(sections.get("istiod_pods", ""))[0], "pilot")
        istio_reason += "; no istiod pod (label app=istiod)"
    if facts.istio is None:
        unknown["istio"] = istio_reason + asked


def _server_error(text: str, status: int | None) -> str:
    for line in text.splitlines():
        if "connection" in line.lower() or "error" in line.lower() or "refused" in line:
            return line.strip()
    return f"no server version (exit status {status})"


def _state(sections: dict[str, str], kubelet_dir: str) -> tuple[CpuState | None, str | None]:
    text, status = _status(sections.get("cpu_state", ""))
    path = f"{kubelet_dir.rstrip('/')}/cpu_manager_state"
    if status != 0:
        return None, f"cannot read {path}: {_first_line(text, f'exit status {status}')}"
    try:
        return parse_cpu_manager_state(text), None
    except ValueError as exc:
        return None, f"{path}: {exc}"


def resolve_watched_pods(host: Host, pods: Sequence[PodRef], *, kubectl: str = "kubectl",
                         kubelet_dir: str = DEFAULT_KUBELET_DIR) -> list[WatchedPod]:
    """`pods` resolved again on `host` (in one round trip): what `collect_cluster` gives
    in its ``pods``, without the other facts. K8sError when one cannot be resolved any
    more (gone, not running, no CPUs), naming the group and why; HostError when `host`
    cannot run the script."""
    result = host.run(watched_pods_script(kubectl, kubelet_dir, (p.namespace for p in pods)),
                      timeout=60)
    sections = parse_sections(result.stdout)
    if not sections:
        reason = _first_line(result.stderr, f"exit status {result.exit_status}")
        raise K8sError(f"--watch-pod: the pods script did not run on {host.name}: {reason}",
                       "watch_pod")
    return _watched_pods(sections, pods, *_state(sections, kubelet_dir))


def _watched_pods(sections: dict[str, str], pods: Sequence[PodRef], state: CpuState | None,
                  state_reason: str | None) -> list[WatchedPod]:
    resolved = []
    for ref in pods:
        if state is None:
            raise K8sError(f"--watch-pod {ref.group}: {state_reason}", "watch_pod")
        resolved.append(resolve_pod(ref, _status(sections.get(f"pods:{ref.namespace}", ""))[0],
                                    state, sections.get("online", "")))
    return resolved


def collect_cluster(host: Host, *, kubectl: str = "kubectl",
                    kubelet_dir: str = DEFAULT_KUBELET_DIR, pods: Sequence[PodRef] = (),
                    service: ServiceRef | None = None,
                    url: str | None = None) -> ClusterFacts | None:
    """The cluster facts of `host`, with `pods` resolved to CPU sets and `service` to a URL
    (`url` keeps its scheme and path). None when no cluster tool is there and nothing was
    asked for. K8sError when a pod or the service cannot be resolved."""
    result = host.run(cluster_script(kubectl, kubelet_dir, (p.namespace for p in pods),
                                     service), timeout=120)
    sections = parse_sections(result.stdout)
    if not sections:
        reason = _first_line(result.stderr, f"exit status {result.exit_status}")
        if pods or service is not None:
            option = "watch_pod" if pods else "k8s_service"
            raise K8sError(f"cluster facts script did not run on {host.name}: {reason}", option)
        return None
    kubectl_found = sections.get("kubectl", "").strip() == "found"
    tools = set(sections.get("tools", "").split())
    if not kubectl_found and not tools and not pods and service is None:
        return None
    facts = ClusterFacts()
    _versions(sections, facts)
    state, state_reason = _state(sections, kubelet_dir)
    if state is not None:
        facts.cpu_manager_policy = state.policy
    else:
        configured = sections.get("kubelet_config", "").partition(":")[2].strip()
        if configured:
            facts.cpu_manager_policy = configured
        else:
            facts.unknown["cpu_manager_policy"] = state_reason or "no cpu_manager_state"
    if (pods or service is not None) and not kubectl_found:
        option = "watch_pod" if pods else "k8s_service"
        flag = "--watch-pod" if pods else "--k8s-service"
        raise K8sError(f"{flag} needs kubectl on {host.name}: {kubectl!r} does not run "
                       "there (give the command with --kubectl)", option)
    facts.pods = _watched_pods(sections, pods, state, state_reason)
    if service is not None:
        facts.service = resolve_service(service, _status(sections.get("service", ""))[0],
                                        _status(sections.get("nodes", ""))[0], url)
    facts.unknown = dict(sorted(facts.unknown.items()))
    return facts
