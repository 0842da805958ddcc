"""An eviction, as the executor performs it: only of the pod the job was made for and not already going, and
with ReservationFirst only once its room is read Available, on another node and unbound (the room read goes
to the audit stream first); then by the configured policy (Eviction, Delete, SoftEviction: `policies`), a
refusal read as the descheduler reads it (`refusals`) and reported, and retried with backoff when it may
pass later."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from services.executor.metrics import count_eviction
from services.executor.policies import POLICIES
from services.executor.refusals import refusal
from services.executor.room import no_room, room_checked
from services.executor.surging import Report
from shared.api import paths
from shared.api.eviction_policy import effective_policy
from shared.api.messages import AuditRecord, Command
from shared.api.names import LABEL_CREATED_BY, LABEL_JOB
from shared.api.pmj import MODE_EVICT_DIRECTLY, PodMigrationJob
from shared.api.pod import Pod, pod_from
from shared.api.reservation import attempt_of, made_for, reservation_name
from shared.config.model import MigrationControllerArgs
from shared.kube.client import KubeClient, KubeError
from shared.nats.consume import Retry, read_or_retry

log = logging.getLogger(__name__)
BACKOFF_BASE, BACKOFF_MAX = 0.5, 10.0
Get = Callable[[str], Awaitable[dict[str, Any] | None]]
Audit = Callable[[PodMigrationJob, AuditRecord], Awaitable[None]]


class Evictor:
    def __init__(
        self,
        kube: KubeClient,
        args: MigrationControllerArgs,
        report: Report,
        *,
        get: Get,
        audit: Audit,
        replica: str,
    ) -> None:
        self.kube, self.args, self.report = kube, args, report
        self.get, self.audit, self.replica = get, audit, replica

    async def _pod(self, namespace: str, name: str) -> Pod | None:
        raw = await self.get(paths.pod(namespace, name))
        return pod_from(raw) if raw is not None else None

    async def evict(self, job: PodMigrationJob, command: Command, delivered: int) -> None:
        """`delivered`: how many times this command came, for the backoff of a refused eviction."""
        pod_uid = command.pod_uid
        ref = job.spec.pod_ref
        assert ref is not None
        pod = await self._pod(str(ref.namespace), str(ref.name))
        if pod is None or (pod_uid and pod.metadata.uid != pod_uid):
            await self.report(job, "evict", "gone", message=f"pod {ref.namespace}/{ref.name} is already gone")
            return
        if pod.metadata.deletion_timestamp is not None:
            return  # already going: never evicted twice
        room = ""
        if (job.spec.mode or self.args.default_job_mode) != MODE_EVICT_DIRECTLY:
            reservation = await self._current(job, command.attempt)
            problem = no_room(reservation, pod.node_name)
            if problem is not None:
                await self.report(job, "evict", "blocked", message=f"not evicting: {problem.why}")
                if problem.later:
                    raise Retry(problem.why, BACKOFF_BASE)
                return
            held = (reservation or {}).get("metadata") or {}
            version = held.get("resourceVersion")
            room = f" (Reservation {held.get('name')} Available at resourceVersion {version})"
            await self.audit(job, room_checked(job, reservation or {}, pod, actor=f"executor/{self.replica}"))
            # Told before the eviction: should the room be taken in between, the tracker waits for this
            # eviction's outcome instead of reserving again.
            await self.report(job, "evict", "checked", message=f"evicting{room}")
        policy = effective_policy(
            pod.metadata.labels or {}, job.metadata.labels or {}, self.args.eviction_policy
        )
        if policy != self.args.eviction_policy:  # told first: the tracker reads the pod's going by it
            await self.report(job, "evict", "checked", message=f"evicting by {policy}{room}", policy=policy)
        options = job.spec.delete_options or self.args.default_delete_options
        delete_options = msgspec.to_builtins(options) if options is not None else {}
        try:
            await POLICIES[policy](self.kube, pod, delete_options=delete_options, job=job)
        except KubeError as exc:
            if exc.status == 404:
                await self.report(
                    job, "evict", "gone", message=f"pod {ref.namespace}/{ref.name} is already gone"
                )
                return
            outcome = refusal(exc.status, exc.message, exc.causes, annotations=pod.metadata.annotations or {})
            if outcome == "background":
                count_eviction(policy, "background")
                await self.report(job, "evict", "background", message=exc.message)
                return
            count_eviction(policy, outcome)
            await self.report(job, "evict", outcome, message=exc.message or str(exc))
            if exc.status == 429 or exc.retryable:
                raise Retry(exc.message, min(BACKOFF_MAX, BACKOFF_BASE * 2 ** (delivered - 1))) from exc
            return
        count_eviction(policy, "done")
        done = f"{policy}: pod {ref.namespace}/{ref.name}{room}"
        await self.report(job, "evict", "done", message=done, policy=policy)
        log.info("evicted %s/%s (%s)", ref.namespace, ref.name, policy, extra={"job": job.metadata.name})

    async def _current(self, job: PodMigrationJob, attempt: int) -> dict[str, Any] | None:
        """The Reservation the job's replacement is to take: the one the user named, else the attempt the
        command names (read by its name), else its latest attempt (listed: a command from before the
        tracker named attempts, or one whose Reservation is gone). Not read through its reservationRef,
        which the tracker may not have pointed at it yet."""
        if name := job.user_reservation:
            return await self.get(paths.reservation(name))
        job_name = job.metadata.name or ""
        found = await self.get(paths.reservation(reservation_name(job_name, attempt)))
        if found is not None and made_for(found, job_name):
            return found
        selector = f"{LABEL_CREATED_BY}=podherd,{LABEL_JOB}={job_name}"
        items = await read_or_retry(
            self.kube.list_items(paths.RESERVATIONS, selector), "listing", BACKOFF_BASE
        )
        if items:
            return max(items, key=attempt_of)
        if ref := job.spec.reservation_ref_name:  # named as Podherd names them, yet not made by Podherd?
            found = await self.get(paths.reservation(ref))
            if found is not None and not made_for(found, job_name):
                return found
        return None
