"""Fuzzing the real intent subject: the tracker's intake on real NATS and kubesim answers every request,
garbage included, within its timeout: a job for a valid intent on an existing pod, else the specific
error. And the fire-and-forget stream never stalls on what it cannot use.

Hypothesis draws one input per example and the intake serves them all from one cluster (a batch of hundreds
drawn as one example overruns Hypothesis's buffer and is drawn again and again, mostly in vain)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import uuid
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import nats
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from nats.aio.client import Client as NatsClient

from kubesim.sim import SimHandle
from podherd.harness.servers import Server
from services.tracker.intake.intents import IntentIntake
from shared.api import codec
from shared.api.messages import IntentReply, MigrationIntent
from shared.config.model import KubernetesConfig, NatsConfig
from shared.intake.intent_jobs import job_name
from shared.kube.client import KubeClient
from shared.nats import bus
from shared.nats.publisher import Publisher
from tests.fuzz import sizes
from tests.fuzz.test_decoders import intents, json_values
from tests.kube import client_for, with_crds
from tests.polling import until
from tests.security.doors import unchecked

pytestmark = [pytest.mark.integration, pytest.mark.slow]
PODS = [f"p-{i}" for i in range(5)]
INPUTS = sizes.count(ci=150, full=1000)
ERRORS = {"InvalidIntent", "MissingPod", "Conflict", "Unavailable"}
T = TypeVar("T")


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


SCENARIO = {
    "name": "fuzz",
    "nodes": [{"name": "node-{i}", "count": 2, "capacity": {"cpu": "8", "memory": "16Gi", "pods": "110"}}],
    "pods": [{"name": name, "namespace": "default", "requests": {"cpu": "100m"}} for name in PODS],
}


@pytest.fixture
def cluster(kubesim_factory: Any) -> SimHandle:
    handle: SimHandle = kubesim_factory(SCENARIO, scheduler=True)
    with_crds(client_for(handle)).api.close()
    return handle


class LoopThread:
    """An event loop in a thread of its own, so that Hypothesis's synchronous examples can talk to NATS."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fuzz-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@dataclass
class Intake:
    """The tracker's intake, serving on a prefix of its own, and a client of it."""

    nc: NatsClient
    subjects: bus.Subjects
    stop: asyncio.Event
    serving: asyncio.Task[None]
    kube: KubeClient
    sent: list[bytes] = field(default_factory=list)

    async def request(self, data: bytes) -> IntentReply:
        self.sent.append(data)
        answer = await self.nc.request(self.subjects.intent_request, data, timeout=10)
        return codec.decode(answer.data, IntentReply)

    async def stream_all(self) -> tuple[int, int]:
        """Every input sent so far again, fire-and-forget, then a marker; (pending, redelivered) after it."""
        js = self.nc.jetstream()
        pod = {"namespace": "default", "name": PODS[0]}
        marker = {"idempotencyKey": "marker", "pod": pod, "requester": "fuzz"}
        done = await self.nc.subscribe(self.subjects.audit(job_name("marker")))
        for data in self.sent:
            await js.publish(self.subjects.intent("default"), data)
        await js.publish(self.subjects.intent("default"), json.dumps(marker).encode())
        await done.next_msg(timeout=60)  # one consumer, in order: every earlier intent was handled
        info = await js.consumer_info(self.subjects.intents_stream, "tracker-intents")
        return info.num_pending, info.num_redelivered

    async def close(self) -> None:
        self.stop.set()
        await self.serving
        for stream in (self.subjects.intents_stream, self.subjects.audit_stream, self.subjects.dlq_stream):
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await self.nc.jetstream().delete_stream(stream)
        await self.nc.close()
        await self.kube.aclose()


async def serve_intake(handle: SimHandle, nats_url: str, prefix: str) -> Intake:
    nc = await nats.connect(nats_url)
    kube = KubeClient.from_config(KubernetesConfig(kubeconfig=str(handle.kubeconfig)))
    subjects = bus.Subjects(prefix)
    intake = IntentIntake(kube, Publisher(nc), subjects, replica="fuzz", requesters=unchecked(kube, subjects))
    stop = asyncio.Event()
    serving = asyncio.create_task(intake.serve(nc, NatsConfig(url=nats_url, subject_prefix=prefix), stop))
    await until(  # the intake subscribing: the server tells no one when it routes to the subscription
        lambda: nc.request(subjects.intent_request, b"{}", timeout=2),
        within=10,
        what="the intake answering",
        retry=(nats.errors.NoRespondersError,),
    )
    return Intake(nc, subjects, stop, serving, kube)


@contextlib.contextmanager
def served(handle: SimHandle, nats_url: str) -> Iterator[tuple[LoopThread, Intake]]:
    loop = LoopThread()
    try:
        intake = loop.run(serve_intake(handle, nats_url, "fuzz" + uuid.uuid4().hex[:10]))
        try:
            yield loop, intake
        finally:
            loop.run(intake.close())
    finally:
        loop.close()


def test_every_request_gets_a_specific_answer(cluster: SimHandle, nats_srv: Server) -> None:
    moved: set[str] = set()  # pods some intent got a job for
    keys: set[str] = set()  # the idempotency keys whose intent got a job
    with served(cluster, nats_srv.url) as (loop, intake):

        @settings(
            max_examples=INPUTS,
            deadline=None,
            database=None,  # each input changes the cluster: replaying one from an earlier run proves nothing
            phases=[Phase.generate],  # the cluster has moved on: a shrunk input would meet another state
            suppress_health_check=[HealthCheck.too_slow],
        )
        @given(payloads())
        def request(data: bytes) -> None:
            reply = loop.run(intake.request(data))
            intent = valid_intent(data)
            if reply.ok:
                assert intent is not None and reply.job == job_name(intent.idempotency_key)
                moved.add(intent.pod.name)
                keys.add(intent.idempotency_key)
                return
            assert reply.error is not None, (data, reply)
            assert reply.error.code in ERRORS and reply.error.message, (data, reply)
            if intent is None:
                assert reply.error.code == "InvalidIntent"
            elif intent.pod.name in PODS and intent.pod.namespace == "default":
                # A valid intent for a pod that exists is refused only when its key already has a job (made
                # for another pod, or with other settings): every other one became a job above.
                assert reply.error.code == "Conflict", (data, reply)
                assert intent.idempotency_key in keys, (data, reply)
            else:
                assert reply.error.code == "MissingPod", (data, reply)

        request()
        assert len(intake.sent) == INPUTS
        # The same inputs fire-and-forget: the stream consumer gets through all of them (none stalls it).
        assert loop.run(intake.stream_all()) == (0, 0)  # nothing left, nothing retried
    assert moved


def valid_intent(data: bytes) -> MigrationIntent | None:
    try:
        return codec.decode(data, MigrationIntent)
    except codec.SchemaError:
        return None
