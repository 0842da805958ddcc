"""The executor: the only service that changes pods and Reservations, on the tracker's commands.

Commands arrive on `p.jobs.{reserve,evict,cleanup}.<job>`, and a Surge's on `p.jobs.{surge,scale-back,
unsurge}.<job>` (`surging.py`) (durable consumer `executor`, shared by the
replicas; a job's commands are de-duplicated by Nats-Msg-Id). Before every write the executor reads the
live objects: a job that has ended or been aborted is never acted on, a pod is evicted only if it is
still the pod the job was made for and is not already going, a Reservation is created only if the job's
deterministic name is free. A PodDisruptionBudget refusing an eviction (429) is reported and retried with
backoff until the job ends; a request-evict-only pod whose eviction triggered an evacuation is evicted in
the background (KEP-1397, `refusals.py`). What happened goes back to the tracker on `p.jobs.report.<job>`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg

from services.executor.evicting import Evictor
from services.executor.identity import check_identity
from services.executor.metrics import ACTIONS
from services.executor.reporting import report_of
from services.executor.reservations import reservation_for, to_delete
from services.executor.surging import Surger
from shared.api import codec, paths
from shared.api.messages import AuditRecord, Command, Outcome, Step
from shared.api.names import ANNOTATION_ABORT, LABEL_CREATED_BY, LABEL_JOB
from shared.api.pmj import TERMINAL_PHASES, PodMigrationJob
from shared.api.pmj_read import runnable
from shared.api.pod import Pod, pod_from
from shared.api.reservation import made_for, reservation_name
from shared.config.model import PodherdConfig
from shared.kube.client import KubeClient, KubeError
from shared.nats import bus
from shared.nats.consume import Retry, by_key, durable, read_or_retry, run_consumer
from shared.nats.publisher import Publisher
from shared.service.links import linked
from shared.service.logs import about_job
from shared.service.ops import OpsServer

log = logging.getLogger(__name__)
CONSUMER = "executor"
COMMANDS_AT_ONCE = 64  # jobs one replica acts for at once
# A cleanup is done for a job that is gone too; an unsurge after its job ended (what its surge added goes,
# once); every other step only while its job runs.
WITHOUT_JOB: frozenset[Step] = frozenset({"cleanup"})
AFTER_END: frozenset[Step] = frozenset({"unsurge"})
Handler = Callable[[PodMigrationJob, Command, Msg], Awaitable[None]]
BACKOFF_BASE, BACKOFF_MAX = 0.5, 10.0


class Executor:
    def __init__(self, config: PodherdConfig, nc: NatsClient, kube: KubeClient) -> None:
        self.config = config
        self.args = config.migration_controller
        self.nc = nc
        self.js = nc.jetstream()
        self.kube = kube
        self.subjects = bus.Subjects(config.nats.subject_prefix)
        self.set_up = bus.SetUp("executor")
        self.publisher = Publisher(nc)
        self.surger = Surger(kube, self.args, self._report)
        self.evictor = Evictor(
            kube, self.args, self._report, get=self._get, audit=self._audit, replica=config.replica
        )
        # One handler per step of a job that exists (a cleanup is done whatever became of its job).
        self.handlers: dict[Step, Handler] = {
            "reserve": self._reserve,
            "evict": self._evict,
            "surge": self._surge,
            "scale-back": self._surge,
            "unsurge": self._surge,
        }

    async def setup(self) -> Any:
        await bus.ensure_work_streams(self.js, self.subjects, self.config.nats)
        filters = [self.subjects.jobs_at(step) for step in bus.COMMAND_STEPS]
        # Unbounded redelivery: a blocked eviction is retried until its job ends (the job's TTL bounds it).
        return await durable(
            self.nc,
            self.subjects.jobs_stream,
            CONSUMER,
            filters=filters,
            config=self.config.nats,
            max_deliver=-1,
        )

    async def run(self, stop: asyncio.Event) -> None:
        sub = await bus.prepared(stop, self.setup, "executor", state=self.set_up)
        if sub is None:
            return
        # A job's commands in their order; different jobs' at the same time (each waits on the API server).
        # One batch at a time (its commands are a few API calls each): batches side by side cost a third
        # more CPU per command under load and made no job faster.
        handle = by_key(self.handle, self.subjects.job_of, concurrency=COMMANDS_AT_ONCE)
        await run_consumer(sub, self.js, self.subjects, name=CONSUMER, handle=handle, stop=stop)

    # ----------------------------------------------------------------------------------------------------

    async def handle(self, msg: Msg) -> None:
        command = codec.decode(msg.data, Command)
        with about_job(command.job.name):
            await self._act(command, msg)

    async def _act(self, command: Command, msg: Msg) -> None:
        if command.step in WITHOUT_JOB:
            kept = command.keep_untaken
            await self.cleanup(command.job.name, kept, command.also, attempts=command.attempts)
            return
        job = await self._job(command.job.name)
        if job is None or job.metadata.uid != command.job.uid:
            return  # the job is gone (or is another job by the same name): nothing to do
        annotations = job.metadata.annotations or {}
        ended = (
            job.phase in TERMINAL_PHASES or ANNOTATION_ABORT in annotations or job.metadata.deletion_timestamp
        )
        if ended and command.step not in AFTER_END:
            return  # ended or aborted: never act for it again
        await self.handlers[command.step](job, command, msg)

    async def _reserve(self, job: PodMigrationJob, command: Command, _: Msg) -> None:
        await self.reserve(job, command.attempt)

    async def _surge(self, job: PodMigrationJob, command: Command, _: Msg) -> None:
        await self.surger.act(job, command)

    async def _evict(self, job: PodMigrationJob, command: Command, msg: Msg) -> None:
        delivered = getattr(getattr(msg, "metadata", None), "num_delivered", 1) or 1
        await self.evictor.evict(job, command, delivered)

    async def reserve(self, job: PodMigrationJob, attempt: int) -> None:
        if name := job.user_reservation:
            found = await self._get(paths.reservation(name))
            if found is None:  # as Koordinator: its author may make it yet; the job waits until its ttl
                missing = f"Reservation {name} named by the job does not exist (yet)"
                await self._report(job, "reserve", "blocked", message=missing)
                raise Retry(missing, BACKOFF_MAX)
            return
        name = reservation_name(job.metadata.name or "", attempt)
        ref = job.spec.pod_ref
        assert ref is not None
        pod = await self._pod(str(ref.namespace), str(ref.name))
        if pod is None:
            await self._report(
                job, "reserve", "gone", message=f"pod {ref.namespace}/{ref.name} no longer exists"
            )
            return
        body = reservation_for(job, pod, self.args.default_job_ttl, attempt=attempt)
        try:
            await self.kube.arequest("POST", paths.RESERVATIONS, body=body)
        except KubeError as exc:
            if exc.status == 409:
                return  # created before (a redelivery): the attempt's one name makes it once
            # The API server away or busy: tried again, as Koordinator does (the job waits, its condition
            # False, until its ttl); a request it refuses as it is (invalid, forbidden) ends the job once.
            outcome: Outcome = "blocked" if exc.retryable else "failed"
            ACTIONS.labels("reserve", "", outcome).inc()
            await self._report(job, "reserve", outcome, message=f"creating Reservation {name}: {exc}")
            if exc.retryable:
                raise Retry(str(exc), BACKOFF_BASE) from exc
            return
        ACTIONS.labels("reserve", "", "done").inc()
        log.info("created Reservation %s", name, extra={"job": job.metadata.name})
        now = await self._job(job.metadata.name or "")
        if now is None or now.metadata.uid != job.metadata.uid or now.phase in TERMINAL_PHASES:
            # The job ended (and was cleaned up) between our read and the create: take it back.
            with contextlib.suppress(KubeError):
                await self.kube.arequest("DELETE", paths.reservation(name))

    async def cleanup(
        self, job_name: str, keep_untaken: bool = False, also: Sequence[str] = (), *, attempts: int = 0
    ) -> None:
        """Delete the Reservations Podherd made for the job (never one the user named), but for the untaken
        room `keep_untaken` keeps; and all those kept by the ended jobs `also` names. The job's `attempts`,
        when the tracker knows them, are read by name; else they are listed, as the others are (at once)."""
        if attempts:
            names = [reservation_name(job_name, attempt) for attempt in range(1, attempts + 1)]
            found = await asyncio.gather(*(self._get(paths.reservation(n)) for n in names))
            items = [r for r in found if r is not None and made_for(r, job_name)]
        else:
            items = await self._list_reservations(f"{LABEL_CREATED_BY}=podherd,{LABEL_JOB}={job_name}")
        doomed = to_delete(items, keep_untaken)
        if also:
            selector = f"{LABEL_CREATED_BY}=podherd,{LABEL_JOB} in ({','.join(also)})"
            kept = await self._list_reservations(selector)
            doomed += to_delete(kept, keep_untaken=False)
        for reservation in doomed:
            with contextlib.suppress(KubeError):
                await self.kube.arequest("DELETE", paths.reservation(reservation))
            ACTIONS.labels("cleanup", "", "done").inc()
        if doomed:  # as their creation is: when the room went is part of a job's story
            log.info("deleted Reservations %s", ", ".join(doomed), extra={"job": job_name})

    async def _list_reservations(self, selector: str) -> list[dict[str, Any]]:
        return await read_or_retry(
            self.kube.list_items(paths.RESERVATIONS, selector), "listing", BACKOFF_BASE
        )

    # ----------------------------------------------------------------------------------------------------

    async def _job(self, name: str) -> PodMigrationJob | None:
        return runnable(await self._get(paths.job(name)))  # one that cannot run is the tracker's to end

    async def _pod(self, namespace: str, name: str) -> Pod | None:
        raw = await self._get(paths.pod(namespace, name))
        return pod_from(raw) if raw is not None else None

    async def _get(self, path: str) -> dict[str, Any] | None:
        return await read_or_retry(self.kube.get_json(path), f"reading {path}", BACKOFF_BASE)

    async def _audit(self, job: PodMigrationJob, record: AuditRecord) -> None:
        await self.publisher.publish_audit(self.subjects.audit(job.metadata.name or ""), record)
        await self.publisher.flush()

    async def _report(
        self,
        job: PodMigrationJob,
        step: Step,
        outcome: Outcome,
        *,
        message: str,
        target: str | None = None,
        policy: str | None = None,
    ) -> None:
        data, msg_id = report_of(job, step, outcome, message=message, target=target, policy=policy)
        subject = self.subjects.job(bus.REPORT_STEP, job.metadata.name or "")
        await self.publisher.publish(subject, data, msg_id)
        await self.publisher.flush()


async def main(config: PodherdConfig, stop: asyncio.Event, ops: OpsServer) -> None:
    # The identity is asked beside the start: an API server that is away does not hold NATS up.
    identity = functools.partial(check_identity, config=config, stop=stop)
    async with linked("executor", config, stop, ops=ops, beside=identity) as links:
        executor = Executor(config, links.nats, links.kube)
        ops.add_check("jetstream", executor.set_up.check)
        await executor.run(stop)
