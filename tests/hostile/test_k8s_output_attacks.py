"""Hostile cluster outputs through the cluster facts, --watch-pod and --k8s-service
(docs/sweep.md "Cluster facts").

What kubectl, istioctl, calicoctl and docker print on the target host is read, never
trusted: a compromised or broken node may print JSON of another shape (lists where objects
belong, numbers where strings belong), nesting deep enough to exhaust the parser's stack,
CPU lists naming a hundred million CPUs, or text that only looks like JSON. Each must end as
an unknown fact or one K8sError naming the command, never as a traceback, and never as a
watched group of made-up CPUs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from nhbench.hosts import K8sError
from nhbench.hosts._k8s import (
    parse_calicoctl_version,
    parse_cpu_manager_state,
    parse_docker_version,
    parse_image_tag,
    parse_istioctl_version,
    parse_kubectl_version,
    resolve_pod,
    resolve_service,
)
from nhbench.options import parse_pod_ref, parse_service_ref

pytestmark = pytest.mark.hostile

DEEP = "[" * 200_000 + "]" * 200_000
STATE = parse_cpu_manager_state('{"policyName":"static","defaultCpuSet":"0-3",'
                                '"entries":{"u":{"app":"2"}},"checksum":1}')
NODES = json.dumps({"items": [{"metadata": {"name": "n"}, "status": {
    "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}],
    "conditions": [{"type": "Ready", "status": "True"}]}}]})

SHAPES: list[Any] = [
    [], 7, "text", None, {"items": "pods"}, {"items": [7, "x", None]},
    {"items": [{"metadata": []}]}, {"items": [{"metadata": {"name": "web"}, "spec": []}]},
    {"items": [{"metadata": {"name": "web", "uid": "u"},
                "spec": {"containers": [{"name": "app"}]},
                "status": {"containerStatuses": "running"}}]},
    {"items": [{"metadata": {"name": "web", "uid": "u"},
                "spec": {"containers": ["app"]}}]},
]


@pytest.mark.parametrize("document", SHAPES)
def test_pods_of_any_shape_resolve_or_are_refused(document: Any) -> None:
    try:
        pod = resolve_pod(parse_pod_ref("g=default/web"), json.dumps(document), STATE, "0-3")
    except K8sError as exc:
        assert str(exc).startswith("--watch-pod g:") and "\n" not in str(exc)
    else:
        # Whatever was accepted names CPUs the state gave, nothing else.
        assert set(pod.cpus) <= {0, 1, 2, 3}


@pytest.mark.parametrize("text", [DEEP, "{" * 100_000, '{"items": [' + "{}," * 50_000 + "{}]}",
                                  "\x00\xff" * 1000, "exit 0"])
def test_pods_output_garbage_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(K8sError) as raised:
        resolve_pod(parse_pod_ref("g=default/web"), text, STATE, "0-3")
    assert "\n" not in str(raised.value)


def test_state_naming_absurd_cpus_is_refused() -> None:
    huge = parse_cpu_manager_state('{"policyName":"static","defaultCpuSet":"0",'
                                   '"entries":{"u":{"app":"0-99999999"}}}')
    pods = json.dumps({"items": [{"metadata": {"name": "web", "uid": "u"},
                                  "spec": {"containers": [{"name": "app"}]}}]})
    with pytest.raises(K8sError, match="more than any machine has"):
        resolve_pod(parse_pod_ref("g=default/web"), pods, huge, "0")


@pytest.mark.parametrize("text", ['{"policyName":"static","entries":[1,2]}', DEEP, "[]",
                                  '{"defaultCpuSet":"0-3"}'])
def test_state_of_another_shape_is_not_a_state(text: str) -> None:
    with pytest.raises(ValueError):
        parse_cpu_manager_state(text)


@pytest.mark.parametrize("spec", [
    {"ports": "80"}, {"ports": [{"name": "http", "port": 80, "nodePort": "x"}]},
    {"ports": [None, 7]}, [], {"ports": [{"name": "http", "port": 80, "nodePort": 0}]},
])
def test_services_of_any_shape_are_refused(spec: Any) -> None:
    with pytest.raises(K8sError) as raised:
        resolve_service(parse_service_ref("ns/svc"), json.dumps({"spec": spec}), NODES, None)
    assert str(raised.value).startswith("--k8s-service ns/svc:")


@pytest.mark.parametrize("nodes", ['{"items": [{"status": {"addresses": "x"}}]}', DEEP,
                                   '{"items": []}'])
def test_nodes_without_an_address_are_refused(nodes: str) -> None:
    service = json.dumps({"spec": {"ports": [{"port": 80, "nodePort": 30080}]}})
    with pytest.raises(K8sError, match="--k8s-service ns/svc:"):
        resolve_service(parse_service_ref("ns/svc"), service, nodes, None)


@pytest.mark.parametrize("text", [DEEP, '{"serverVersion": 7, "clientVersion": []}',
                                  '{"meshVersion": 5}', '{"meshVersion": [7, {"Info": []}]}',
                                  '{"items": [{"spec": {"containers": [7]}}]}', "\x00" * 100])
def test_version_outputs_of_any_shape_are_unknown(text: str) -> None:
    assert parse_kubectl_version(text)[0] is None
    assert parse_istioctl_version(text)[0] is None
    assert parse_image_tag(text, "pilot") is None
    assert parse_calicoctl_version(text)[0] is None
    assert parse_docker_version(text) == (None, None)
