"""Retryable limits: what admitting a job takes, and whether there is room for it now.

`plan` turns the facts into an `AdmissionPlan`: the slot sets the job joins (each with its maximum), the
token buckets it draws from, and the pod it claims. The Redis ledger script evaluates a plan atomically
(all or nothing); `evaluate` is the same rule in Python, the reference the script is tested against.

The rules (the PodMigrationJob proposal and Koordinator's guide, KEP-1397 for evictions in progress,
Koordinator for the rest):
- global token bucket `evictQPS` / `evictBurst`;
- `maxMigratingGlobally` (0: no limit);
- unless the pod is annotated `descheduler.alpha.kubernetes.io/evict` (Koordinator's guide: that annotation
  lifts exactly these): `objectLimiters` per workload and per namespace (at most `maxMigrating` per
  `duration`, charged at admission so they really limit, unlike Koordinator #2074), `maxMigratingPerNode`
  (default 2), `maxMigratingPerNamespace`, `maxMigratingPerWorkload` and `maxUnavailablePerWorkload` with the
  PodMigrationJob proposal's `GetMaxUnavailable` defaults (the workload's unavailable and migrating replicas,
  as Koordinator merges them: a job in flight counts once, by its old pod until that is gone and then by its
  replacement until that is Ready, never both);
- the pod's PodDisruptionBudget: never admit what the Eviction API would refuse (jobs admitted but not yet
  evicted count against `disruptionsAllowed`).
A job moved by Surge (`podherd.io/strategy: Surge`) takes its workload's limits and its budgets with one
replica more: the old pod goes only after the new one is Ready.
A pod whose eviction is in progress (KEP-1397) counts as migrating wherever it is; a job still waiting for
admission counts nowhere (Koordinator #1150: counting waiting jobs deadlocked a node).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import msgspec

from shared.api import annotations as known
from shared.api import eviction_gates as gates
from shared.api.eviction_gates import EvictionGate, Kind
from shared.api.intstr import max_migrating, max_unavailable
from shared.config.model import MigrationControllerArgs, ObjectLimiter
from shared.core.durations import parse_duration
from shared.ledger.slots import GLOBAL, Bucket, Slot, namespace_slot, node_slot, pdb_slot, workload_slot
from shared.rules.facts import JobFacts, PdbFacts, PodInfo, WorkloadFacts

__all__ = ["AdmissionPlan", "Bucket", "LedgerView", "Outcome", "Slot", "evaluate", "plan"]

EVICT_ANNOTATION = known.EVICT


class AdmissionPlan(msgspec.Struct, frozen=True):
    job_uid: str
    pod_uid: str
    slots: tuple[Slot, ...]
    buckets: tuple[Bucket, ...]


def plan(
    job: JobFacts,
    pod: PodInfo,
    workload: WorkloadFacts | None,
    *,
    pdbs: Sequence[PdbFacts],
    args: MigrationControllerArgs,
) -> AdmissionPlan:
    """What admitting the job takes: the slots of every limit that applies to its pod (one per budget
    covering it) and the token buckets of the eviction rate and the object limiters."""
    slots: list[Slot] = []
    buckets = [Bucket("evictQPS", GLOBAL, args.evict_qps_value, args.evict_burst, "the global eviction rate")]
    # A surge removes the old pod only once the new one is Ready: its limits and budgets allow one more (the
    # pods expected, against which the unavailable ones are counted, stay as they are).
    extra = 1 if job.surge else 0
    skip = args.skipped_gates
    # Koordinator's: the pod's evict annotation passes the arbitration's limits (its filters too); the
    # job's passes the object limiters. Neither passes the eviction rate or the budgets.
    if not job.evict:
        limiters = args.object_limiters
        if limiters.workload is not None and workload is not None:
            most = limiters.workload.max_migrating or args.max_migrating_per_workload
            count = max_migrating(workload.replicas + extra, most)  # as Koordinator's GetMaxMigrating
            buckets.extend(
                _limiter(
                    "workload",
                    workload_slot(workload.key),
                    f"workload {workload.key}",
                    limiter=limiters.workload,
                    count=count,
                )
            )
        if limiters.namespace is not None and isinstance(limiters.namespace.max_migrating, int):
            buckets.extend(
                _limiter(
                    "namespace",
                    namespace_slot(pod.namespace),
                    f"namespace {pod.namespace}",
                    limiter=limiters.namespace,
                    count=limiters.namespace.max_migrating,
                )
            )
    if EVICT_ANNOTATION not in pod.annotations:
        scope = _Scope(pod, workload, args, extra)
        for gate, slot_of in _LIMITS.items():
            slot = slot_of(scope) if gate.name not in skip else None
            if slot is not None:
                slots.append(slot)
    for pdb in pdbs:
        slots.append(
            Slot(
                "PodDisruptionBudget",
                pdb_slot(pdb.key),
                pdb.disruptions_allowed + extra,
                f"PodDisruptionBudget {pdb.key}",
            )
        )
    return AdmissionPlan(job.uid, pod.uid, tuple(slots), tuple(buckets))


@dataclass(frozen=True, slots=True)
class _Scope:
    """What a limit's slot is worked out from."""

    pod: PodInfo
    workload: WorkloadFacts | None
    args: MigrationControllerArgs
    extra: int  # the surge's one replica more


