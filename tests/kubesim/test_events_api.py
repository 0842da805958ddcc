"""`events.k8s.io/v1` Events as the API server serves them: the same objects as core `v1` Events, in either
version with the fields converted, created through the new API only with what it requires."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import kubernetes
import pytest

from tests.kube import Kube
from tests.kubesim.test_api import raw_request

pytestmark = pytest.mark.integration


def events_api(kube: Kube) -> Any:
    return kubernetes.client.EventsV1Api(kube.api)


def test_an_event_written_in_either_version_reads_in_the_other(small: Kube) -> None:
    api = events_api(small)
    pod = small.core.list_namespaced_pod("default").items[0]
    regarding = {"kind": "Pod", "namespace": "default", "name": pod.metadata.name, "uid": pod.metadata.uid}
    body: dict[str, Any] = {
        "metadata": {"name": "moved.1"},
        "eventTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "type": "Normal",
        "reason": "Migrated",
        "action": "Evict",
        "note": "moved into its reserved room",
        "regarding": regarding,
        "reportingController": "podherd.io/tracker",
        "reportingInstance": "tracker-0",
    }
    listed = api.list_namespaced_event("default", field_selector="reason=Migrated")
    api.create_namespaced_event("default", body)
    stream = kubernetes.watch.Watch().stream(
        api.list_namespaced_event,
        "default",
        field_selector="reason=Migrated",
        resource_version=listed.metadata.resource_version,
        timeout_seconds=5,
    )
    event = next(iter(stream))
    assert (event["type"], event["object"].metadata.name) == ("ADDED", "moved.1")
    seen = {"default/moved.1": event["object"]}
    assert seen["default/moved.1"].note == "moved into its reserved room"
    core = small.core.read_namespaced_event("moved.1", "default")
    assert (core.message, core.reporting_component, core.involved_object.uid) == (
        "moved into its reserved room", "podherd.io/tracker", pod.metadata.uid,
    )  # fmt: skip
    assert core.event_time is not None and core.count is None

    patched = api.patch_namespaced_event("moved.1", "default", {"note": "and Ready"})
    assert patched.note == "and Ready" == small.core.read_namespaced_event("moved.1", "default").message
    api.delete_namespaced_event("moved.1", "default")
    assert small.core.list_namespaced_event("default", field_selector="reason=Migrated").items == []


def test_the_new_api_refuses_an_event_without_what_it_requires(small: Kube) -> None:
    body = {"metadata": {"name": "bare"}, "type": "Loud", "deprecatedCount": 3}
    code, status = raw_request(small, "POST", "/apis/events.k8s.io/v1/namespaces/default/events", body)
    assert code == 422
    assert status["message"] == (
        'Event.events.k8s.io "bare" is invalid: [eventTime: Required value, type: Invalid value: "": has '
        "invalid value: Loud, reportingController: Required value, reportingInstance: Required value, "
        'action: Required value, reason: Required value, count: Invalid value: "": needs to be unset]'
    )
    # The core API keeps its old leniency, and the new one shows its counters as deprecated.
    small.core.create_namespaced_event(
        "default",
        {
            "metadata": {"name": "old"},
            "involvedObject": {"kind": "Pod", "name": "x"},
            "source": {"component": "kubelet"},
            "count": 2,
        },
    )
    code, old = raw_request(small, "GET", "/apis/events.k8s.io/v1/namespaces/default/events/old")
    assert code == 200 and old["eventTime"] is None  # required in this version: null, as Go writes it
    assert (old["regarding"]["name"], old["deprecatedSource"], old["deprecatedCount"]) == (
        "x", {"component": "kubelet"}, 2,
    )  # fmt: skip
