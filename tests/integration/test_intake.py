"""Intents from external systems become PodMigrationJobs: request/reply and JetStream, on kubesim and real
NATS, any number of times, with a specific error for each bad one."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kubesim.sim import SimHandle
from podherd.harness.servers import Server
from services.tracker.intake.intents import CONSUMER, IntentIntake
from services.tracker.intake.node_fit import NodeFit
from shared.api import codec
from shared.api.messages import IntentReply, MigrationIntent, PodKey
from shared.config.loader import config_from_dict
from shared.config.model import KubernetesConfig
from shared.kube.client import KubeClient
from shared.nats import bus
from shared.nats.publisher import Publisher
from tests.conftest import NatsScope
from tests.kube import Kube, client_for, with_crds
from tests.security.doors import unchecked

pytestmark = pytest.mark.integration
GROUP, VERSION, PLURAL = "scheduling.koordinator.sh", "v1alpha1", "podmigrationjobs"


def make_pod(kube: Kube, name: str, node: str = "node-1", cpu: str | None = None) -> str:
    container: dict[str, Any] = {"name": "c", "image": "nginx"}
    if cpu is not None:
        container["resources"] = {"requests": {"cpu": cpu}}
    body = {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [container], "nodeName": node},
    }
    return str(kube.core.create_namespaced_pod("default", body).metadata.uid)


@contextlib.asynccontextmanager
async def intake(
    kube: Kube, nats_srv: Server, nats_scope: NatsScope, replicas: int = 1, *, fit: str | None = None
) -> AsyncIterator[bus.Subjects]:
    """`fit`: nodeFit on, with this nodeSelector ("" for every node)."""
    config = config_from_dict(
        {
            "nats": {"url": nats_srv.url, "subjectPrefix": nats_scope.prefix},
            "kubernetes": {"kubeconfig": str(kube.handle.kubeconfig)},
        }
    )
    subjects = bus.Subjects(nats_scope.prefix)
    stop = asyncio.Event()
    tasks, handlers, clients = [], [], []
    for i in range(replicas):
        client = KubeClient.from_config(config.kubernetes)
        clients.append(client)
        handler = IntentIntake(
            client,
            Publisher(nats_scope.nc),
            subjects,
            replica=f"t{i}",
            requesters=unchecked(client, subjects),
            fit=None if fit is None else NodeFit(client, node_selector=fit),
        )
        handlers.append(handler)
        tasks.append(asyncio.create_task(handler.serve(nats_scope.nc, config.nats, stop)))
    # Ready when every replica says it answers (its durable consumer exists by then).
    async with asyncio.timeout(30):
        await asyncio.gather(*(h.answering.wait() for h in handlers))
    try:
        yield subjects
    finally:
        stop.set()
        await asyncio.gather(*tasks)
        for client in clients:
            await client.aclose()


def intent_bytes(key: str, pod: str, **extra: Any) -> bytes:
    return codec.encode(
        MigrationIntent(
            idempotency_key=key, pod=PodKey(namespace="default", name=pod), requester="tests", **extra
        )
    )


async def ask(nats_scope: NatsScope, subjects: bus.Subjects, data: bytes) -> IntentReply:
    msg = await nats_scope.nc.request(subjects.intent_request, data, timeout=10)
    return codec.decode(msg.data, IntentReply)


def jobs(kube: Kube) -> dict[str, dict[str, Any]]:
    items = kube.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
    return {i["metadata"]["name"]: i for i in items}


async def test_request_reply_creates_one_job_per_key(
    kube: Kube, nats_srv: Server, nats_scope: NatsScope
) -> None:
    make_pod(kube, "web-0")
    async with intake(kube, nats_srv, nats_scope, replicas=2) as subjects:
        first = await ask(nats_scope, subjects, intent_bytes("k1", "web-0", target_node="node-2", priority=3))
        assert first.ok and first.created and first.job
        replies = await asyncio.gather(
            *(ask(nats_scope, subjects, intent_bytes("k1", "web-0")) for _ in range(5))
        )
        assert {(r.ok, r.created, r.job) for r in replies} == {(True, False, first.job)}
    found = jobs(kube)
    assert list(found) == [first.job]
    job = found[first.job]
    assert job["spec"]["podRef"]["name"] == "web-0"
    assert job["metadata"]["annotations"]["podherd.io/target-node"] == "node-2"


async def test_concurrent_first_intents_race_to_one_job(
    kube: Kube, nats_srv: Server, nats_scope: NatsScope
) -> None:
    make_pod(kube, "web-0")
    async with intake(kube, nats_srv, nats_scope, replicas=3) as subjects:
        replies = await asyncio.gather(
            *(ask(nats_scope, subjects, intent_bytes("race", "web-0")) for _ in range(12))
        )
    assert len({r.job for r in replies}) == 1 and all(r.ok for r in replies)
    assert sum(r.created for r in replies) == 1
    assert len(jobs(kube)) == 1


def raw(**fields: Any) -> bytes:
    body = {"idempotencyKey": "k", "pod": {"namespace": "default", "name": "web-0"}, "requester": "x"}
    return json.dumps({**body, **fields}).encode()


@pytest.mark.parametrize(
    ("data", "code", "field"),
    [
        (b"not json", "InvalidIntent", None),
        (raw(idempotencyKey=None), "InvalidIntent", "idempotencyKey"),
        (raw(mode="Teleport"), "InvalidIntent", "mode"),
        (raw(color="red"), "InvalidIntent", None),
        (raw(pod={"namespace": "default", "name": "ghost"}), "MissingPod", "pod"),
        (raw(pod={"namespace": "default", "name": "web-0", "uid": "old"}), "MissingPod", "pod.uid"),
    ],
)
async def test_bad_intents_get_a_specific_error_and_no_job(
    kube: Kube, nats_srv: Server, nats_scope: NatsScope, data: bytes, code: str, field: str | None
) -> None:
    make_pod(kube, "web-0")
    async with intake(kube, nats_srv, nats_scope) as subjects:
        reply = await ask(nats_scope, subjects, data)
    assert not reply.ok and reply.error is not None
    assert reply.error.code == code and reply.error.message
    if field is not None:
        assert reply.error.field == field
    assert jobs(kube) == {}


async def test_a_key_reused_for_another_pod_is_a_conflict(
    kube: Kube, nats_srv: Server, nats_scope: NatsScope
) -> None:
    make_pod(kube, "web-0")
    make_pod(kube, "web-1")
    async with intake(kube, nats_srv, nats_scope) as subjects:
        assert (await ask(nats_scope, subjects, intent_bytes("k", "web-0"))).ok
        reply = await ask(nats_scope, subjects, intent_bytes("k", "web-1"))
    assert (
        reply.error is not None and reply.error.code == "Conflict" and "default/web-0" in reply.error.message
    )


async def test_with_node_fit_a_pod_that_fits_no_other_selected_node_is_refused_naming_what_each_lacks(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, nats_scope: NatsScope
) -> None:
    nodes = [{"name": "node-{i}", "count": 3, "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}}]
    kube = with_crds(client_for(kubesim_factory({"name": "fit", "nodes": nodes})))
    make_pod(kube, "big", cpu="2")
    make_pod(kube, "small", cpu="500m")
    make_pod(kube, "filler", "node-2", cpu="3")
    # node-3 is empty, but not among the nodes nodeFit counts.
    async with intake(kube, nats_srv, nats_scope, fit="kubernetes.io/hostname!=node-3") as subjects:
        refused = await ask(nats_scope, subjects, intent_bytes("k-big", "big"))
        moved = await ask(nats_scope, subjects, intent_bytes("k-small", "small"))
    assert refused.error is not None and (refused.error.code, refused.error.field) == ("Refused", "pod")
    assert refused.error.message == (
        "pod default/big fits no other node (nodeFit): 0/1 nodes are available: 1 Insufficient cpu."
    )
    assert moved.ok and moved.created
    assert list(jobs(kube)) == [moved.job]


async def test_fire_and_forget_intents_through_jetstream(
    kube: Kube, nats_srv: Server, nats_scope: NatsScope
) -> None:
    make_pod(kube, "web-0")
    async with intake(kube, nats_srv, nats_scope) as subjects:
        for data in (
            intent_bytes("ff", "web-0"),
            intent_bytes("ff", "web-0"),
            b"{broken",
            intent_bytes("gone", "ghost"),
        ):
            await nats_scope.js.publish(subjects.intent("default"), data)
        dead = await next_message(nats_scope, f"{subjects.prefix}.dlq.>")
        refused = await next_message(
            nats_scope, f"{subjects.prefix}.audit.>", lambda r: r.get("reason") == "MissingPod"
        )
    assert dead["consumer"] == CONSUMER and "invalid" in dead["error"]
    assert refused["details"]["pod"] == "default/ghost"
    [job] = jobs(kube).values()
    assert job["metadata"]["annotations"]["podherd.io/intent-id"] == "ff"


async def next_message(
    nats_scope: NatsScope, subject: str, predicate: Callable[[dict[str, Any]], bool] = lambda _: True
) -> dict[str, Any]:
    sub = await nats_scope.js.subscribe(subject, ordered_consumer=True)
    try:
        async with asyncio.timeout(15):
            while True:
                record: dict[str, Any] = json.loads((await sub.next_msg(timeout=15)).data)
                if predicate(record):
                    return record
    finally:
        await sub.unsubscribe()


async def test_an_intake_that_says_it_answers_does_answer(
    kube: Kube, nats_srv: Server, nats_scope: NatsScope
) -> None:
    # The tracker's readiness is this event: a requester (the demo, `podherd submit`) that waits for it must
    # never meet "no responders".
    config = config_from_dict({"nats": {"url": nats_srv.url, "subjectPrefix": nats_scope.prefix}})
    subjects = bus.Subjects(nats_scope.prefix)
    client = KubeClient.from_config(KubernetesConfig(kubeconfig=str(kube.handle.kubeconfig)))
    handler = IntentIntake(
        client, Publisher(nats_scope.nc), subjects, replica="t0", requesters=unchecked(client, subjects)
    )
    assert not handler.answering.is_set()
    stop = asyncio.Event()
    serving = asyncio.create_task(handler.serve(nats_scope.nc, config.nats, stop))
    async with asyncio.timeout(30):
        await handler.answering.wait()
    reply = codec.decode(
        (await nats_scope.nc.request(subjects.intent_request, b"{}", timeout=5)).data, IntentReply
    )
    stop.set()
    await serving
    await client.aclose()
    assert reply.error is not None and reply.error.code == "InvalidIntent"
    assert not handler.answering.is_set()  # stopped: no longer ready