SlotOf = Callable[[_Scope], Slot | None]
# Each limit's slot, by its gate; the ledger's scripts count every slot alike (lua/admit.lua).
_LIMITS: dict[EvictionGate, SlotOf] = {}
_counts = gates.registrar(Kind.LIMIT, _LIMITS)  # a limit's slot, on its function


@_counts(gates.MAX_MIGRATING_GLOBALLY)
def _globally(s: _Scope) -> Slot | None:
    most = s.args.max_migrating_globally
    return Slot(_rule(gates.MAX_MIGRATING_GLOBALLY), GLOBAL, most, "the cluster") if most > 0 else None


@_counts(gates.MAX_MIGRATING_PER_NODE)
def _per_node(s: _Scope) -> Slot | None:
    most, node = s.args.max_migrating_per_node, s.pod.node_name
    return (
        Slot(_rule(gates.MAX_MIGRATING_PER_NODE), node_slot(node), most, f"node {node}")
        if most > 0 and node
        else None
    )


@_counts(gates.MAX_MIGRATING_PER_NAMESPACE)
def _per_namespace(s: _Scope) -> Slot | None:
    most, namespace = s.args.max_migrating_per_namespace, s.pod.namespace
    if most <= 0:
        return None
    return Slot(
        _rule(gates.MAX_MIGRATING_PER_NAMESPACE), namespace_slot(namespace), most, f"namespace {namespace}"
    )


@_counts(gates.MAX_MIGRATING_PER_WORKLOAD)
def _migrating_per_workload(s: _Scope) -> Slot | None:
    if s.workload is None:
        return None
    most = max_migrating(s.workload.replicas + s.extra, s.args.max_migrating_per_workload)
    key = s.workload.key
    return Slot(_rule(gates.MAX_MIGRATING_PER_WORKLOAD), workload_slot(key), most, f"workload {key}")


@_counts(gates.MAX_UNAVAILABLE_PER_WORKLOAD)
def _unavailable_per_workload(s: _Scope) -> Slot | None:
    """The same set as the migrating limit, counted with the workload's pods that are not Ready: each job in
    flight once."""
    if s.workload is None:
        return None
    most = max_unavailable(s.workload.replicas + s.extra, s.args.max_unavailable_per_workload)
    key, replicas = s.workload.key, s.workload.replicas
    rule = _rule(gates.MAX_UNAVAILABLE_PER_WORKLOAD)
    return Slot(rule, workload_slot(key), most, f"workload {key}", replicas=replicas)


def _rule(gate: EvictionGate) -> str:
    """A limit's slots are named by its setting (`maxMigratingPerNode`), as its refusals say it."""
    assert gate.setting is not None
    return gate.setting


assert set(_LIMITS) == {gate for gate in gates.GATES if gate.kind is Kind.LIMIT}, "every limit has its slot"
WORKLOAD_GATES = {
    _rule(gate): gate.name for gate in (gates.MAX_MIGRATING_PER_WORKLOAD, gates.MAX_UNAVAILABLE_PER_WORKLOAD)
}


