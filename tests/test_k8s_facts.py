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

import csv
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
    # A pod that does not run has no CPUs of its own yet (Pending) or is giving them back
    # (being deleted): refused by name rather than watched on the CPUs it was last given.
    pending = json.loads(pods)
    pending["items"][0]["status"]["phase"] = "Pending"
    with pytest.raises(K8sError, match=r"--watch-pod g: pod default/web-1 is Pending, not "
                       "Running"):
        resolve_pod(parse_pod_ref("g=default/web-1"), json.dumps(pending), state, "0-7")
    deleted = json.loads(pods)
    deleted["items"][0]["metadata"]["deletionTimestamp"] = "2026-11-29T08:00:00Z"
    with pytest.raises(K8sError, match=r"pod default/web-1 is terminating"):
        resolve_pod(parse_pod_ref("g=default/web-1"), json.dumps(deleted), state, "0-7")
    # During a rollout a deployment's old pod terminates while its new one runs: the group
    # is the new one.
    rollout = json.loads(_pods("u2", ["app"], name="web-2"))
    rollout["items"] += deleted["items"]
    assert [c.pod for c in resolve_pod(parse_pod_ref("g=default/web"), json.dumps(rollout),
                                       state, "0-7").containers] == ["web-2"]
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


def stand_ins(tmp_path: Path, *, node_port: int = 30088, tools: bool = True,
              istio_pods_after: tuple[int, str] | None = None) -> Path:
    """A bin directory with a stand-in kubectl (and, with `tools`, istioctl, calicoctl,
    docker, crictl, kubelet), and a kubelet directory holding the lab cpu_manager_state.
    The ingress service's http2 NodePort is `node_port`. The kubectl stand-in logs its
    arguments, one call a line, in ROOT/kubectl.log. With `istio_pods_after` (N, JSON) its
    ``get pods -n istio-system`` prints JSON from the (N+1)th call on instead of the lab
    recording: a pod restarted, rescheduled or gone while a campaign runs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    service = json.loads(read("lab_service_ingressgateway.json"))
    service["spec"]["ports"][1]["nodePort"] = node_port
    (tmp_path / "service.json").write_text(json.dumps(service))
    d = DATA
    log = tmp_path / "kubectl.log"
    istio_pods = f"cat {d}/lab_pods_istio-system.json"
    if istio_pods_after is not None:
        (tmp_path / "pods-later.json").write_text(istio_pods_after[1])
        istio_pods = (f"if [ \"$(grep -c '^get pods -n istio-system ' {log})\" -gt "
                      f"{istio_pods_after[0]} ]; then cat {tmp_path}/pods-later.json; "
                      f"else {istio_pods}; fi")
    _script(bin_dir / "kubectl", f"""case "$1" in --request-timeout=*) shift ;; esac
echo "$*" >> {log}
case "$*" in
  "version --client -o json"|"version -o json") cat {d}/kubectl_version_kudo549.json ;;
  "get pods -n istio-system -o json") {istio_pods} ;;
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
    # kubelet writes the state with Go's json.Marshal: no newline at its end.
    state = root / "kubelet" / "cpu_manager_state"
    state.write_text(state.read_text().rstrip("\n"))
    again = collect_cluster(LocalHost(), kubelet_dir=str(root / "kubelet"),
                            pods=[parse_pod_ref("ingress=istio-system/istio-ingressgateway")])
    assert again is not None and again.pods[0].cpus == [5, 22, 77, 94]


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
    proc = nhbench_cli(*_sweep_args(root, out, "--steps", "50,60"))
    assert proc.returncode == 0, proc.stderr
    assert f"http://127.0.0.1:{_port(server)}/" in proc.stderr
    # The pods are resolved at the start (with the other facts) and again before each
    # step, once each time; pods that stayed put change nothing and are not mentioned.
    assert _pod_calls(root) == {"istio-system": 3, "default": 3}
    assert "changed before step" not in proc.stderr and "ingress CPUs" not in (
        out / "report.txt").read_text()
    campaign = load_campaign(out)
    assert [step.watch_cpus["ingress"] for step in campaign.steps] == [[5, 22, 77, 94]] * 2
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
    proc = nhbench_cli("sweep", "--resume", str(out), "--steps", "50,60,70")
    assert proc.returncode == 0, proc.stderr
    resumed = load_campaign(out)
    assert len(resumed.steps) == 3 and resumed.steps[2].http_2xx > 0
    assert _pod_calls(root) == {"istio-system": 5, "default": 5}


def _pod_calls(root: Path) -> dict[str, int]:
    """How many times the stand-in kubectl listed each namespace's pods."""
    calls = (root / "kubectl.log").read_text().splitlines()
    return {namespace: calls.count(f"get pods -n {namespace} -o json")
            for namespace in ("istio-system", "default")}


