"""Drain intents on the request subject: the tracker plans the drain with kubectl's rules, cordons the node
and records the drain on it, and creates a job per pod, once, however often the drain is sent."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kubesim.sim import SimHandle
from podherd.harness.servers import Server
from services.tracker.intake.drains import Drains
from services.tracker.intake.intents import IntentIntake
from shared.api import codec
from shared.api.drain import DrainOptions, node_hash
from shared.api.messages import DrainIntent, DrainReply, IntentReply
from shared.api.names import ANNOTATION_DRAIN_NODE, ANNOTATION_NODE_DRAIN, LABEL_DRAIN
from shared.config.loader import config_from_dict
from shared.kube.client import KubeClient
from shared.nats import bus
from shared.nats.publisher import Publisher
from tests.conftest import NatsScope
from tests.kube import DRAIN, EVICT, Kube, bearer, client_for, requester, with_crds
from tests.security.doors import checked

pytestmark = pytest.mark.integration
GROUP, VERSION, PLURAL = "scheduling.koordinator.sh", "v1alpha1", "podmigrationjobs"


@dataclasses.dataclass(frozen=True)
class Signed(bus.Subjects):
    """The subjects, and the headers of a request signed by a requester that may drain any node."""

    headers: dict[str, str] = dataclasses.field(default_factory=dict)


@contextlib.asynccontextmanager
async def tracker_intake(kube: Kube, nats_srv: Server, nats_scope: NatsScope) -> AsyncIterator[Signed]:
    config = config_from_dict(
        {
            "nats": {"url": nats_srv.url, "subjectPrefix": nats_scope.prefix},
            "kubernetes": {"kubeconfig": str(kube.handle.kubeconfig)},
        }
    )
    subjects = Signed(nats_scope.prefix, bearer(requester(kube, "drainer", [*DRAIN, EVICT])))
    client = KubeClient.from_config(config.kubernetes)
    publisher = Publisher(nats_scope.nc)
    drains = Drains(client, publisher, subjects, args=config.migration_controller, replica="t0")
    handler = IntentIntake(
        client, publisher, subjects, replica="t0", requesters=checked(client, subjects), drains=drains
    )
    stop = asyncio.Event()
    task = asyncio.create_task(handler.serve(nats_scope.nc, config.nats, stop))
    async with asyncio.timeout(30):
        await handler.answering.wait()
    try:
        yield subjects
    finally:
        stop.set()
        await task
        await client.aclose()


async def drain(nats_scope: NatsScope, subjects: Signed, node: str, **options: Any) -> DrainReply:
    dry_run = options.pop("dry_run", False)
    intent = DrainIntent(
        kind="Drain", node=node, requester="tests", options=DrainOptions(**options), dry_run=dry_run
    )
    request = codec.encode(intent)
    msg = await nats_scope.nc.request(subjects.intent_request, request, timeout=10, headers=subjects.headers)
    return codec.decode(msg.data, DrainReply)


def drain_jobs(kube: Kube, node: str) -> dict[str, Any]:
    items = kube.custom.list_cluster_custom_object(
        GROUP, VERSION, PLURAL, label_selector=f"{LABEL_DRAIN}={node_hash(node)}"
    )["items"]
    return {j["metadata"]["name"]: j for j in items}


@pytest.fixture
def cluster(kubesim_factory: Callable[..., SimHandle]) -> Kube:
    """The fragmented scenario (web and api replicas on each node), its control loops off: the pods stay."""
    return with_crds(client_for(kubesim_factory("fragmented", workloads=False, scheduler=False)))


async def test_a_drain_kubectl_would_refuse_is_refused_whole_and_changes_nothing(
    cluster: Kube, nats_srv: Server, nats_scope: NatsScope
) -> None:
    node = "node-1"
    cluster.core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "bare"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
        },
    )
    async with tracker_intake(cluster, nats_srv, nats_scope) as subjects:
        reply = await drain(nats_scope, subjects, node)
    assert not reply.ok and reply.error is not None and reply.error.code == "Refused"
    assert reply.refusals == [
        "cannot delete Pods that declare no controller (use --force to override): default/bare"
    ]
    found = cluster.core.read_node(node)
    assert not found.spec.unschedulable and ANNOTATION_NODE_DRAIN not in (found.metadata.annotations or {})
    assert drain_jobs(cluster, node) == {}


async def test_a_drain_cordons_records_and_makes_one_job_per_pod_however_often_it_is_sent(
    cluster: Kube, nats_srv: Server, nats_scope: NatsScope
) -> None:
    node = "node-2"
    on_node = {
        f"default/{p.metadata.name}": p.metadata.uid
        for p in cluster.core.list_namespaced_pod("default", field_selector=f"spec.nodeName={node}").items
    }
    assert on_node
    async with tracker_intake(cluster, nats_srv, nats_scope) as subjects:
        dry = await drain(nats_scope, subjects, node, dry_run=True, timeout="5m")
        assert dry.ok and {m.pod for m in dry.moves} == set(on_node)
        assert not cluster.core.read_node(node).spec.unschedulable and drain_jobs(cluster, node) == {}
        first = await drain(nats_scope, subjects, node, timeout="5m")
        again = await drain(nats_scope, subjects, node, timeout="5m")
    assert first.ok and again.ok
    assert [m.job for m in first.moves] == [m.job for m in again.moves] == [m.job for m in dry.moves]
    jobs = drain_jobs(cluster, node)
    assert set(jobs) == {m.job for m in first.moves}
    for job in jobs.values():
        ref = job["spec"]["podRef"]
        assert on_node[f"{ref['namespace']}/{ref['name']}"] == ref["uid"]
        assert job["spec"]["ttl"] == "5m" and job["spec"]["mode"] == "ReservationFirst"
        assert job["metadata"]["annotations"][ANNOTATION_DRAIN_NODE] == node
    found = cluster.core.read_node(node)
    assert found.spec.unschedulable
    record = json.loads(found.metadata.annotations[ANNOTATION_NODE_DRAIN])
    # The requester is who the token proved, not what the intent claimed ("tests").
    assert record["cordonedBefore"] is False
    assert record["requester"] == "system:serviceaccount:default:drainer"
    assert sorted(record["jobs"]) == sorted(jobs) and record["options"]["timeout"] == "5m"


async def test_a_node_cordoned_before_the_drain_is_recorded_so(
    cluster: Kube, nats_srv: Server, nats_scope: NatsScope
) -> None:
    cluster.core.patch_node("node-3", {"spec": {"unschedulable": True}})
    async with tracker_intake(cluster, nats_srv, nats_scope) as subjects:
        assert (await drain(nats_scope, subjects, "node-3")).ok
    record = json.loads(cluster.core.read_node("node-3").metadata.annotations[ANNOTATION_NODE_DRAIN])
    assert record["cordonedBefore"] is True


async def test_bad_drains_get_a_specific_error(
    cluster: Kube, nats_srv: Server, nats_scope: NatsScope
) -> None:
    async with tracker_intake(cluster, nats_srv, nats_scope) as subjects:
        missing = await drain(nats_scope, subjects, "node-404")
        selector = await drain(nats_scope, subjects, "node-1", pod_selector="app in (")
        raw = b'{"kind":"Drain","node":"Node_1","requester":"t"}'
        msg = await nats_scope.nc.request(subjects.intent_request, raw, timeout=10, headers=subjects.headers)
        invalid = codec.decode(msg.data, IntentReply)
    assert missing.error is not None and (missing.error.code, missing.error.field) == ("MissingNode", "node")
    assert selector.error is not None and (selector.error.code, selector.error.field) == (
        "InvalidIntent",
        "options.podSelector",
    )
    assert invalid.error is not None and (invalid.error.code, invalid.error.field) == (
        "InvalidIntent",
        "node",
    )
