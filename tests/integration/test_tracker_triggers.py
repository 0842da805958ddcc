"""Which events make the tracker reconcile a job, with real Redis and NATS and the events as the watcher
encodes them. A Reservation Podherd just made (not scheduled yet) decides nothing, nor does one going after
its job ended; every other change does. A pod's event names the job made for it unless the pod runs on and
stays (a condition or its readiness changed), names the job that claimed it as its replacement once it is
Ready or goes, and kicks the jobs of its workload waiting for a replacement only when the pod is in reserved
room (the only pods they can claim)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import nats
import pytest
import redis.asyncio as aioredis
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from kubesim.sim import SimHandle
from podherd.harness.servers import Server
from services.tracker.service import Tracker
from shared.api import annotations as known
from shared.api import codec
from shared.api.messages import EventType, JobRef, Kick, ObjectEvent, PodInfo
from shared.api.meta import ObjectMeta, ObjectReference
from shared.api.names import LABEL_CONTROLLER, LABEL_CREATED_BY, LABEL_JOB
from shared.api.reservation import Reservation, ReservationPhase, ReservationStatus, reservation_name
from shared.kube.client import KubeClient
from shared.nats import bus
from tests.e2e.pipeline import pipeline_config

pytestmark = [pytest.mark.integration]


@contextlib.asynccontextmanager
async def tracker_on(
    handle: SimHandle, nats_srv: Server, redis_srv: Server, test_id: str
) -> AsyncIterator[Tracker]:
    """A tracker on real NATS, Redis and kubesim, not running: its triggers are called directly. The
    streams it made (named after the test) go with it."""
    config = pipeline_config(handle, nats_srv, redis_srv, test_id)
    nc = await nats.connect(nats_srv.url)
    client = aioredis.from_url(redis_srv.url)
    kube = KubeClient.from_config(config.kubernetes)
    try:
        yield Tracker(config, nc, client, kube=kube)
    finally:
        prefix = bus.Subjects(config.nats.subject_prefix).stream_prefix + "_"
        for stream in await nc.jetstream().streams_info():
            if stream.config.name and stream.config.name.startswith(prefix):
                await nc.jetstream().delete_stream(stream.config.name)
        await nc.close()
        await client.aclose()
        await kube.aclose()


def event(
    kind: EventType,
    job: str,
    *,
    phase: ReservationPhase | None = None,
    labelled: bool = True,
    controller: str | None = None,
) -> Msg:
    name = reservation_name(job, 1)
    labels = {LABEL_CREATED_BY: "podherd", LABEL_JOB: job} if labelled else {"team": "theirs"}
    if controller is not None:
        labels[LABEL_CONTROLLER] = controller
    status = ReservationStatus(phase=phase) if phase else None
    obj = Reservation(metadata=ObjectMeta(name=name, uid=f"uid-{name}", labels=labels), status=status)
    body: ObjectEvent[Any] = ObjectEvent(
        kind="Reservation",
        type=kind,
        name=name,
        uid=f"uid-{name}",
        resource_version="7",
        observed_at=datetime.now(UTC),
        object=obj,
    )
    unconnected: Any = None
    return Msg(unconnected, subject=f"p.events.reservations._.{name}", data=codec.encode(body))


async def test_only_reservation_changes_that_can_move_a_job_reconcile_it(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    async with tracker_on(kubesim_factory("small"), nats_srv, redis_srv, test_id) as tracker:
        await tracker.state.phase_written("ended", "Succeeded")
        await tracker.state.phase_written("moving", "Running")
        named = {
            "made, not scheduled": await tracker.triggers.on_event(event("ADDED", "moving")),
            "made, already scheduled (a relist)": await tracker.triggers.on_event(
                event("ADDED", "moving", phase="Available")
            ),
            "scheduled": await tracker.triggers.on_event(event("MODIFIED", "moving", phase="Available")),
            "gone while its job runs": await tracker.triggers.on_event(event("DELETED", "moving")),
            "taken after its job ended": await tracker.triggers.on_event(
                event("MODIFIED", "ended", phase="Succeeded")
            ),
            "gone after its job ended": await tracker.triggers.on_event(event("DELETED", "ended")),
            "the user's, no job of ours": await tracker.triggers.on_event(
                event("MODIFIED", "x", labelled=False)
            ),
        }
        assert named == {
            "made, not scheduled": [],
            "made, already scheduled (a relist)": ["moving"],
            "scheduled": ["moving"],
            "gone while its job runs": ["moving"],
            "taken after its job ended": ["ended"],
            "gone after its job ended": [],
            "the user's, no job of ours": [],
        }


async def waiter_and_its_kicks(tracker: Tracker) -> Subscription:
    """Job `waiter` waiting for a replacement of workload `rs-uid`, and a subscription to the kicks."""
    await bus.ensure_work_streams(tracker.js, tracker.subjects, tracker.config.nats)
    kicks = await tracker.nc.subscribe(tracker.subjects.jobs_at("kick"))
    await tracker.client.sadd(tracker.keys.waiting("rs-uid"), "waiter")
    return kicks


async def test_a_job_kicked_by_its_reservations_change_is_reconciled_through_the_kick_alone(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    # Its pod evicted, the job waits for a replacement of its workload; its own Reservation is taken. The
    # event kicks every job waiting in the workload, this one too, so it is not named a second time.
    async with tracker_on(kubesim_factory("small"), nats_srv, redis_srv, test_id) as tracker:
        kicks = await waiter_and_its_kicks(tracker)
        taken = event("MODIFIED", "waiter", phase="Succeeded", controller="rs-uid")
        assert await tracker.triggers.on_event(taken) == []
        kick = await kicks.next_msg(timeout=5)
        assert codec.decode(kick.data, Kick).job.name == "waiter"
        # A job of the workload that is not waiting is named by its Reservation's event, as before.
        scheduled = event("MODIFIED", "sibling", phase="Available", controller="rs-uid")
        assert await tracker.triggers.on_event(scheduled) == ["sibling"]
        await kicks.unsubscribe()


def pod_event(
    name: str,
    *,
    in_room: bool,
    phase: str = "Running",
    node: str | None = "node-1",
    going: bool = False,
    ready: bool = False,
    kind: EventType = "MODIFIED",
) -> Msg:
    allocated = {known.RESERVATION_ALLOCATED: '{"name":"room","uid":"r1"}'} if in_room else {}
    pod = PodInfo(
        uid=f"uid-{name}",
        namespace="default",
        name=name,
        node_name=node,
        phase=phase,
        deletion_timestamp=datetime.now(UTC) if going else None,
        ready=ready,
        owner=ObjectReference(kind="ReplicaSet", name="web-rs", uid="rs-uid"),
        annotations=allocated,
    )
    body: ObjectEvent[Any] = ObjectEvent(
        kind="Pod",
        type=kind,
        name=name,
        namespace="default",
        uid=pod.uid,
        resource_version="9",
        observed_at=datetime.now(UTC),
        object=pod,
    )
    unconnected: Any = None
    return Msg(unconnected, subject=f"p.events.pods.default.{name}", data=codec.encode(body))


async def test_only_a_pod_in_reserved_room_kicks_the_jobs_waiting_for_a_replacement(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    async with tracker_on(kubesim_factory("small"), nats_srv, redis_srv, test_id) as tracker:
        client = tracker.client
        kicks = await waiter_and_its_kicks(tracker)
        await client.hset(tracker.keys.pod_jobs, "default/web-old", "moving")
        # The pod being moved, going: its own job looks again, the waiting one has nothing new to claim.
        assert await tracker.triggers.on_event(pod_event("web-old", in_room=False, going=True)) == ["moving"]
        assert tracker.triggers.publisher.acked == 0
        # A pod bound in a Reservation of the workload: maybe the replacement the waiting job claims.
        assert await tracker.triggers.on_event(pod_event("web-new", in_room=True)) == []
        assert tracker.triggers.publisher.acked == 1
        kick = await kicks.next_msg(timeout=5)
        assert codec.decode(kick.data, Kick).job.name == "waiter"
        # Taken in as the job it names, and so is a bare JobRef, as a tracker before versioned kicks sent it.
        assert await tracker.triggers.on_job_message(kick) == ["waiter"]
        unconnected: Any = None
        older = Msg(unconnected, subject=kick.subject, data=codec.encode(JobRef(name="waiter", uid="")))
        assert await tracker.triggers.on_job_message(older) == ["waiter"]
        await kicks.unsubscribe()


async def test_a_jobs_pod_reconciles_it_when_it_is_placed_or_going_not_for_other_changes(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    async with tracker_on(kubesim_factory("small"), nats_srv, redis_srv, test_id) as tracker:
        client = tracker.client
        await client.hset(tracker.keys.pod_jobs, "default/web-0", "moving")
        named = {
            "running, a condition changed": await tracker.triggers.on_event(
                pod_event("web-0", in_room=False)
            ),
            "pending, placed on a node": await tracker.triggers.on_event(
                pod_event("web-0", in_room=False, phase="Pending")
            ),
            "pending, not placed": await tracker.triggers.on_event(
                pod_event("web-0", in_room=False, phase="Pending", node=None)
            ),
            "marked for deletion": await tracker.triggers.on_event(
                pod_event("web-0", in_room=False, going=True)
            ),
            "finished": await tracker.triggers.on_event(pod_event("web-0", in_room=False, phase="Succeeded")),
            "deleted": await tracker.triggers.on_event(
                pod_event("web-0", in_room=False, going=True, kind="DELETED")
            ),
            "a new one by its name": await tracker.triggers.on_event(
                pod_event("web-0", in_room=False, kind="ADDED")
            ),
        }
        await client.hset(tracker.keys.replacement_jobs, "default/web-9", "moving")
        replacement = {
            "placed in the room": await tracker.triggers.on_event(
                pod_event("web-9", in_room=True, phase="Pending")
            ),
            "running, not Ready yet": await tracker.triggers.on_event(pod_event("web-9", in_room=True)),
            "Ready": await tracker.triggers.on_event(pod_event("web-9", in_room=True, ready=True)),
            "going": await tracker.triggers.on_event(pod_event("web-9", in_room=True, going=True)),
        }
        assert replacement == {
            "placed in the room": [],
            "running, not Ready yet": [],
            "Ready": ["moving"],
            "going": ["moving"],
        }
        assert named == {
            "running, a condition changed": [],
            "pending, placed on a node": ["moving"],
            "pending, not placed": ["moving"],
            "marked for deletion": ["moving"],
            "finished": ["moving"],
            "deleted": ["moving"],
            "a new one by its name": ["moving"],
        }
