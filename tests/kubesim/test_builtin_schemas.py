"""Built-in objects decoded by Kubernetes 1.32's own OpenAPI schemas (a field the type lacks dropped and
reported as `fieldValidation` says), defaulted as its `SetDefaults_*` functions and admission plugins do,
and explained by `kubectl explain` from the API server's own documents."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kube import Kube
from tests.kubesim.test_kubectl import KUBECTL, kubectl
from tests.kubesim.test_schema import request

pytestmark = [pytest.mark.integration]
PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture
def kube(small: Kube) -> Kube:
    return small


def pod(name: str, **container: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "app:1", **container}]},
    }


def test_a_field_the_type_lacks_is_dropped_and_reported_as_field_validation_says(kube: Kube) -> None:
    body = pod("odd", colour="blue")
    body["spec"]["nodeNam"] = "node-1"
    code, made, warnings = request(kube, "POST", PODS, body)
    assert code == 201
    assert warnings == [  # Warning headers, as the API server writes them
        '299 - "unknown field \\"spec.containers[0].colour\\""',
        '299 - "unknown field \\"spec.nodeNam\\""',
    ]
    assert "nodeNam" not in made["spec"] and "colour" not in made["spec"]["containers"][0]
    body["metadata"]["name"] = "strict"
    code, status, _ = request(kube, "POST", f"{PODS}?fieldValidation=Strict", body)
    assert (code, status["message"]) == (
        400,
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field '
        '"spec.containers[0].colour", unknown field "spec.nodeNam"',
    )
    body["metadata"]["name"] = "quiet"
    code, _, warnings = request(kube, "POST", f"{PODS}?fieldValidation=Ignore", body)
    assert (code, warnings) == (201, [])


@pytest.mark.parametrize(
    ("field", "value", "refusal"),
    [
        ("replicas", "3", "string into Go struct field DeploymentSpec.spec.replicas of type int32"),
        ("replicas", 1.5, "number 1.5 into Go struct field DeploymentSpec.spec.replicas of type int32"),
        ("paused", "yes", "string into Go struct field DeploymentSpec.spec.paused of type bool"),
        (
            "selector",
            ["app"],
            "array into Go struct field DeploymentSpec.spec.selector of type v1.LabelSelector",
        ),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_as_the_decoder_words_it(
    kube: Kube, field: str, value: Any, refusal: str
) -> None:
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "typed"},
        "spec": {field: value},
    }
    code, status, _ = request(kube, "POST", "/apis/apps/v1/namespaces/default/deployments", body)
    assert (code, status["reason"]) == (400, "BadRequest")
    expected = (
        'Deployment in version "v1" cannot be handled as a Deployment: json: cannot unmarshal ' + refusal
    )
    assert status["message"] == expected
    labelled = pod("labelled")
    labelled["metadata"]["labels"] = {"tier": 1}
    code, status, _ = request(kube, "POST", PODS, labelled)
    assert (code, status["message"]) == (
        400,
        'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal number into Go struct field '
        "ObjectMeta.metadata.labels of type string",
    )
    quantities = pod("quantities", resources={"requests": {"cpu": 1, "memory": "1Gi"}})
    assert request(kube, "POST", PODS, quantities)[0] == 201  # a quantity takes a number or a string


def test_a_pod_is_defaulted_as_the_api_server_defaults_it(kube: Kube) -> None:
    probe = {"httpGet": {"port": 8080}}
    body = pod("full", ports=[{"containerPort": 8080}], readinessProbe=probe)
    body["spec"]["containers"].append({"name": "latest", "image": "registry.example.com:5000/tool"})
    body["spec"]["volumes"] = [{"name": "conf", "secret": {"secretName": "s"}}, {"name": "scratch"}]
    code, made, _ = request(kube, "POST", PODS, body)
    assert code == 201
    spec = made["spec"]
    app, tool = spec["containers"]
    assert (app["imagePullPolicy"], tool["imagePullPolicy"]) == ("IfNotPresent", "Always")
    assert (app["terminationMessagePath"], app["terminationMessagePolicy"]) == (
        "/dev/termination-log",
        "File",
    )
    assert app["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]
    assert app["readinessProbe"] == {
        "httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"},
        "timeoutSeconds": 1,
        "periodSeconds": 10,
        "successThreshold": 1,
        "failureThreshold": 3,
    }
    assert spec["volumes"][0]["secret"]["defaultMode"] == 420 and spec["volumes"][1]["emptyDir"] == {}
    assert (spec["enableServiceLinks"], spec["preemptionPolicy"]) == (True, "PreemptLowerPriority")
    assert [(t["key"], t["effect"], t["tolerationSeconds"]) for t in spec["tolerations"]] == [
        ("node.kubernetes.io/not-ready", "NoExecute", 300),
        ("node.kubernetes.io/unreachable", "NoExecute", 300),
    ]


def test_a_deployment_and_its_template_are_defaulted(kube: Kube) -> None:
    template = {"metadata": {"labels": {"app": "d"}}, "spec": pod("x")["spec"]}
    body = {
        "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": template},
    }
    code, made, _ = request(kube, "POST", "/apis/apps/v1/namespaces/default/deployments", body)
    assert code == 201
    spec = made["spec"]
    assert (spec["progressDeadlineSeconds"], spec["revisionHistoryLimit"], spec["replicas"]) == (600, 10, 1)
    container = spec["template"]["spec"]["containers"][0]
    assert container["imagePullPolicy"] == "IfNotPresent" and container["resources"] == {}


@pytest.mark.kubectl
@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")
def test_kubectl_explain_reads_the_api_servers_own_schema(kube: Kube) -> None:
    explained = kubectl(kube.handle, "explain", "pods.spec.schedulingGates")
    assert "FIELD: schedulingGates <[]PodSchedulingGate>" in explained, explained
    assert "SchedulingGates is an opaque list of values" in explained