def _istio_pods(*, name: str | None = None, uid: str | None = None,
                gone: bool = False) -> str:
    """The lab's istio-system pods with the ingress gateway's pod replaced (another name
    or UID: a restarted or rescheduled pod) or gone."""
    pods = json.loads(read("lab_pods_istio-system.json"))
    ingress = pods["items"][0]
    if gone:
        pods["items"].remove(ingress)
    ingress["metadata"].update({"name": name or ingress["metadata"]["name"],
                                "uid": uid or ingress["metadata"]["uid"]})
    return json.dumps(pods)


_NEW_UID = "0d1e2f30-4152-4637-8899-aabbccddeeff"


def _state_with(root: Path, uid: str, cpus: str) -> None:
    # The stand-in's state file holds the new pod's entry from the start: kubectl, not
    # the file, is what switches in the stand-in (the script reads the file first).
    state = json.loads(read("lab_cpu_manager_state.json"))
    state["entries"][uid] = {"istio-proxy": cpus}
    (root / "kubelet" / "cpu_manager_state").write_text(json.dumps(state))


def _table_rows(report: str) -> tuple[list[str], list[list[str]]]:
    lines = report.split("Steps\n-----\n", 1)[1].splitlines()
    split = [[cell.strip() for cell in line.split("  ") if cell.strip()] for line in lines]
    return split[0], [row for row in split[2:] if row and row[0].isdigit()]


def test_sweep_follows_a_pod_that_moved(tmp_path: Path, server: Any) -> None:
    # STAND-IN: the ingress gateway's pod is replaced after step 1 (kubectl lists another
    # pod, with other exclusive CPUs, from its third listing on: the start, step 1, then
    # step 2). No cluster can restart a pod here.
    root = stand_ins(tmp_path, node_port=_port(server), istio_pods_after=(
        2, _istio_pods(name="istio-ingressgateway-6f9c8d7b5-zz9qq", uid=_NEW_UID)))
    _state_with(root, _NEW_UID, "10-11")
    out = tmp_path / "c"
    proc = nhbench_cli(*_sweep_args(root, out, "--steps", "50,60,70"))
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stderr.splitlines() if "changed before step" in line]
    assert notes == [
        "nhbench: --watch-pod ingress=istio-system/istio-ingressgateway: CPUs changed before "
        "step 2: 5,22,77,94 -> 10-11 (pod istio-ingressgateway-6f9c8d7b5-k2x4p -> "
        "istio-ingressgateway-6f9c8d7b5-zz9qq); step 2 watches the new ones"]
    assert _pod_calls(root) == {"istio-system": 4, "default": 4}
    campaign = load_campaign(out)
    assert campaign.manifest.status == "completed"
    assert [step.watch_cpus["ingress"] for step in campaign.steps] == [
        [5, 22, 77, 94], [10, 11], [10, 11]]
    nighthawk = campaign.manifest.target_capture["watch_cpus"]["nighthawk"]
    assert all(step.watch_cpus["nighthawk"] == nighthawk for step in campaign.steps)
    # The reports give each step the CPUs it watched: the header each set with its steps,
    # and a column for the group that changed (not for the one that did not).
    report = (out / "report.txt").read_text()
    watched = [line.split(":", 1)[1].strip() if line.startswith("CPUs:") else line.strip()
               for line in report.split("\n\nSteps\n")[0].splitlines()[-3:]]
    assert [line.split(" (")[0] for line in watched] == [
        "ingress: 5,22,77,94", "ingress: 10-11", "nighthawk: 1-4,18-21,23,74-76,78-79"]
    assert watched[0].endswith(") in step 1") and watched[1].endswith(") in steps 2-3")
    headers, rows = _table_rows(report)
    assert "ingress CPUs" in headers and "nighthawk CPUs" not in headers
    column = headers.index("ingress CPUs")
    assert [row[column] for row in rows] == ["5,22,77,94", "10-11", "10-11"]
    with (out / "results.csv").open() as csv_file:
        table = list(csv.DictReader(csv_file))
    assert [row["target_cpus_ingress"] for row in table] == ["5,22,77,94", "10-11", "10-11"]
    assert "target_cpus_nighthawk" not in table[0]
    # The DataFrame's rows (Campaign.rows) carry the same per-step set.
    assert [row["cpus_ingress"] for row in campaign.rows()] == ["5,22,77,94", "10-11", "10-11"]
    assert "cpus_nighthawk" not in campaign.rows()[0]
    html = (out / "report.html").read_text()
    assert "ingress CPUs</th>" in html and "<td>10-11</td>" in html
    # Resumed: the pods are resolved again at the start and before the new step.
    proc = nhbench_cli("sweep", "--resume", str(out), "--steps", "50,60,70,80")
    assert proc.returncode == 0, proc.stderr
    assert "changed before step" not in proc.stderr
    resumed = load_campaign(out)
    assert [step.watch_cpus["ingress"] for step in resumed.steps][2:] == [[10, 11]] * 2
    assert _pod_calls(root) == {"istio-system": 6, "default": 6}
    assert ") in steps 2-4\n" in (out / "report.txt").read_text()


