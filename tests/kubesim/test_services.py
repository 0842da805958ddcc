"""Services as the API server stores them (defaults, a cluster IP and node ports allocated and kept) and
as `kubectl get` prints them, beside Deployments' READY as ready/desired."""

from __future__ import annotations

import ipaddress
from typing import Any

import kubernetes
import pytest

from tests.kube import Kube, refusal
from tests.kubesim.test_kubectl import KUBECTL, kubectl
from tests.kubesim.test_schema import request

pytestmark = [pytest.mark.integration]
SERVICES = "/api/v1/namespaces/default/services"


@pytest.fixture
def kube(small: Kube) -> Kube:
    return small


def service(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"selector": {"app": name}, "ports": [{"port": 80}], **spec}}


def test_a_service_is_defaulted_and_given_a_cluster_ip_of_its_own(kube: Kube) -> None:
    code, web, _ = request(kube, "POST", SERVICES, service("web"))
    assert code == 201
    spec = web["spec"]
    assert ipaddress.ip_address(spec["clusterIP"]) in ipaddress.ip_network("127.96.0.0/16")
    assert spec["clusterIPs"] == [spec["clusterIP"]]
    assert {k: spec[k] for k in ("type", "sessionAffinity", "ipFamilies", "ipFamilyPolicy")} == {
        "type": "ClusterIP",
        "sessionAffinity": "None",
        "ipFamilies": ["IPv4"],
        "ipFamilyPolicy": "SingleStack",
    }
    assert spec["internalTrafficPolicy"] == "Cluster"
    assert spec["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80}]
    assert web["status"] == {"loadBalancer": {}}
    _, api, _ = request(kube, "POST", SERVICES, service("api", type="NodePort"))
    assert api["spec"]["clusterIP"] != spec["clusterIP"]
    assert 30000 <= api["spec"]["ports"][0]["nodePort"] <= 32767
    _, headless, _ = request(kube, "POST", SERVICES, service("db", clusterIP="None"))
    assert headless["spec"]["clusterIPs"] == ["None"]


def test_what_was_allocated_is_kept_and_may_not_change(kube: Kube) -> None:
    _, api, _ = request(kube, "POST", SERVICES, service("api", type="NodePort"))
    replaced = {**service("api", type="NodePort"), "metadata": api["metadata"]}
    code, kept, _ = request(kube, "PUT", f"{SERVICES}/api", replaced)
    assert code == 200, kept
    assert kept["spec"]["clusterIP"] == api["spec"]["clusterIP"]
    assert kept["spec"]["ports"][0]["nodePort"] == api["spec"]["ports"][0]["nodePort"]
    with pytest.raises(kubernetes.client.ApiException) as refused:
        kube.core.patch_namespaced_service("api", "default", {"spec": {"clusterIP": "127.96.9.9"}})
    assert refusal(refused.value)["message"] == (
        'Service "api" is invalid: spec.clusterIPs[0]: Invalid value: "127.96.9.9": may not change once set'
    )


@pytest.mark.kubectl
@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")
def test_kubectl_prints_services_and_deployments_as_the_api_server_does(kube: Kube) -> None:
    _, web, _ = request(kube, "POST", SERVICES, service("web", type="NodePort"))
    lines = kubectl(kube.handle, "get", "svc", "web", "-o", "wide").splitlines()
    assert lines[0].split() == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE", "SELECTOR"]
    cells = lines[1].split()
    node_port = web["spec"]["ports"][0]["nodePort"]
    assert cells[:5] == ["web", "NodePort", web["spec"]["clusterIP"], "<none>", f"80:{node_port}/TCP"]
    assert cells[6] == "app=web"
    deployments = kubectl(kube.handle, "get", "deploy", "-A").splitlines()
    assert deployments[0].split() == ["NAMESPACE", "NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    for line in deployments[1:]:
        ready, desired = line.split()[2].split("/")
        assert int(ready) <= int(desired)


def test_a_strategic_merge_patch_merges_the_lists_the_type_merges_and_replaces_the_rest(kube: Kube) -> None:
    """By the schema's patch strategy and merge key: a Service's ports merge by `port` (the official
    client's e2e test adds one this way), a node's taints and a pod's tolerations are replaced whole."""
    ports = [{"name": "web", "port": 80, "protocol": "TCP", "targetPort": 80}]
    service = {"metadata": {"name": "two-ports"}, "spec": {"ports": ports, "selector": {"app": "x"}}}
    kube.core.create_namespaced_service("default", service)
    added = [{"name": "new", "port": 8080, "protocol": "TCP", "targetPort": 8080}]
    patched = kube.core.patch_namespaced_service("two-ports", "default", {"spec": {"ports": added}})
    assert [(p.name, p.port) for p in patched.spec.ports] == [("web", 80), ("new", 8080)]
    taint = {"key": "a", "effect": "NoSchedule"}
    kube.core.create_node({"metadata": {"name": "tainted"}, "spec": {"taints": [taint]}})
    other = {"key": "b", "effect": "NoSchedule"}
    node = kube.core.patch_node("tainted", {"spec": {"taints": [other]}})
    assert [t.key for t in node.spec.taints] == ["b"]
