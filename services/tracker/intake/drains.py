"""Drain intents: a node cordoned and each of its pods moved by a PodMigrationJob (kubectl drain's rules,
`drain_writes`). Its sender is authorized before the node is looked up (`patch nodes`), and again once the
plan says which namespaces it moves pods from (`shared.access.permissions`), before anything is
written: a refused drain cordons nothing and creates nothing. Each drain started or refused is audited.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from prometheus_client import Counter

from services.tracker.intake.requesters import Forbidden, Requesters, Verdict, refusal_key
from shared.access.permissions import Identity, drain_node_needs, drain_pod_needs
from shared.api import codec
from shared.api.audit import actor, audit_record
from shared.api.drain import LIFT_BARE_POD, node_hash
from shared.api.messages import DrainIntent, DrainReply, IntentError, IntentErrorCode
from shared.config.model import MigrationControllerArgs
from shared.intake.drain_writes import DrainRefused, DrainWrites
from shared.kube.client import KubeClient, KubeError
from shared.nats import bus
from shared.nats.publisher import Publisher

if TYPE_CHECKING:
    from nats.aio.msg import Msg

log = logging.getLogger(__name__)
DRAINS = Counter("podherd_tracker_drains_total", "Drain intents received", ["outcome"])


class Drains:
    def __init__(
        self,
        kube: KubeClient,
        publisher: Publisher,
        subjects: bus.Subjects,
        *,
        args: MigrationControllerArgs,
        replica: str,
    ) -> None:
        self.kube, self.publisher, self.subjects, self.args = kube, publisher, subjects, args
        self.replica = replica
        self.writes = DrainWrites(kube, args)

    async def answer(self, intent: DrainIntent, msg: Msg, requesters: Requesters) -> DrainReply:
        verdict: Verdict | None = None
        try:
            verdict = await requesters.identify(msg.subject, msg.headers)
            requesters.door(verdict, msg.subject, drain=True)
            reply = await self._drain(intent, verdict, requesters)
        except Forbidden as refused:
            DRAINS.labels(refused.error.code).inc()
            if refused.error.code != "Unavailable":  # nothing was decided: to be sent again
                await self._audit(intent, refused.who, reply=None, refused=refused.error.message)
            return DrainReply(ok=False, node=intent.node, error=refused.error)
        except DrainRefused as refused:
            DRAINS.labels(refused.error.code).inc()
            return DrainReply(ok=False, node=intent.node, error=refused.error)
        except KubeError as exc:
            code: IntentErrorCode = "Unavailable" if exc.retryable else "Internal"
            DRAINS.labels(code).inc()
            error = IntentError(code=code, message=f"the Kubernetes API server answered {exc}")
            return DrainReply(ok=False, node=intent.node, error=error)
        DRAINS.labels("planned" if intent.dry_run else ("started" if reply.ok else "refused")).inc()
        if not intent.dry_run:
            await self._audit(intent, verdict.who, reply=reply)
        return reply

    async def _drain(self, intent: DrainIntent, verdict: Verdict, requesters: Requesters) -> DrainReply:
        await requesters.authorize(verdict, drain_node_needs(intent.node))  # before the node is looked up
        node, plan = await self.writes.look(intent)
        deletes = self.args.eviction_policy == "Delete"
        bare = (m.namespace for m in plan.moves if LIFT_BARE_POD in m.lifts)
        needs = drain_pod_needs((m.namespace for m in plan.moves), deletes=deletes, bare=bare)
        await requesters.authorize(verdict, needs)
        reply = await self.writes.reply(node, plan)
        if verdict.objection:
            reply.warnings.append(f"would be refused (enforcement: audit): {verdict.objection}")
        if not reply.ok or intent.dry_run:
            return reply
        await self.writes.write(
            intent, node, plan=plan, reply=reply, requester=verdict.who.username, verified=True
        )
        return reply

    async def _audit(
        self,
        intent: DrainIntent,
        who: Identity | None,
        *,
        reply: DrainReply | None,
        refused: str | None = None,
    ) -> None:
        jobs = [m.job for m in reply.moves] if reply is not None else []
        details = {
            "node": intent.node,
            "jobs": json.dumps(jobs),
            "options": codec.encode(intent.options).decode(),
            "claimedRequester": intent.requester,
        }
        if who is not None and who.groups:
            details["groups"] = ",".join(who.groups)
        if reply is not None:
            message = f"drain of node {intent.node}: {len(reply.moves)} pods to move, {len(reply.stays)} stay"
        else:
            message = f"drain of node {intent.node} refused: {refused}"
        outcome = "refused" if refused else "started"
        record = audit_record(
            "drain",
            intent.node,
            outcome,
            "-".join(jobs)[:64],
            str(len(jobs)),
            refusal_key(who, refused),
            by=actor("tracker", self.replica),
            requester=who.username if who is not None else None,
            reason="Forbidden" if refused else None,
            message=message,
            details=details,
        )
        await self.publisher.publish_audit(self.subjects.audit(f"drain-{node_hash(intent.node)}"), record)
        await self.publisher.flush()
