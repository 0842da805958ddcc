"""Migration intents from external systems, turned into PodMigrationJobs.

Two ways in, one handling:
- request/reply on `p.intent.request` (a queue group: any tracker replica answers): the reply is an
  `IntentReply` with the job's name, or a specific error (`InvalidIntent` naming the field, `MissingPod`,
  `Conflict`, `Refused` when nodeFit is on and the pod fits no other node, `Unavailable` when the API
  server cannot be reached: retry later);
- fire and forget on `p.intents.<namespace>` (JetStream, durable consumer `tracker-intents`): an
  undecodable intent goes to the dead-letter stream, a refused one is acknowledged and its error written
  to the audit stream, an API outage leaves it to be redelivered.
The job's name comes from the idempotency key, so the same intent twice (either way, any replica) answers
with the same job and creates it once. Every outcome is an audit record.

Before anything is looked up or created, the sender is identified and authorized (`requesters`): a refusal
is a `Forbidden` answer and an audit record naming the verified identity, and nothing is created. The job
records that identity as its requester; what the intent claimed (`requester`) is kept beside it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TypeVar

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from prometheus_client import Counter

from services.tracker.intake.drains import Drains
from services.tracker.intake.node_fit import NodeFit
from services.tracker.intake.requesters import Forbidden, Requesters, Verdict, bearer, refusal_key
from services.tracker.intake.submission import JobSubmitter, Refused
from shared.access.permissions import Identity, migration_needs
from shared.api import codec
from shared.api.audit import actor, audit_record
from shared.api.codec import SchemaError
from shared.api.messages import (
    DrainIntent,
    DrainReply,
    IntentError,
    IntentKind,
    IntentReply,
    MigrationIntent,
)
from shared.config.model import NatsConfig
from shared.kube.client import KubeClient
from shared.nats import bus
from shared.nats.consume import Durable, durable, one_by_one, run_consumer
from shared.nats.publisher import Publisher

log = logging.getLogger(__name__)
INTENTS = Counter("podherd_tracker_intents_total", "Migration intents received", ["path", "outcome"])
CONSUMER = "tracker-intents"
QUEUE_GROUP = "podherd-tracker"
T = TypeVar("T")


class IntentIntake:
    def __init__(
        self,
        kube: KubeClient,
        publisher: Publisher,
        subjects: bus.Subjects,
        *,
        replica: str,
        requesters: Requesters,
        drains: Drains | None = None,
        fit: NodeFit | None = None,
    ) -> None:
        self.requesters = requesters
        self.drains = drains  # drain intents (on the request subject only: they answer with a plan)
        self.jobs = JobSubmitter(kube, subjects, fit=fit)
        self.publisher = publisher
        self.subjects = subjects
        self.replica = replica
        self.answering = asyncio.Event()  # requests on the intent subject reach this replica

    # ----------------------------------------------------------------------------------------------------

    async def answer(self, intent: MigrationIntent, msg: Msg, path: str) -> IntentReply:
        """Authorize, submit and audit one intent; the reply says how it went."""
        verdict: Verdict | None = None
        try:
            verdict = await self.requesters.identify(msg.subject, msg.headers)
            self.requesters.door(verdict, msg.subject, drain=False, pod_namespace=intent.pod.namespace)
            needs = migration_needs(
                intent.pod.namespace,
                intent.pod.name,
                target_node=bool(intent.target_node),
                priority=intent.priority,
            )
            await self.requesters.authorize(verdict, needs)
            name, created = await self.jobs.submit(intent, verdict.who)
        except (Refused, Forbidden) as refused:
            INTENTS.labels(path, refused.error.code).inc()
            if refused.error.code not in ("Unavailable", "Internal"):
                who = refused.who if isinstance(refused, Forbidden) else None
                who = who or (verdict.who if verdict is not None else None)
                await self._audit(
                    intent,
                    who,
                    job=None,
                    outcome="refused",
                    message=refused.error.message,
                    reason=refused.error.code,
                )
            return IntentReply(ok=False, error=refused.error)
        INTENTS.labels(path, "created" if created else "existing").inc()
        outcome = "created" if created else "repeated"
        await self._audit(
            intent,
            verdict.who,
            job=name,
            outcome=outcome,
            message=f"job {name}",
            reason=None,
            objection=verdict.objection,
        )
        return IntentReply(ok=True, job=name, created=created)

    async def _audit(
        self,
        intent: MigrationIntent,
        who: Identity | None,
        *,
        job: str | None,
        outcome: str,
        message: str,
        reason: str | None,
        objection: str | None = None,
    ) -> None:
        details = {
            "intent": intent.idempotency_key,
            "pod": f"{intent.pod.namespace}/{intent.pod.name}",
            "outcome": outcome,
            "claimedRequester": intent.requester,
        }
        if who is not None and who.groups:
            details["groups"] = ",".join(who.groups)
        if objection:
            details["wouldRefuse"] = objection  # enforcement: audit
        record = audit_record(
            "intent",
            intent.idempotency_key,
            outcome,
            refusal_key(who, message if reason else None),
            by=actor("tracker", self.replica),
            job=job,
            requester=who.username if who is not None else None,
            reason=reason,
            message=message,
            details=details,
        )
        subject = self.subjects.audit(job or f"intent-{intent.pod.namespace}-{intent.pod.name}")
        await self.publisher.publish_audit(subject, record)
        await self.publisher.flush()

    async def _erase(self, js: JetStreamContext, msg: Msg) -> None:
        try:
            await js.delete_msg(self.subjects.intents_stream, msg.metadata.sequence.stream)
        except Exception as exc:  # the intent is refused all the same; the stream's max age ends the token
            log.warning("could not erase a token sent into the intent stream: %s", exc)

    # ----------------------------------------------------------------------------------------------------

    async def serve(self, nc: NatsClient, config: NatsConfig, stop: asyncio.Event) -> None:
        """Answer intent requests and consume fire-and-forget intents until `stop`."""

        async def on_request(msg: Msg) -> None:
            reply: IntentReply | DrainReply
            try:
                kind = codec.decode(msg.data, IntentKind).kind
                if kind == "Drain" and self.drains is not None:
                    reply = await self.drains.answer(
                        codec.decode(msg.data, DrainIntent), msg, self.requesters
                    )
                else:
                    reply = await self.answer(codec.decode(msg.data, MigrationIntent), msg, "request")
            except SchemaError as exc:
                INTENTS.labels("request", "InvalidIntent").inc()
                error = IntentError(code="InvalidIntent", message=str(exc), field=exc.field or None)
                reply = IntentReply(ok=False, error=error)
            if msg.reply:
                await msg.respond(codec.encode(reply))

        async def on_intent(msg: Msg) -> None:
            if bearer(msg.headers) is not None:  # a token must not stay in the stream: erased once read
                await self._erase(js, msg)
            intent = codec.decode(msg.data, MigrationIntent)  # undecodable: dead-lettered by the loop
            reply = await self.answer(intent, msg, "stream")
            if reply.error is not None and reply.error.code in ("Unavailable", "Internal"):
                raise RuntimeError(reply.error.message)  # redelivered later

        js = self.jobs.js = nc.jetstream()

        async def setup() -> Durable:
            await bus.ensure_work_streams(js, self.subjects, config)
            # Redelivered until handled (an API outage is waited out): never dropped after N tries.
            return await durable(
                nc,
                self.subjects.intents_stream,
                CONSUMER,
                filters=[self.subjects.all_intents],
                config=config,
                max_deliver=-1,
            )

        # Tried again while JetStream elects a leader, as every other consumer is: a replica started then
        # must not exit on it.
        sub = await bus.prepared(stop, setup, "intents")
        if sub is None:
            return
        doors = (
            self.subjects.intent_request,
            self.subjects.namespaced_intent_requests,
            self.subjects.drain_request,
        )
        requests = [await nc.subscribe(door, queue=QUEUE_GROUP, cb=on_request) for door in doors]

        async def on_account(msg: Msg) -> None:
            self.requesters.forget(msg.data)

        # Every replica hears every ServiceAccount event (no queue group): each has its own cache.
        requests.append(await nc.subscribe(self.subjects.events_of("serviceaccounts"), cb=on_account))
        await nc.flush()  # the server has the subscriptions: a request now finds this replica
        self.answering.set()
        try:
            await run_consumer(sub, js, self.subjects, name=CONSUMER, handle=one_by_one(on_intent), stop=stop)
        finally:
            self.answering.clear()
            for subscription in requests:
                await subscription.unsubscribe()