def test_sweep_says_a_pod_recreated_under_its_name(tmp_path: Path, server: Any) -> None:
    # STAND-IN, as above: the same pod name with a new UID (a stateful set's pod
    # recreated) and the same CPUs: measured as before, and said.
    root = stand_ins(tmp_path, node_port=_port(server),
                     istio_pods_after=(2, _istio_pods(uid=_NEW_UID)))
    _state_with(root, _NEW_UID, "5,22,77,94")
    out = tmp_path / "c"
    proc = nhbench_cli(*_sweep_args(root, out, "--steps", "50,60"))
    assert proc.returncode == 0, proc.stderr
    assert ("--watch-pod ingress=istio-system/istio-ingressgateway: pod "
            "istio-ingressgateway-6f9c8d7b5-k2x4p recreated (new UID) before step 2; same CPUs "
            "5,22,77,94") in proc.stderr
    assert [s.watch_cpus["ingress"] for s in load_campaign(out).steps] == [[5, 22, 77, 94]] * 2


def test_sweep_stops_when_a_watched_pod_is_gone(tmp_path: Path, server: Any) -> None:
    # STAND-IN, as above: the ingress gateway's pod is gone before step 2.
    root = stand_ins(tmp_path, node_port=_port(server),
                     istio_pods_after=(2, _istio_pods(gone=True)))
    out = tmp_path / "c"
    proc = nhbench_cli(*_sweep_args(root, out, "--steps", "50,60,70"))
    # Ended as a stop rule ends a sweep: stopped, exit 0, the steps done kept and reported.
    assert proc.returncode == 0, proc.stderr
    reason = ("before step 2: --watch-pod ingress: no pod named istio-ingressgateway or "
              "istio-ingressgateway-* in namespace istio-system (its pods: "
              "istiod-7d4b9c6f8-abcde)")
    assert f"nhbench: stopping: {reason}" in proc.stderr
    campaign = load_campaign(out)
    assert (campaign.manifest.status, campaign.manifest.stop_reason) == ("stopped", reason)
    assert len(campaign.steps) == 1 and campaign.steps[0].http_2xx > 0
    assert [path.name for path in (out / "steps").iterdir()] == [campaign.steps[0].directory
                                                                 .rpartition("/")[2]]
    assert f"Stop reason: {reason}" in (out / "report.txt").read_text()
    assert "istio-ingressgateway-*" in (out / "report.html").read_text()
    assert _pod_calls(root) == {"istio-system": 3, "default": 3}
    # Once a pod runs again, --resume continues on its CPUs.
    (root / "pods-later.json").write_text(_istio_pods(
        name="istio-ingressgateway-6f9c8d7b5-zz9qq", uid=_NEW_UID))
    _state_with(root, _NEW_UID, "10-11")
    proc = nhbench_cli("sweep", "--resume", str(out))
    assert proc.returncode == 0, proc.stderr
    assert ("--watch-pod ingress=istio-system/istio-ingressgateway: CPUs changed since step 1: "
            "5,22,77,94 -> 10-11") in proc.stderr
    resumed = load_campaign(out)
    assert resumed.manifest.status == "completed" and len(resumed.steps) == 3
    assert [step.watch_cpus["ingress"] for step in resumed.steps] == [
        [5, 22, 77, 94], [10, 11], [10, 11]]
    # adapt ends the same way; a campaign that did not end its search exits 1 there.
    adapt_root = tmp_path / "adapt"
    adapt_root.mkdir()
    root = stand_ins(adapt_root, node_port=_port(server),
                     istio_pods_after=(2, _istio_pods(gone=True)))
    args = _sweep_args(root, adapt_root / "c")
    args[args.index("--steps"):args.index("--steps") + 2] = []
    proc = nhbench_cli("adapt", *args[1:], "--slo", "p99<10s", "--min-rps", "20",
                       "--max-rps", "80")
    assert proc.returncode == 1, proc.stderr
    adapted = load_campaign(adapt_root / "c")
    assert (adapted.manifest.status, adapted.manifest.stop_reason) == ("stopped", reason)
    assert len(adapted.steps) == 1


def test_sweep_without_watched_pods_lists_no_pods(tmp_path: Path, server: Any) -> None:
    # A guard rather than a new behaviour: with --k8s-service alone nothing is resolved
    # per step (the pods' namespaces are never listed; the facts' label queries aside).
    root = stand_ins(tmp_path, node_port=_port(server))
    args = _sweep_args(root, tmp_path / "c", "--steps", "50,60")
    for pod in ("ingress=istio-system/istio-ingressgateway",
                "nighthawk=default/nighthawk-server/nighthawk-server"):
        at = args.index(pod)
        del args[at - 1:at + 1]
    proc = nhbench_cli(*args)
    assert proc.returncode == 0, proc.stderr
    assert len(load_campaign(tmp_path / "c").steps) == 2
    assert _pod_calls(root) == {"istio-system": 0, "default": 0}
    assert "get service -n istio-system istio-ingressgateway -o json" in (
        root / "kubectl.log").read_text()


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
