"""`managedFields` recorded on every write, as the API server records an Update: who set which field, by
the request's `fieldManager` or its User-Agent, keyed list items by their keys."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kube import Kube
from tests.kubesim.test_kubectl import KUBECTL, kubectl

pytestmark = pytest.mark.integration


def managers(obj: Any) -> dict[str, dict[str, Any]]:
    return {m.manager: m.fields_v1 for m in obj.metadata.managed_fields or []}


def test_each_manager_owns_the_fields_it_last_set(small: Kube) -> None:
    core = small.core
    created = core.create_namespaced_config_map(
        "default", {"metadata": {"name": "settings", "labels": {"app": "web"}}, "data": {"a": "1"}}
    )
    (entry,) = created.metadata.managed_fields
    assert (entry.manager, entry.operation, entry.api_version, entry.fields_type) == (
        "OpenAPI-Generator", "Update", "v1", "FieldsV1",
    )  # fmt: skip
    assert entry.fields_v1 == {
        "f:data": {".": {}, "f:a": {}},
        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
    }
    tuned = core.patch_namespaced_config_map(
        "settings", "default", {"data": {"a": "2", "b": "3"}}, field_manager="tuner"
    )
    assert managers(tuned) == {
        "OpenAPI-Generator": {"f:data": {".": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}},
        "tuner": {"f:data": {"f:a": {}, "f:b": {}}},
    }
    trimmed = core.patch_namespaced_config_map("settings", "default", {"data": {"b": None}})
    assert managers(trimmed)["tuner"] == {"f:data": {"f:a": {}}}  # a removed field leaves its owner
    unchanged = core.patch_namespaced_config_map("settings", "default", {"data": {"a": "2"}})
    assert unchanged.metadata.resource_version == trimmed.metadata.resource_version
    if KUBECTL is not None:
        kubectl(small.handle, "label", "configmap", "settings", "tier=db")
        labelled = core.read_namespaced_config_map("settings", "default")
        assert managers(labelled)["kubectl-label"] == {"f:metadata": {"f:labels": {"f:tier": {}}}}


def test_keyed_list_items_and_the_status_subresource(small: Kube) -> None:
    pod = small.core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "busybox", "ports": [{"containerPort": 80}]}]},
        },
    )
    spec = managers(pod)["OpenAPI-Generator"]["f:spec"]
    container = spec["f:containers"]['k:{"name":"c"}']
    assert container["."] == {} and container["f:image"] == {}
    assert 'k:{"containerPort":80,"protocol":"TCP"}' in container["f:ports"]
    assert "f:status" not in managers(pod)["OpenAPI-Generator"]  # the main resource does not own status
    status = small.core.patch_namespaced_pod_status(
        "p",
        "default",
        {"status": {"conditions": [{"type": "Example", "status": "True"}]}},
        field_manager="probe",
    )
    (probe,) = [m for m in status.metadata.managed_fields if m.manager == "probe"]
    assert probe.subresource == "status"
    assert 'k:{"type":"Example"}' in probe.fields_v1["f:status"]["f:conditions"]
