"""Cluster facts (docker, containerd, Kubernetes, Calico, Istio versions; kubelet's CPU
manager state), --watch-pod and --k8s-service.

There is no Kubernetes cluster here. The parsers are tested on outputs recorded from public
issues and documentation (tests/data/k8s/README.md names each origin). The command paths --
the script run on the target host, locally and over the `sshd` fixture's real OpenSSH
server, and the sweep that uses what it finds -- run against STAND-IN ``kubectl``,
``istioctl``, ``calicoctl``, ``docker``, ``crictl`` and ``kubelet`` scripts that print those
recordings (and the constructed ``lab_*`` files). They test nhbench's side of the
conversation, not a cluster.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from support.cli import nhbench_cli

import nhbench
from nhbench import OptionsError
from nhbench.campaign import load_campaign
from nhbench.hosts import K8sError, LocalHost, collect_cluster
from nhbench.hosts._k8s import (
    parse_calicoctl_version,
    parse_cpu_manager_state,
    parse_docker_version,
    parse_istioctl_version,
    parse_kubectl_version,
    resolve_pod,
    resolve_service,
)
from nhbench.options import parse_pod_ref, parse_service_ref, validate_sweep

DATA = Path(__file__).parent / "data" / "k8s"
SERVER_CPU = max(os.sched_getaffinity(0))
CLIENT_CPU = str(min(os.sched_getaffinity(0)))


def read(name: str) -> str:
    return (DATA / name).read_text()


# ---- parsers on recorded output ---------------------------------------------------------------


def test_versions_from_recorded_outputs() -> None:
    assert parse_kubectl_version(read("kubectl_version_kudo549.json")) == ("v1.14.3", "v1.15.0")
    # kubectl prints the client's JSON, then why there is no server.
    assert parse_kubectl_version(read("kubectl_version_no_server_is34.txt")) == (None, "v1.25.2")
    assert parse_calicoctl_version(read("calicoctl_version_calico7673.txt")) == ("v3.25.1",
                                                                                 "v3.25.1")
    assert parse_calicoctl_version(read("calicoctl_version_no_cluster_calico6436.txt")) == (
        None, "v3.23.3")
    assert parse_istioctl_version(read("istioctl_version_meshery19.json")) == ("1.6.5", "1.6.5")
    assert parse_istioctl_version(read("istioctl_version_client_only_istio7760.json"))[0] is None
    # istioctl prints a warning line before its JSON when no control plane answers.
    warned = 'no running Istio pods in "istio-system"\n' + read("istioctl_version_meshery19.json")
    assert parse_istioctl_version(warned) == ("1.6.5", "1.6.5")
    assert parse_docker_version(read("docker_version_oracle2589.txt")) == ("23.0.1", "1.6.18")
    # Before 17.06 the Server section has no Engine subsection; the client's version
    # (the same number here) must not be taken for the server's.
    assert parse_docker_version(read("docker_version_1703_k8s81728.txt")) == ("17.03.2-ce", None)
    assert parse_docker_version(read("docker_version_oracle2589.txt").split("\n\n")[0]) == (
        None, None)


def test_cpu_manager_state_formats() -> None:
    state = parse_cpu_manager_state(read("cpu_manager_state_k8s109562.json"))
    assert state.policy == "static" and state.default == "0-2,4-7"
    assert state.by_pod == {"499a37ae-89a8-4e73-a090-f86ea22a9f4c": {"cpu-qos2": "3"}}
    old = parse_cpu_manager_state(read("cpu_manager_state_pre118_k8s87249.json"))
    assert old.by_pod == {} and old.by_container_id == {
        "cdc2c5cc531dd48bceb064e5411259a46bd8b8e70974fce10a3620b5b5da2c05": "2-5"}
    empty = parse_cpu_manager_state(read("cpu_manager_state_no_entries.json"))
    assert empty.default == "0-63" and not empty.by_pod
    with pytest.raises(ValueError, match="not a cpu_manager_state"):
        parse_cpu_manager_state("cat: /var/lib/kubelet/cpu_manager_state: Permission denied")


def _pods(uid: str, containers: list[str], container_id: str | None = None,
          name: str = "cpu-qos-7d9f-abcde") -> str:
    status: dict[str, Any] = {"phase": "Running"}
    if container_id is not None:
        status["containerStatuses"] = [{"name": containers[0],
                                        "containerID": f"docker://{container_id}"}]
    return json.dumps({"items": [{"metadata": {"name": name, "uid": uid},
                                  "spec": {"containers": [{"name": c} for c in containers]},
                                  "status": status}]})


def test_watch_pod_on_recorded_states() -> None:
    state = parse_cpu_manager_state(read("cpu_manager_state_k8s109562.json"))
    uid = "499a37ae-89a8-4e73-a090-f86ea22a9f4c"
    pod = resolve_pod(parse_pod_ref("qos=default/cpu-qos"), _pods(uid, ["cpu-qos2", "log"]),
                      state, "0-7")
    # Matched as a deployment's pod (name prefix); the pinned container has its CPU, the
    # other runs in the shared pool, and the group is the union of both.
    assert pod.matched == "name prefix"
    assert [(c.container, c.cpus, c.source) for c in pod.containers] == [
        ("cpu-qos2", "3", "exclusive"), ("log", "0-2,4-7", "shared pool")]
    assert pod.cpus == list(range(8))
    only = resolve_pod(parse_pod_ref("qos=default/cpu-qos/cpu-qos2"),
                       _pods(uid, ["cpu-qos2", "log"]), state, "0-7")
    assert only.cpus == [3]
    # Before kubelet 1.18 the state is keyed by container ID, which the pod's status has.
    old = parse_cpu_manager_state(read("cpu_manager_state_pre118_k8s87249.json"))
    cid = "cdc2c5cc531dd48bceb064e5411259a46bd8b8e70974fce10a3620b5b5da2c05"
    pinned = resolve_pod(parse_pod_ref("t=default/pod-test"),
                         _pods("u", ["app"], cid, name="pod-test"), old, "0-17")
    assert pinned.matched == "pod name" and pinned.cpus == [2, 3, 4, 5]
    # Policy none keeps no CPU set: every container runs on every online CPU.
    none = parse_cpu_manager_state('{"policyName":"none","defaultCpuSet":"","checksum":1}')
    shared = resolve_pod(parse_pod_ref("t=default/pod-test"), _pods("u", ["app"],
                                                                      name="pod-test"),
                         none, "0-3")
    assert shared.cpus == [0, 1, 2, 3] and shared.containers[0].source == "all CPUs"


def test_watch_pod_refusals_name_what_is_missing() -> None:
    state = parse_cpu_manager_state(read("cpu_manager_state_k8s109562.json"))
    pods = _pods("u", ["app"], name="web-1")
    with pytest.raises(K8sError, match=r"no pod named ingress or ingress-\* in namespace "
                       r"default \(its pods: web-1\)"):
        resolve_pod(parse_pod_ref("g=default/ingress"), pods, state, "0-7")
    with pytest.raises(K8sError, match=r"has no container proxy \(its containers: app\)"):
        resolve_pod(parse_pod_ref("g=default/web-1/proxy"), pods, state, "0-7")
    with pytest.raises(K8sError, match="kubectl get pods -n default failed: Error from server "
                       r"\(Forbidden\)"):
        resolve_pod(parse_pod_ref("g=default/web"), 'Error from server (Forbidden): pods is '
                    'forbidden\nexit 1', state, "0-7")


def test_service_url_from_recorded_and_lab_services() -> None:
    nodes = read("lab_nodes.json")
    recorded = resolve_service(parse_service_ref("default/redis-master"),
                               read("service_spec_k8s8937.json"), nodes, None)
    assert recorded.url == "http://127.0.0.1:31573/" and recorded.node == "node1"
    gateway = read("lab_service_ingressgateway.json")
    https = resolve_service(parse_service_ref("istio-system/istio-ingressgateway:https"),
                            gateway, nodes, None)
    assert https.url == "https://127.0.0.1:30443/" and https.port == 443
    kept = resolve_service(parse_service_ref("istio-system/istio-ingressgateway:80"), gateway,
                           nodes, "https://gw.example/api/v1?x=1")
    assert kept.url == "https://127.0.0.1:30088/api/v1?x=1" and kept.port_name == "http2"
    with pytest.raises(K8sError, match=r"several ports; name one with :PORT \(status-port:"
                       r"15021->32257, http2:80->30088, https:443->30443\)"):
        resolve_service(parse_service_ref("istio-system/istio-ingressgateway"), gateway, nodes,
                        None)
    with pytest.raises(K8sError, match="service type ClusterIP has no NodePort on "
                       "grpc-xds:15010 "):
        resolve_service(parse_service_ref("istio-system/istiod"),
                        read("lab_service_clusterip.json"), nodes, None)
    with pytest.raises(K8sError, match=r"has no port admin \(its ports: status-port"):
        resolve_service(parse_service_ref("istio-system/istio-ingressgateway:admin"), gateway,
                        nodes, None)


@pytest.mark.parametrize(("settings", "message"), [
    ({"watch_pod": ["ingress"]}, "--watch-pod 'ingress': expected NAME=NAMESPACE/POD"),
    ({"watch_pod": ["i=istio-system/Gateway"]}, "'Gateway' is not a Kubernetes name"),
    ({"watch_pod": ["a=ns/p"], "watch_cpus": ["a=0"]}, "group a is given twice"),
    ({"k8s_service": "gw:80"}, "--k8s-service 'gw:80': expected NAMESPACE/NAME[:PORT]"),
    ({"kubectl": "k3s kubectl"}, "--kubectl: only meaningful with --watch-pod or "
                                 "--k8s-service"),
])
def test_option_syntax_refused_by_name(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(OptionsError, match=message.replace("[", r"\[").replace("]", r"\]")):
        validate_sweep({"url": "http://127.0.0.1:1/", "rps": 10, **settings})


def test_k8s_service_stands_for_the_url() -> None:
    sweep, _ = validate_sweep({"k8s_service": "istio-system/istio-ingressgateway:http2",
                               "rps": 10})
    assert sweep.url is None and sweep.k8s_service == "istio-system/istio-ingressgateway:http2"


# ---- the command paths, with STAND-IN tools -------------------------------------------------


def _script(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n# STAND-IN: prints an output recorded in tests/data/k8s "
                    "(there is no cluster here).\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def stand_ins(tmp_path: Path, *, node_port: int = 30088, tools: bool = True) -> Path:
    """A bin directory with a stand-in kubectl (and, with `tools`, istioctl, calicoctl,
    docker, crictl, kubelet), and a kubelet directory holding the lab cpu_manager_state.
    The ingress service's http2 NodePort is `node_port`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    service = json.loads(read("lab_service_ingressgateway.json"))
    service["spec"]["ports"][1]["nodePort"] = node_port
    (tmp_path / "service.json").write_text(json.dumps(service))
    d = DATA
    _script(bin_dir / "kubectl", f"""case "$1" in --request-timeout=*) shift ;; esac
case "$*" in
  "version --client -o json"|"version -o json") cat {d}/kubectl_version_kudo549.json ;;
  "get pods -n istio-system -o json") cat {d}/lab_pods_istio-system.json ;;
  "get pods -n default -o json") cat {d}/lab_pods_default.json ;;
  "get pods -A -l app=istiod -o json") cat {d}/lab_pods_istio-system.json ;;
  "get pods -A -l k8s-app=calico-node -o json") echo '{{"items": []}}' ;;
  "get service -n istio-system istio-ingressgateway -o json") cat {tmp_path}/service.json ;;
  "get service -n istio-system istiod -o json") cat {d}/lab_service_clusterip.json ;;
  "get nodes -o json") cat {d}/lab_nodes.json ;;
  *) echo "stand-in kubectl has no recording for: $*" >&2; exit 1 ;;
esac
""")
    if tools:
        _script(bin_dir / "istioctl", f"cat {d}/istioctl_version_meshery19.json\n")
        _script(bin_dir / "calicoctl", f"cat {d}/calicoctl_version_calico7673.txt\n")
        _script(bin_dir / "docker", f"cat {d}/docker_version_oracle2589.txt\n")
        _script(bin_dir / "crictl", "echo 'crictl stand-in must not be needed' >&2; exit 1\n")
        _script(bin_dir / "kubelet", "echo 'Kubernetes v1.14.3'\n")
    kubelet = tmp_path / "kubelet"
    kubelet.mkdir()
    (kubelet / "cpu_manager_state").write_text(read("lab_cpu_manager_state.json"))
    return tmp_path