def never_opens(p: AdmissionPlan) -> tuple[str, str] | None:
    """A workload limit of 0 (its workload expects no replicas: a Job, or a workload scaled to zero) admits
    no job however long it waits; Koordinator's filter would hold the job until its ttl. The rule and why
    it ends the job now, naming what lifts it; None when every limit can open."""
    for slot in p.slots:
        gate = WORKLOAD_GATES.get(slot.rule)
        if gate is not None and slot.limit <= 0:
            return slot.rule, (
                f"{slot.rule} is 0 on {slot.what}, which expects no replicas: no migration of its pods can "
                f"be admitted (skipping the {gate} gate or annotating the pod {EVICT_ANNOTATION} lifts it)"
            )
    return None


def _limiter(kind: str, key: str, what: str, *, limiter: ObjectLimiter, count: int) -> list[Bucket]:
    """An object limiter as a token bucket: `count` migrations per `duration`, bursting to `burst` (unset or
    0: 1, Koordinator's `GetLimiterBurst`: the migrations are spaced evenly over the duration)."""
    seconds = parse_duration(limiter.duration)
    if count <= 0 or seconds <= 0:  # a duration of 0 turns the limiter off
        return []
    rate = count / seconds
    return [Bucket(f"objectLimiters.{kind}", key, rate, limiter.burst or 1, what)]


# ---------------------------------------------------------------------------------------------------------
# The reference evaluation


@dataclass
class LedgerView:
    """What the ledger holds: slot members, pods being evicted in the background, buckets, pod claims."""

    slots: Mapping[str, set[str]]
    evicting: Mapping[str, set[str]]
    tokens: Mapping[str, tuple[float, float]]  # key -> (tokens, last refill time)
    claims: Mapping[str, str]  # pod uid -> job uid
    done: set[str] = field(default_factory=set)  # jobs admitted once (held or since released)
    ready: Mapping[str, set[str]] = field(default_factory=dict)  # workload slot key -> its Ready pods' uids

    def unavailable(self, slot: Slot) -> tuple[int, int]:
        """maxUnavailablePerWorkload's count at `slot`, and its part not due to migrations: each job in
        flight once (its old pod still Ready, or standing for the replica missing until its replacement is),
        pods evicted in the background, and the replicas missing or not Ready beyond those jobs."""
        members = self.slots.get(slot.key, set())
        ready = self.ready.get(slot.key, set())
        pods = {job: pod for pod, job in self.claims.items()}
        gone = sum(1 for job in members if pods.get(job) not in ready)
        other = max(0, (slot.replicas or 0) - len(ready) - gone)
        return len(members) + len(self.evicting.get(slot.key, set())) + other, other


class Outcome(msgspec.Struct, frozen=True):
    admitted: bool
    rule: str
    message: str
    forbidden: bool = False  # another job holds the pod: a non-retryable outcome


def evaluate(p: AdmissionPlan, ledger: LedgerView, now: float) -> Outcome:
    if p.job_uid in ledger.claims.values():
        return Outcome(True, "admitted", "already admitted")  # a retried decision takes nothing twice
    if p.job_uid in ledger.done:
        return Outcome(False, "done", "this job was admitted and has finished")  # arbitrated once
    holder = ledger.claims.get(p.pod_uid)
    if holder is not None:
        return Outcome(
            False, "ActiveJob", f"another migration job ({holder}) is moving this pod", forbidden=True
        )
    for slot in p.slots:
        members = ledger.slots.get(slot.key, set())
        if p.job_uid in members:
            continue
        what, grows = slot.what, 1
        if slot.replicas is None:
            used = len(members | ledger.evicting.get(slot.key, set()))
        else:
            used, other = ledger.unavailable(slot)
            what = f"{what} ({other} more unavailable)"
            if other and p.pod_uid not in ledger.ready.get(slot.key, set()):
                grows = 0  # the pod is among the replicas already unavailable: moving it adds nothing
        if used + grows > slot.limit:
            return Outcome(False, slot.rule, f"deferred: {slot.rule} {used}/{max(slot.limit, 0)} on {what}")
    for bucket in p.buckets:
        tokens, last = ledger.tokens.get(bucket.key, (float(bucket.burst), now))
        available = min(float(bucket.burst), tokens + max(0.0, now - last) * bucket.rate)
        if available < 1.0:
            wait = (1.0 - available) / bucket.rate if bucket.rate > 0 else float("inf")
            return Outcome(
                False,
                bucket.rule,
                f"deferred: {bucket.rule} exhausted for {bucket.what} (next token in {wait:.2f}s)",
            )
    return Outcome(True, "admitted", "all limits hold")
