"""What the tracker does to the world beside Redis: commands to the executor, audit records, the job's
Kubernetes Events, its reservationRef, and the word that a job's slots were released."""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from datetime import UTC, datetime
from typing import Any

from nats.aio.client import Client as NatsClient
from prometheus_client import Counter

from services.tracker.jobs import machine
from services.tracker.jobs.machine import ReservationView
from services.tracker.jobs.recorder import EventRecorder
from shared.api import codec, paths
from shared.api.audit import actor, audit_record
from shared.api.messages import Command, JobRef, SlotsReleased, Step
from shared.api.names import ANNOTATION_OWN_ROOM, ANNOTATION_REQUESTER
from shared.api.pmj import API_VERSION, GROUP, PHASE_PENDING, Phase, PodMigrationJob
from shared.config.model import PodherdConfig
from shared.kube.client import KubeClient, KubeError
from shared.nats import bus
from shared.nats.publisher import Publisher

log = logging.getLogger("services.tracker")
CommandStep = Step
TRANSITIONS = Counter("podherd_tracker_transitions_total", "Job phase changes", ["phase", "reason"])
RELEASES = Counter("podherd_ledger_releases_total", "Ledger slots released when jobs ended")


class Effects:
    def __init__(
        self,
        config: PodherdConfig,
        nc: NatsClient,
        kube: KubeClient,
        *,
        publisher: Publisher,
        subjects: bus.Subjects,
    ) -> None:
        self.config, self.nc, self.kube, self.publisher, self.subjects = config, nc, kube, publisher, subjects
        self.recorder = EventRecorder(kube)

    async def command(
        self,
        job: PodMigrationJob,
        step: CommandStep,
        pod_uid: str | None,
        *,
        attempt: int = 1,
        seen: str = "",
        **more: Any,
    ) -> None:
        """`seen`: the state the command answers; a command for a changed state is not a duplicate."""
        ref = JobRef(name=job.metadata.name or "", uid=job.metadata.uid or "")
        now = datetime.now(UTC)
        command = Command(job=ref, step=step, pod_uid=pod_uid, attempt=attempt, issued_at=now, **more)
        msg_id = f"{ref.uid}/{step}/{pod_uid or ''}/{attempt}"
        if more:  # a cleanup that keeps or sweeps differs from one that did not
            msg_id += "/" + ",".join(f"{k}={v}" for k, v in sorted(more.items()))
        if seen:
            msg_id += f"/{seen}"
        await self.publisher.publish(self.subjects.job(step, ref.name), codec.encode(command), msg_id)
        await self.publisher.flush()

    async def released(self, uid: str) -> None:
        RELEASES.inc()
        await self.nc.publish(self.subjects.ledger_released, codec.encode(SlotsReleased(job_uid=uid)))

    async def point_at(self, job: PodMigrationJob, reservation: ReservationView) -> PodMigrationJob | None:
        """Name the Reservation Podherd made for the job's current attempt in its reservationRef, as
        Koordinator's controller does, so `kubectl get pmj -o yaml` shows which room the job holds."""
        ref = {"apiVersion": API_VERSION, "kind": "Reservation", "name": reservation.name}
        patch = {
            "metadata": {"annotations": {ANNOTATION_OWN_ROOM: reservation.name}},  # ours, whatever its name
            "spec": {"reservationOptions": {"reservationRef": {**ref, "uid": reservation.uid or None}}},
        }
        return await self.patch_job(job, patch)

    async def patch_job(self, job: PodMigrationJob, patch: dict[str, Any]) -> PodMigrationJob | None:
        """A merge patch of the PMJ; one that fails is written again on the job's next look. Returns the job
        as written (None: it was not)."""
        try:
            answer = await self.kube.arequest(
                "PATCH",
                paths.job(str(job.metadata.name)),
                body=patch,
                content_type="application/merge-patch+json",
            )
        except KubeError:
            return None
        return codec.decode(answer, PodMigrationJob)

    async def transitioned(self, job: PodMigrationJob, previous: Phase | None, step: machine.Step) -> None:
        status = step.status
        name, uid = job.metadata.name or "", job.metadata.uid or ""
        if status.phase != (previous or PHASE_PENDING):
            TRANSITIONS.labels(status.phase or "", status.reason or "").inc()
        conditions: dict[str, str] = {
            str(c.type): f"{c.status}/{c.reason or ''}" for c in status.conditions or []
        }
        asked = (job.metadata.annotations or {}).get(ANNOTATION_REQUESTER)  # as verified, if it was
        if previous is None and status.phase != PHASE_PENDING:
            # Admitted before any status was written: the job was Pending from its creation until now, and
            # its history on the audit stream starts there, as every other job's does.
            created = audit_record(
                "transition",
                "status",
                "created",
                by=actor("tracker", self.config.replica),
                at=job.metadata.creation_timestamp,
                job=name,
                job_uid=uid,
                phase=PHASE_PENDING,
                requester=asked,
                message="created",
            )
            await self.publisher.publish_audit(self.subjects.audit(name), created)
        digest = hashlib.sha1(json.dumps([status.phase, status.reason, status.message, conditions]).encode())
        record = audit_record(
            "transition",
            "status",
            digest.hexdigest()[:16],
            by=actor("tracker", self.config.replica),
            job=name,
            job_uid=uid,
            phase=status.phase,
            previous_phase=previous or PHASE_PENDING,
            requester=asked,
            reason=status.reason,
            message=status.message,
            details={"status": status.status or "", **conditions},
        )
        await self.publisher.publish_audit(self.subjects.audit(name), record)
        await self.publisher.flush()
        log.info("%s: %s %s", name, status.phase, status.message, extra={"job": name, "phase": status.phase})
        for kind, reason, message in step.events:
            self.event(job, kind, reason, message=message)

    def event(self, job: PodMigrationJob, kind: str, reason: str, *, message: str) -> None:
        name = job.metadata.name or ""
        now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{uuid.uuid4().hex[:12]}", "namespace": "default"},
            "involvedObject": {
                "apiVersion": f"{GROUP}/v1alpha1",
                "kind": "PodMigrationJob",
                "name": name,
                "uid": job.metadata.uid,
            },
            "type": kind,
            "reason": reason,
            "message": message,
            "source": {"component": "podherd-tracker"},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        self.recorder.record(event)