def test_collect_cluster_locally_with_stand_ins(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    root = stand_ins(tmp_path)
    monkeypatch.setenv("PATH", f"{root / 'bin'}:{os.environ['PATH']}")
    facts = collect_cluster(
        LocalHost(), kubelet_dir=str(root / "kubelet"),
        pods=[parse_pod_ref("ingress=istio-system/istio-ingressgateway"),
              parse_pod_ref("sidecar=default/nighthawk-server/istio-proxy"),
              parse_pod_ref("istiod=istio-system/istiod")],
        service=parse_service_ref("istio-system/istio-ingressgateway:http2"))
    assert facts is not None
    assert (facts.docker, facts.containerd, facts.kubernetes_server, facts.kubelet,
            facts.calico, facts.istio, facts.cpu_manager_policy) == (
        "23.0.1", "1.6.18", "v1.14.3", "v1.14.3", "v3.25.1", "1.6.5", "static")
    assert facts.unknown == {}
    ingress, sidecar, istiod = facts.pods
    assert ingress.cpus == [5, 22, 77, 94] and ingress.matched == "name prefix"
    proxy = ingress.containers[0]
    assert (proxy.source, proxy.memory_limit, proxy.memory_request) == ("exclusive", "4Gi",
                                                                        "4Gi")
    assert sidecar.cpus == [7, 9] and [c.container for c in sidecar.containers] == [
        "istio-proxy"]
    # istiod is Burstable: no exclusive CPUs, so the shared pool, named as such.
    assert istiod.containers[0].source == "shared pool" and 0 in istiod.cpus
    assert 5 not in istiod.cpus
    assert facts.service is not None and facts.service.url == "http://127.0.0.1:30088/"


def test_missing_tools_are_unknown_with_reasons(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # Only a stand-in kubectl, and a PATH with nothing else cluster-related.
    root = stand_ins(tmp_path, tools=False)
    monkeypatch.setenv("PATH", f"{root / 'bin'}:/usr/bin:/bin")
    facts = collect_cluster(LocalHost(), kubelet_dir=str(tmp_path / "nowhere"))
    assert facts is not None
    assert facts.kubernetes_server == "v1.14.3" and facts.istio == "1.16.1"  # istiod's image
    assert facts.unknown["calico"].startswith("calicoctl not installed; no calico-node pod")
    assert facts.unknown["kubelet"] == "kubelet not installed on this host"
    assert facts.unknown["cpu_manager_policy"].startswith(
        f"cannot read {tmp_path}/nowhere/cpu_manager_state")
    # A pod cannot be watched without the state: refused, naming the file.
    with pytest.raises(K8sError, match="--watch-pod ingress: cannot read .*nowhere/"
                       "cpu_manager_state"):
        collect_cluster(LocalHost(), kubelet_dir=str(tmp_path / "nowhere"),
                        pods=[parse_pod_ref("ingress=istio-system/istio-ingressgateway")])
    # No kubectl at all: nothing cluster-related, nothing reported.
    only_sh = tmp_path / "only-sh"
    only_sh.mkdir()
    (only_sh / "sh").symlink_to("/bin/sh")
    monkeypatch.setenv("PATH", str(only_sh))
    assert collect_cluster(LocalHost()) is None


@pytest.fixture
def server() -> Any:
    with nhbench.TestServer(cpus=[SERVER_CPU]) as test_server:
        yield test_server


def _port(server: Any) -> int:
    return int(server.url.rstrip("/").rpartition(":")[2])


def _sweep_args(root: Path, out: Path, *extra: str) -> list[str]:
    return ["sweep", "--k8s-service", "istio-system/istio-ingressgateway:http2",
            "--watch-pod", "ingress=istio-system/istio-ingressgateway",
            "--watch-pod", "nighthawk=default/nighthawk-server/nighthawk-server",
            "--kubectl", str(root / "bin" / "kubectl"), "--kubelet-dir", str(root / "kubelet"),
            "--steps", "50", "--duration", "1s", "--connections", "2", "--cpus", CLIENT_CPU,
            "--no-mpstat", "--out", str(out), *extra]


def test_sweep_finds_target_and_cpus_locally(tmp_path: Path, server: Any) -> None:
    root = stand_ins(tmp_path, node_port=_port(server))
    out = tmp_path / "c"
    proc = nhbench_cli(*_sweep_args(root, out))
    assert proc.returncode == 0, proc.stderr
    assert f"http://127.0.0.1:{_port(server)}/" in proc.stderr
    campaign = load_campaign(out)
    manifest = campaign.manifest
    assert manifest.url == f"http://127.0.0.1:{_port(server)}/"
    assert campaign.steps[0].http_2xx > 0  # the load reached the server the service names
    cluster = manifest.facts["target"].cluster
    assert cluster is not None and [p.group for p in cluster.pods] == ["ingress", "nighthawk"]
    assert manifest.target_capture is not None
    assert manifest.target_capture["watch_cpus"]["ingress"] == [5, 22, 77, 94]
    assert manifest.target_capture["watch_cpus"]["nighthawk"] == [
        1, 2, 3, 4, 18, 19, 20, 21, 23, 74, 75, 76, 78, 79]
    report = (out / "report.txt").read_text()
    assert "ingress cpu" in report and "5,22,77,94 (4) exclusive" in report
    assert "4Gi/4Gi" in report
    assert "Kubernetes version" in report
    # The cluster table is label/value rows under its title: no empty header line, no rule.
    cluster_lines = report.split("Cluster (target node)\n", 1)[1].splitlines()
    assert cluster_lines[0] == "-" * len("Cluster (target node)")
    assert cluster_lines[1].strip() and not cluster_lines[1].startswith("-"), cluster_lines[:3]
    # A resumed campaign finds the service again (its URL is the node's, not the options').
    proc = nhbench_cli("sweep", "--resume", str(out), "--steps", "50,60")
    assert proc.returncode == 0, proc.stderr
    resumed = load_campaign(out)
    assert len(resumed.steps) == 2 and resumed.steps[1].http_2xx > 0


def test_sweep_refuses_unresolvable_pod_and_service(tmp_path: Path) -> None:
    root = stand_ins(tmp_path)
    out = tmp_path / "c"
    args = _sweep_args(root, out)
    args[args.index("istio-system/istio-ingressgateway:http2")] = "istio-system/istiod"
    proc = nhbench_cli(*args)
    assert proc.returncode == 2, proc.stderr
    assert "--k8s-service istio-system/istiod: service type ClusterIP has no NodePort" in (
        proc.stderr)
    assert not out.exists()
    args = _sweep_args(root, out)
    args[args.index("ingress=istio-system/istio-ingressgateway")] = "ingress=istio-system/egress"
    proc = nhbench_cli(*args)
    assert proc.returncode == 2 and "--watch-pod ingress: no pod named egress" in proc.stderr
    assert not out.exists()


def test_sweep_over_ssh_resolves_on_the_target(sshd: Any, tmp_path: Path, server: Any) -> None:
    # Over SSH only the stand-in kubectl (given by absolute path) is there: the other
    # tools are not on the remote PATH and show as unknown, with the reason.
    root = stand_ins(tmp_path, node_port=_port(server))
    out = tmp_path / "c"
    proc = nhbench_cli(*_sweep_args(root, out, "--ssh", sshd.address, "--ssh-key",
                                    str(sshd.user_key), "--ssh-known-hosts",
                                    str(sshd.known_hosts)))
    assert proc.returncode == 0, proc.stderr
    manifest = load_campaign(out).manifest
    target = manifest.facts["target"]
    assert target.host == manifest.ssh and target.cluster is not None
    assert target.cluster.pods[0].cpus == [5, 22, 77, 94]
    assert target.cluster.kubernetes_server == "v1.14.3"
    assert target.cluster.unknown.get("calico", "").startswith("calicoctl not installed")
    assert manifest.url == f"http://127.0.0.1:{_port(server)}/"
