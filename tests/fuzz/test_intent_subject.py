"""Fuzzing the real intent subject: the tracker's intake on real NATS and kubesim answers every request,
garbage included, within its timeout: a job for a valid intent on an existing pod, else the specific
error. And the fire-and-forget stream never stalls on what it cannot use."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import nats
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kubesim.sim import SimHandle
from services.tracker.intake import IntentIntake
from services.tracker.intents import job_name
from shared import bus
from shared.api import codec
from shared.api.messages import IntentReply, MigrationIntent
from shared.config import KubernetesConfig, NatsConfig
from shared.kube import KubeClient
from shared.servers import Server
from tests.fuzz import sizes
from tests.fuzz.test_decoders import intents, json_values
from tests.kube import client_for, with_crds

pytestmark = [pytest.mark.integration, pytest.mark.slow]
PODS = [f"p-{i}" for i in range(5)]
BATCH = sizes.count(ci=200, full=500)
ERRORS = {"InvalidIntent", "MissingPod", "Conflict", "Unavailable"}


@st.composite
def payloads(draw: st.DrawFn) -> bytes:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.binary(max_size=120))
    if kind == 1:
        return json.dumps(draw(json_values)).encode()
    intent = draw(intents())
    if kind >= 6:  # a valid intent for a pod that exists: it must become a job
        intent = {
            "idempotencyKey": draw(st.text(min_size=1, max_size=40)),
            "pod": {"namespace": "default", "name": draw(st.sampled_from(PODS))},
            "requester": "fuzz",
            **(
                {"mode": draw(st.sampled_from(["ReservationFirst", "EvictDirectly"]))}
                if draw(st.booleans())
                else {}
            ),
        }
    return json.dumps(intent).encode()


@pytest.fixture
def cluster(kubesim_factory: Callable[..., SimHandle]) -> SimHandle:
    scenario = {
        "name": "fuzz",
        "nodes": [
            {"name": "node-{i}", "count": 2, "capacity": {"cpu": "8", "memory": "16Gi", "pods": "110"}}
        ],
        "pods": [{"name": name, "namespace": "default", "requests": {"cpu": "100m"}} for name in PODS],
    }
    handle = kubesim_factory(scenario, scheduler=True)
    with_crds(client_for(handle))
    return handle


async def answer_all(handle: SimHandle, nats_url: str, prefix: str, batch: list[bytes]) -> list[IntentReply]:
    nc = await nats.connect(nats_url)
    kube = KubeClient.from_config(KubernetesConfig(kubeconfig=str(handle.kubeconfig)))
    subjects = bus.Subjects(prefix)
    config = NatsConfig(url=nats_url, subject_prefix=prefix)
    intake = IntentIntake(kube, bus.Publisher(nc), subjects, "fuzz")
    stop = asyncio.Event()
    serving = asyncio.create_task(intake.serve(nc, config, stop))
    try:
        for _ in range(100):  # the intake subscribing
            try:
                await nc.request(subjects.intent_request, b"{}", timeout=2)
                break
            except nats.errors.NoRespondersError:
                await asyncio.sleep(0.05)
        replies: list[IntentReply] = []
        for start in range(0, len(batch), 50):
            answers = await asyncio.gather(
                *(nc.request(subjects.intent_request, data, timeout=10) for data in batch[start : start + 50])
            )
            replies += [codec.decode(a.data, IntentReply) for a in answers]
        # The same inputs fire-and-forget: the stream consumer gets through all of them (none stalls it).
        js = nc.jetstream()
        marker = {
            "idempotencyKey": "marker",
            "pod": {"namespace": "default", "name": PODS[0]},
            "requester": "f",
        }
        done = await nc.subscribe(subjects.audit(job_name("marker")))
        for data in batch:
            await js.publish(subjects.intent("default"), data)
        await js.publish(subjects.intent("default"), json.dumps(marker).encode())
        await done.next_msg(timeout=60)  # one consumer, in order: every earlier intent was handled
        info = await js.consumer_info(subjects.intents_stream, "tracker-intents")
        assert info.num_pending == 0 and info.num_redelivered == 0  # nothing left, nothing retried
        return replies
    finally:
        stop.set()
        await serving
        await nc.close()
        kube.close()


@settings(
    max_examples=sizes.count(ci=1, full=2),
    deadline=None,
    phases=[Phase.explicit, Phase.generate],  # shrinking 500 requests takes minutes; a failure prints all
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(st.lists(payloads(), min_size=BATCH, max_size=BATCH))
def test_every_request_gets_a_specific_answer(
    cluster: SimHandle, nats_srv: Server, test_id: str, batch: list[bytes]
) -> None:
    prefix = f"{test_id}-{abs(hash(tuple(batch))) % 10**6}"
    replies = asyncio.run(answer_all(cluster, nats_srv.url, prefix, batch))
    assert len(replies) == len(batch)
    wanted: set[str] = set()  # pods some valid intent asked for
    moved: set[str] = set()  # pods some intent got a job for
    for data, reply in zip(batch, replies, strict=True):
        intent = valid_intent(data)
        if reply.ok:
            assert intent is not None and reply.job == job_name(intent.idempotency_key)
            moved.add(intent.pod.name)
            continue
        assert reply.error is not None and reply.error.code in ERRORS and reply.error.message, (data, reply)
        if intent is None:
            assert reply.error.code == "InvalidIntent"
        elif intent.pod.name in PODS and intent.pod.namespace == "default":
            wanted.add(intent.pod.name)
            assert reply.error.code == "Conflict", (data, reply)  # the pod has another job already
        else:
            assert reply.error.code == "MissingPod", (data, reply)
    assert wanted <= moved  # every pod a valid intent named got its job


def valid_intent(data: bytes) -> MigrationIntent | None:
    try:
        return codec.decode(data, MigrationIntent)
    except codec.SchemaError:
        return None
