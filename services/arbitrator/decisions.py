"""The arbitrator's decisions out: each admission or rejection published to the jobs stream with its
audit record (pipelined; the caller flushes), deferrals audited when their reason changes, and the jobs
told remembered as decided once their messages are acknowledged.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

import redis.asyncio as aioredis
from prometheus_client import Counter, Histogram

from services.arbitrator.candidates import RULE_WINDOW, Prepared, rejection_of
from services.arbitrator.keys import ArbitratorKeys
from services.arbitrator.wait_words import wait_words
from shared.api import codec
from shared.api.audit import actor, audit_record
from shared.api.messages import Decision, JobRef, WindowOpening
from shared.api.surge import STRATEGY_SURGE
from shared.ledger.scripts import as_text
from shared.ledger.slots import Slot
from shared.ledger.store import ADMITTED, DEFERRED, FORBIDDEN, REJECTED, Candidate, Ledger, Verdict
from shared.redis.durable import Durability
from shared.rules import filters
from shared.rules.facts import queued_facts

log = logging.getLogger("services.arbitrator.engine")

DECISIONS = Counter("podherd_arbitrator_decisions_total", "Arbitration decisions", ["decision", "rule"])
ADMISSION_SECONDS = Histogram(
    "podherd_arbitrator_admission_seconds",
    "From a job entering the queue to its admission",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)


class Publisher(Protocol):
    """Pipelined publishing (shared.nats.publisher): `publish` does not wait; `flush` waits for the acks."""

    async def publish(self, subject: str, data: bytes, msg_id: str) -> None: ...

    async def flush(self) -> int: ...


class Decisions:
    def __init__(
        self,
        ledger: Ledger,
        keys: ArbitratorKeys,
        publisher: Publisher,
        *,
        durability: Durability,
        replica: str,
        subject: Callable[[str, str], str],
        audit_subject: Callable[[str], str],
    ) -> None:
        self.ledger, self.keys, self.publisher = ledger, keys, publisher
        self.redis: aioredis.Redis = ledger.client
        self.replica, self.subject, self.audit_subject = replica, subject, audit_subject
        self.durability = durability
        # The ledger's generation: part of every decision's Msg-Id, so a job decided again after a ledger
        # rebuild is published again, while replicas repeating a decision within one generation are not.
        self.generation = ""

    async def told(self, uids: list[str]) -> None:
        """Once what was published is acknowledged: these jobs are decided, and their outcomes told."""
        await self.publisher.flush()
        if uids:
            pipe = self.redis.pipeline(transaction=False)
            pipe.hset(self.keys.decided, mapping=dict.fromkeys(uids, "1"))
            pipe.hdel(self.keys.deferred, *uids)
            self.ledger.queue.announced(pipe, uids)
            await pipe.execute()

    async def admitted(
        self, name: str, candidate: Candidate, since: float | None, *, window: WindowOpening | None = None
    ) -> None:
        if since is not None:
            ADMISSION_SECONDS.observe(max(0.0, time.time() - since))
        decision = Decision(
            job=JobRef(name=name, uid=candidate.job_uid),
            decision="admitted",
            rule="admitted",
            message="admitted: every limit holds",
            decided_at=datetime.now(UTC),
            replica=self.replica,
            slots=[s.key for s in candidate.slots],
            strategy=STRATEGY_SURGE if candidate.surge else None,
            window=window,
        )
        await self.send(decision)

    async def tell(self, batch: list[Prepared], verdicts: list[Verdict]) -> int:
        """Publish a round's outcomes (pipelined, acknowledged together), then mark them told."""
        told: list[str] = []
        deferred: list[tuple[Prepared, Verdict]] = []
        admitted = 0
        for item, verdict in zip(batch, verdicts, strict=True):
            uid = item.candidate.job_uid
            if verdict.outcome == ADMITTED:
                admitted += 1
                await self.admitted(item.name, item.candidate, item.since, window=item.window)
                told.append(uid)
            elif verdict.outcome == FORBIDDEN:
                await self.reject(
                    item.name, uid, rejection_of(FORBIDDEN, verdict.rule, verdict.message, reason="")
                )
                told.append(uid)
            elif verdict.outcome == REJECTED:
                assert item.candidate.reject is not None
                rule, reason, message = item.candidate.reject
                await self.reject(item.name, uid, rejection_of(REJECTED, rule, message, reason=reason))
                told.append(uid)
            elif verdict.outcome == DEFERRED:
                deferred.append((item, verdict))
        await self.deferred(deferred)
        await self.told(told)
        return admitted

    async def reject(self, name: str, uid: str, rejection: filters.Rejection) -> None:
        decision = Decision(
            job=JobRef(name=name, uid=uid),
            decision="rejected",
            rule=rejection.rule,
            message=rejection.message,
            reason=rejection.reason,
            decided_at=datetime.now(UTC),
            replica=self.replica,
        )
        await self.send(decision)

    async def reject_now(self, name: str, uid: str, rejection: filters.Rejection) -> None:
        """Reject a job that never entered the queue (invalid), and remember it as decided."""
        await self.reject(name, uid, rejection)
        await self.told([uid])

    async def deferred(self, items: list[tuple[Prepared, Verdict]]) -> None:
        """Audit a deferral when its rule or the object holding the job changes (a slot, a token bucket,
        missing facts, a window's next opening), not each time the job is looked at again: a countdown or a
        count in the message is no change. Each such change is also told to the tracker, which writes what
        the job waits for into its status (a window's opening too)."""
        if not items:
            return
        uids = [item.candidate.job_uid for item, _ in items]
        previous = await self.redis.hmget(self.keys.deferred, uids)
        changed: dict[Any, Any] = {}
        for (item, verdict), before in zip(items, previous, strict=True):
            uid = item.candidate.job_uid
            previously = as_text(before) if before is not None else ""
            window = item.window if verdict.rule == RULE_WINDOW else None
            holder = f"{verdict.holder}|{window.opens_at.timestamp()}" if window else verdict.holder
            if previously == holder:
                continue
            changed[uid] = holder
            DECISIONS.labels("deferred", verdict.rule).inc()
            digest = hashlib.sha1(f"{previously}>{holder}".encode()).hexdigest()[:12]
            await self._tell_wait(item, verdict, window=window, digest=digest)
            record = audit_record(
                "decision",
                "deferred",
                digest,
                by=actor("arbitrator", self.replica),
                job=item.name,
                job_uid=uid,
                rule=verdict.rule,
                message=verdict.message,
                details={"decision": "deferred", "waitingOn": verdict.gate},
            )
            await self.publisher.publish(self.audit_subject(item.name), codec.encode(record), record.id)
        if changed:
            await self.redis.hset(self.keys.deferred, mapping=changed)

    async def _tell_wait(
        self, item: Prepared, verdict: Verdict, *, window: WindowOpening | None, digest: str
    ) -> None:
        decision = Decision(
            job=JobRef(name=item.name, uid=item.candidate.job_uid),
            decision="deferred",
            rule=verdict.rule,
            message=wait_words(verdict, item.candidate.buckets),
            decided_at=datetime.now(UTC),
            replica=self.replica,
            window=window,
        )
        msg_id = f"{item.candidate.job_uid}/deferred/{digest}/{self.generation}"
        await self.publisher.publish(self.subject("deferred", item.name), codec.encode(decision), msg_id)

    async def send(self, decision: Decision) -> None:
        """Publish a decision and its audit record. The caller remembers the job as decided once they are
        acknowledged (a crash in between re-decides it; the same Nats-Msg-Id makes the repeat a no-op)."""
        DECISIONS.labels(decision.decision, decision.rule).inc()
        await self.publisher.publish(
            self.subject(decision.decision, decision.job.name),
            codec.encode(decision),
            f"{decision.job.uid}/{decision.decision}/{self.generation}",
        )
        record = audit_record(
            "decision",
            "decision",
            decision.decision,
            by=actor("arbitrator", self.replica),
            at=decision.decided_at,
            job=decision.job.name,
            job_uid=decision.job.uid,
            rule=decision.rule,
            reason=decision.reason,
            message=decision.message,
            details={"decision": decision.decision},
        )
        await self.publisher.publish(self.audit_subject(decision.job.name), codec.encode(record), record.id)
        if log.isEnabledFor(logging.INFO):
            log.info(
                "%s %s: %s",
                decision.decision,
                decision.job.name,
                decision.message,
                extra={"job": decision.job.name, "rule": decision.rule},
            )

    async def announce_pending(self, *, older_than: float) -> None:
        """Publish outcomes a replica took off the queue but may have died before telling (idempotent:
        the decision's Nats-Msg-Id is the same whoever publishes it)."""
        pending = await self.ledger.queue.unannounced(older_than=older_than)
        if pending:
            await self.durability.confirm()  # what is told must survive a failover
        for uid, a in pending.items():
            raw = await self.redis.hget(self.keys.jobs, uid)
            name = (queued_facts(raw, "").name if raw else None) or uid
            if a.outcome == ADMITTED:
                keys, surge = await self.ledger.held_slots(uid)
                slots = tuple(Slot("", k, 0, "") for k in keys)
                candidate = Candidate(uid, a.pod_uid, slots, (), surge=surge)
                await self.admitted(name, candidate, None)
            else:
                await self.reject(name, uid, rejection_of(a.outcome, a.rule, a.message, reason=a.reason))
        if pending:
            await self.told(list(pending))
