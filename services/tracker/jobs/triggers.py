"""What brings a job to be reconciled: the events that concern it (its PMJ, its pod, its Reservations, the
replacement in its room) and the messages for it (decisions, reports, kicks). Each is taken in, noted in
Redis where it must be, and named the jobs it concerns (reconciled once per fetch, see `coalesced`)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import redis.asyncio as aioredis
from nats.aio.msg import Msg

from services.tracker.jobs.decode import JobEvent, ReservationEvent, ReservationHead
from services.tracker.jobs.endings import Endings
from services.tracker.jobs.observer import Observer
from services.tracker.jobs.state import JobState, is_terminal
from services.tracker.keys import TrackerKeys
from shared.api import annotations as known
from shared.api import codec
from shared.api.codec import SchemaError
from shared.api.messages import Decision, EventHead, JobRef, Kick, ObjectEvent, PodInfo, Report
from shared.api.names import LABEL_CONTROLLER, LABEL_JOB
from shared.ledger.scripts import as_text
from shared.nats import bus
from shared.nats.publisher import Publisher

DELETION_MEMORY_S = 3600  # how long a pod's way of going is kept: past any job's reconcile of it
# Reports that change nothing the job decides now: an eviction on its way ("checked", read when the room is
# seen taken meanwhile) and one done (the pod's own events follow it, marked for deletion, then gone).
UNEVENTFUL_REPORTS = frozenset({("evict", "checked"), ("evict", "done")})


class Triggers:
    def __init__(
        self,
        client: aioredis.Redis,
        keys: TrackerKeys,
        *,
        state: JobState,
        endings: Endings,
        observer: Observer,
        publisher: Publisher,
        subjects: bus.Subjects,
    ) -> None:
        self.client, self.keys, self.state, self.endings = client, keys, state, endings
        self.observer, self.publisher, self.subjects = observer, publisher, subjects

    async def on_event(self, msg: Msg) -> list[str]:
        """Take in an object event; name the jobs it concerns (reconciled once per fetch, see `coalesced`)."""
        head = codec.decode(msg.data, EventHead)
        if head.kind == "PodMigrationJob":
            if head.type == "DELETED":
                await self.endings.forget(codec.decode(msg.data, JobEvent).object)
                return []
            return [head.name] if await self.state.job_changed(head.name, head.resource_version) else []
        if head.kind == "Reservation":
            return await self._on_reservation(codec.decode(msg.data, ReservationEvent).object, head)
        if head.kind == "Pod":
            return await self._on_pod(codec.decode(msg.data, ObjectEvent[PodInfo]).object, head)
        return []

    async def _on_reservation(self, held: ReservationHead, head: EventHead) -> list[str]:
        labels = held.metadata.labels or {}
        controller, labelled = labels.get(LABEL_CONTROLLER), labels.get(LABEL_JOB)
        deleted = head.type == "DELETED"
        # What the event needs from Redis, in one round trip: the workload's waiting jobs, and the job the
        # Reservation is for (its label, else the name a job gave) with, when it is gone, that job's phase.
        pipe = self.client.pipeline(transaction=False)
        if controller:
            pipe.smembers(self.keys.waiting(controller))
        if not labelled:
            pipe.hget(self.keys.named, head.name)
        elif deleted:
            pipe.hget(self.keys.phases, labelled)
        if labelled and not deleted:  # last: its reply is not read (a deletion: see below)
            self.state.concerned(labelled, pipe)
        replies = list(await pipe.execute()) if len(pipe) else []
        kicked: set[str] = set()
        if controller:
            kicked = {as_text(member) for member in replies.pop(0)}
            await self._kick(kicked)
        if head.type == "ADDED" and labelled and not (held.status and held.status.phase):
            return []  # made for its job, not scheduled yet: nothing to decide till the scheduler acts
        # One Podherd made (labelled with its job), or one a job names (it expires, it is taken, ...).
        owner = labelled or as_text(replies.pop(0) or b"")
        if owner and not labelled and not deleted:  # a Reservation the user made, that a job names
            named = self.client.pipeline(transaction=False)
            self.state.concerned(owner, named)
            await named.execute()
        # A deletion leaves the job's ended mark as it is: before its job ends, there is no mark; after, a
        # Reservation going is its cleanup, and nothing is left to do for it.
        if owner and deleted:
            phase = replies.pop(0) if labelled else await self.client.hget(self.keys.phases, owner)
            if is_terminal(phase):
                return []  # cleaned up after its job ended: nothing is left to do for it
        # A job waiting for a replacement of this workload was kicked above: reconciled through the jobs
        # stream once, not once more from here.
        return [owner] if owner and owner not in kicked else []

    async def _on_pod(self, pod: PodInfo, head: EventHead) -> list[str]:
        # Only a pod in reserved room can be the replacement a waiting job of its workload claims: the
        # workload's other pods (the pods being moved, replacements not placed yet) kick no one.
        in_room = known.RESERVATION_ALLOCATED in pod.annotations
        controller = pod.owner.uid if pod.owner and in_room else None
        key = f"{head.namespace}/{head.name}"
        # One round trip per pod event: a replacement noted, the workload's waiting jobs, the job made for
        # this pod, and the job that claimed it as its replacement (it waits for it to be Ready).
        pipe = self.client.pipeline(transaction=False)
        if controller:
            self.observer.replacements.seen(pod, controller, deleted=head.type == "DELETED", pipe=pipe)
            pipe.smembers(self.keys.waiting(controller))
        pipe.hget(self.keys.pod_jobs, key)
        pipe.hget(self.keys.replacement_jobs, key)
        replies = await pipe.execute()
        if controller:
            await self._kick(as_text(member) for member in replies[-3])
        made_for, replacing = replies[-2:]
        if made_for is not None and (pod.deletion_timestamp is not None or head.type == "DELETED"):
            # Told before its job is reconciled on it: the first state that shows the pod going says whose
            # doing its end is. An eviction arriving after another hand's deletion (a rollout's) still marks
            # the pod a disruption target, yet the pod was already going: the first word stands.
            how = "evicted" if pod.evicted else "deleted"
            await self.client.set(self.keys.deletion(pod.uid), how, ex=DELETION_MEMORY_S, nx=True)
        if head.type == "MODIFIED" and _running_and_staying(pod) and not in_room:
            # The pod a job was made for changed, and is neither placed anew nor going: nothing its job
            # decides on changed (a condition, its readiness; the eviction's DisruptionTarget condition
            # comes just before the pod is marked for deletion, which is reconciled).
            made_for = None
        if head.type == "MODIFIED" and not pod.ready and _staying(pod):
            replacing = None  # a claimed replacement is waited for until it is Ready (or goes)
        return [as_text(name) for name in (made_for, replacing) if name is not None]

    async def on_job_message(self, msg: Msg) -> list[str]:
        """Take in a decision, a report or a kick; name the job it concerns."""
        step = self.subjects.step_of(msg.subject)
        if step == "kick":
            try:
                return [codec.decode(msg.data, Kick).job.name]
            except SchemaError:  # a bare JobRef, from a tracker before kicks were versioned
                return [codec.decode(msg.data, JobRef).name]
        if step == "report":
            report = codec.decode(msg.data, Report)
            await self.client.hset(self.keys.reports(report.job.uid), report.step, codec.encode(report))
            if (report.step, report.outcome) in UNEVENTFUL_REPORTS:
                return []  # kept for the job's next reconcile, which the pod's own events bring
            return [report.job.name]
        decision = codec.decode(msg.data, Decision)
        # A wait is kept apart: it never takes the place of the admission or rejection. A window's opening
        # is kept until the job ends (its ttl counts from it), whatever the job waits for after it.
        encoded = codec.encode(decision)
        if step != "deferred":
            await self.client.hset(self.keys.decisions, decision.job.uid, encoded)
            return [decision.job.name]
        pipe = self.client.pipeline(transaction=False)
        pipe.hset(self.keys.deferrals, decision.job.uid, encoded)
        if decision.window is not None:
            pipe.hset(self.keys.windows, decision.job.uid, encoded)
        await pipe.execute()
        return [decision.job.name]

    async def _kick(self, waiting: Iterable[str]) -> None:
        """Something changed in a workload's Reservations or pods: look again at its jobs waiting for a
        replacement (through the jobs stream, so a job another replica holds is retried, not skipped)."""
        names = list(waiting)
        for name in names:
            kick = Kick(job=JobRef(name=name, uid=""))
            await self.publisher.publish(
                self.subjects.job(bus.KICK_STEP, name), codec.encode(kick), uuid.uuid4().hex
            )
        if names:
            await self.publisher.flush()


def _staying(pod: PodInfo) -> bool:
    return pod.deletion_timestamp is None and pod.phase not in ("Succeeded", "Failed")


def _running_and_staying(pod: PodInfo) -> bool:
    return pod.phase == "Running" and bool(pod.node_name) and _staying(pod)
