"""What the tracker keeps in Redis for each job it follows (services.tracker.keys), beside the ledger: its
deadline, which pod and Reservation name point at it, its replacement, the workload it is in flight for,
and the phase it last wrote."""

from __future__ import annotations

import json
import time

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline

from services.tracker.keys import TrackerKeys
from shared.api.pmj import TERMINAL_PHASES, PodMigrationJob
from shared.ledger.scripts import as_text

# How long the tracker's own writes of a job are known after its last one: longer than any event waits in
# the stream before it is handled.
WRITES_REMEMBERED_S = 3600
# An ended job's mark (`TrackerKeys.ended`) once something that may concern it happened.
STALE = "stale"
# The mark set only if it is still what the reconcile read at its start (ARGV[2], "" for none): a Reservation
# event noted meanwhile (the mark made stale) brings one more full reconcile.
MARK_ENDED = """
local now = redis.call('HGET', KEYS[1], ARGV[1])
if (now == false and ARGV[2] == '') or now == ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  return 1
end
return 0
"""
JOB_CHANGED = """
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return 0 end
if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 1 then redis.call('HSET', KEYS[2], ARGV[2], ARGV[3]) end
return 1
"""

# The job a pod points at. A job made for a pod another job is moving ends refused: the first keeps the
# pod (its events are how it learns the pod went), unless it has ended (its phase one of ARGV[3..]); and a
# job's end takes the pointer only if it is its own.
POINT_AT = """
local now = redis.call('HGET', KEYS[1], ARGV[1])
if now and now ~= ARGV[2] then
  local phase = redis.call('HGET', KEYS[2], now)
  if phase then
    local ended = false
    for i = 3, #ARGV do if phase == ARGV[i] then ended = true end end
    if not ended then return 0 end
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
"""
UNPOINT = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0
"""


class JobState:
    def __init__(self, client: aioredis.Redis, keys: TrackerKeys, default_ttl: str) -> None:
        self.client, self.keys, self.default_ttl = client, keys, default_ttl
        self._mark_ended = client.register_script(MARK_ENDED)
        self._job_changed = client.register_script(JOB_CHANGED)

    async def phase_written(self, name: str, phase: str) -> None:
        await self.client.hset(self.keys.phases, name, phase)

    async def settled(self, name: str, resource_versions: list[str]) -> None:
        """Remember own writes of the job that left it settled (their events are not reconciled)."""
        pipe = self.client.pipeline(transaction=False)
        self._known(name, resource_versions, pipe)
        await pipe.execute()

    def decided(self, name: str, resource_version: str, pipe: Pipeline) -> None:
        """A version of the job a reconcile read and carried out to the end: its PMJ event, often later than
        the decision or report that brought the reconcile (a job is admitted as it is created), brings
        nothing to decide either. As commands of the caller's pipeline."""
        self._known(name, [resource_version], pipe)

    def _known(self, name: str, resource_versions: list[str], pipe: Pipeline) -> None:
        pipe.sadd(self.keys.written(name), *resource_versions)
        pipe.expire(self.keys.written(name), WRITES_REMEMBERED_S)

    async def ended(self, name: str, resource_version: str, *, read: str, pipe: Pipeline) -> None:
        """The job's ending carried out (it was left at `resource_version`), unless its mark changed since it
        was `read` ("": none). As a command of the caller's pipeline."""
        await self._mark_ended(keys=[self.keys.ended], args=[name, read, resource_version], client=pipe)

    def concerned(self, name: str, pipe: Pipeline) -> None:
        """Something that may concern the job happened (an event of a Reservation it made or names): its
        next reconcile, ended or not, is a full one."""
        pipe.hset(self.keys.ended, name, STALE)

    async def is_own_settled_write(self, name: str, resource_version: str) -> bool:
        return bool(await self.client.sismember(self.keys.written(name), resource_version))

    async def job_changed(self, name: str, resource_version: str) -> bool:
        """An event of the job at `resource_version`: False when it is an own write that left it settled;
        else True, and an ended job's mark is made stale (a change by others, or a new job by its name)."""
        keys = [self.keys.written(name), self.keys.ended]
        return bool(await self._job_changed(keys=keys, args=[resource_version, name, STALE]))

    async def asked(self, job: PodMigrationJob, attempt: int) -> None:
        """The tracker asks for the job's Reservation `attempt`: the names to read are known up to it."""
        await self.client.hset(self.keys.attempts, job.metadata.uid or "", attempt)

    async def in_flight(self, name: str, workload: str) -> None:
        """The job evicts: until it ends, the room its workload's ended jobs did not use stays."""
        pipe = self.client.pipeline(transaction=False)
        pipe.sadd(self.keys.in_flight(workload), name)
        pipe.hset(self.keys.workload_uid_of, name, workload)
        await pipe.execute()

    async def was_in_flight(self, name: str) -> bool:
        return bool(await self.client.hexists(self.keys.workload_uid_of, name))

    async def track(self, job: PodMigrationJob) -> None:
        pipe = self.client.pipeline(transaction=False)
        self.tracking(job, pipe)
        await pipe.execute()

    def tracking(self, job: PodMigrationJob, pipe: Pipeline, *, at: float | None = None) -> None:
        """`track`, as commands of the caller's pipeline; `at`: when to look at the job again though nothing
        happens (by default, when its ttl counted from its creation ends)."""
        name = job.metadata.name or ""
        if at is None:
            ttl = job.spec.ttl_seconds(self.default_ttl)
            created = job.metadata.creation_timestamp
            at = (created.timestamp() if created else time.time()) + ttl
        deadline = at + 0.05
        pipe.zadd(self.keys.deadlines, {name: deadline})
        if (pod := pod_key(job)) is not None:
            # Sent whole, queued on the pipeline: a registered script there costs a SCRIPT EXISTS round trip
            # on every execute of this, the reconcile's hottest pipeline; a few hundred bytes cost less.
            pipe.eval(POINT_AT, 2, self.keys.pod_jobs, self.keys.phases, pod, name, *TERMINAL_PHASES)
        if named := job.user_reservation:  # its events carry no job label: find the job by the name
            pipe.hset(self.keys.named, named, name)

    async def untrack(self, job: PodMigrationJob, pipe: Pipeline | None = None) -> None:
        """What points at the job goes; as commands of the caller's `pipe` when given (it runs them)."""
        name = job.metadata.name or ""
        mine = await self.client.hget(self.keys.replacement, job.metadata.uid or "")
        own, pipe = pipe is None, pipe if pipe is not None else self.client.pipeline(transaction=False)
        if mine is not None:
            namespace, pod, _ = json.loads(mine)
            pipe.hdel(self.keys.replacement_jobs, f"{namespace}/{pod}")
        pipe.zrem(self.keys.deadlines, name)
        if (pod := pod_key(job)) is not None:
            pipe.eval(UNPOINT, 1, self.keys.pod_jobs, pod, name)  # sent whole, as POINT_AT
        if named := job.user_reservation:
            pipe.hdel(self.keys.named, named)
        if own:
            await pipe.execute()


def pod_key(job: PodMigrationJob) -> str | None:
    """How the tracker keys the pod a job is for (`namespace/name`), None for a job without one."""
    ref = job.spec.pod_ref
    return None if ref is None else f"{ref.namespace}/{ref.name}"


def is_terminal(written: bytes | str | None) -> bool:
    """A phase as kept in `phases` (None when not known) is a terminal one."""
    return written is not None and as_text(written) in TERMINAL_PHASES
