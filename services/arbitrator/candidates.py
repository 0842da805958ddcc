"""A queued job made ready for the ledger: waiting for facts, rejected by a filter, or planned into the
slots and token buckets the limits ask for (services.arbitrator.rules)."""

from __future__ import annotations

from datetime import datetime

import msgspec

from services.arbitrator.gather import Loaded
from services.arbitrator.rules import limits
from shared.api.eviction_gates import MIN_POD_AGE
from shared.api.messages import PodInfo, WindowOpening
from shared.api.pmj import REASON_FORBIDDEN_MIGRATE_POD
from shared.api.workload_kinds import BUILTIN
from shared.config.model import MigrationControllerArgs
from shared.config.windows import Closed, Open
from shared.core.durations import parse_duration
from shared.ledger.store import FORBIDDEN, Candidate
from shared.rules import filters
from shared.rules.facts import PdbFacts, WorkloadFacts, workload_key

# A job whose pod (or workload) the facts do not know yet is looked at again after this long (sooner when
# the fact arrives). Facts lag (a watcher restarting, Redis restored): an absent fact never fails a job; the
# tracker, which reads the pod itself, fails it MissingPod when the pod is gone.
FACTS_WAIT = 1.0
RULE_MIN_POD_AGE = MIN_POD_AGE.name
# A job waiting for its disruption window is looked at again this long after the window opens (the timer
# never fires early, and the window is open by then).
WINDOW_SLACK = 0.01
RULE_WINDOW = "DisruptionWindow"


class Prepared(msgspec.Struct, frozen=True):
    """A queued job made ready for the ledger."""

    candidate: Candidate
    name: str
    since: float  # when it entered the queue
    # The disruption window's opening it waits for (deferred) or is admitted in; None: no window applies.
    window: WindowOpening | None = None


def window_wait(window: Closed, now: datetime) -> tuple[float, str, str]:
    """A job waits, at no cost, until the next opening of its windows."""
    o = window.opening
    seconds = max(0.0, (o.opens_at - now).total_seconds()) + WINDOW_SLACK
    message = (
        f"waiting for disruption window {o.window}: it opens at {o.opens_at:%Y-%m-%dT%H:%M:%SZ} "
        f"(until {o.closes_at:%Y-%m-%dT%H:%M:%SZ})"
    )
    return seconds, RULE_WINDOW, message


def too_young(pod: PodInfo, args: MigrationControllerArgs, now: datetime) -> tuple[float, str, str] | None:
    """A pod younger than `minPodAge` (from its status.startTime; not started yet: younger than any age)
    waits until it is old enough, as the descheduler's DefaultEvictor leaves it be until then."""
    if args.min_pod_age is None or RULE_MIN_POD_AGE in args.skipped_gates:
        return None
    least = parse_duration(args.min_pod_age)
    age = (now - pod.started_at).total_seconds() if pod.started_at is not None else 0.0
    if age >= least:
        return None
    since = f"started {pod.started_at:%Y-%m-%dT%H:%M:%SZ}" if pod.started_at else "not started yet"
    message = f"waiting for the pod to be {args.min_pod_age} old (minPodAge; {since})"
    return max(least - age, FACTS_WAIT), RULE_MIN_POD_AGE, message


def candidate(
    uid: str,
    item: Loaded,
    args: MigrationControllerArgs,
    *,
    window: Open | Closed | None = None,
    now: datetime | None = None,
    known: frozenset[str] = frozenset(BUILTIN),
) -> Candidate:
    """`known`: the workload kinds whose replica counts the watcher publishes (a fact not in yet is waited
    for); a pod of any other kind is counted as Koordinator counts it, as 0 replicas (a drain's, as kubectl
    drain counts it: under its budgets alone)."""
    facts, pod, workload = item.facts, item.pod, item.workload
    missing = None
    if pod is None:
        missing = f"pod {facts.pod_namespace}/{facts.pod_name}"
    elif pod.workload is not None and workload is None:
        if pod.workload.kind in known:
            missing = f"workload {workload_key(pod.workload)}"
        elif not facts.drain:
            workload = WorkloadFacts(key=workload_key(pod.workload), replicas=0)
    if missing is not None or pod is None:
        waiting = (FACTS_WAIT, "WaitingForFacts", f"waiting for {missing}")
        return Candidate(uid, pod.uid if pod else "", (), (), wait=waiting)
    budgets = [
        PdbFacts(key=f"{pdb.namespace}/{pdb.name}", disruptions_allowed=pdb.disruptions_allowed)
        for pdb in item.pdbs
    ]
    may_surge = facts.drain or args.surge.single_replica_deployments or args.surge.zero_disruption_deployments
    if may_surge and not facts.surge:  # (most jobs are neither asked nor eligible to surge: no more work)
        allowed = [b.disruptions_allowed for b in budgets]
        if filters.surges(facts, workload, pdbs=allowed, args=args):
            facts = msgspec.structs.replace(facts, surge=True)
    threshold = args.priority_threshold.value if args.priority_threshold is not None else None
    rejection = filters.evaluate(facts, pod, workload, args=args, priority_threshold=threshold)
    if rejection is not None:
        return rejected(uid, pod.uid, rejection)
    if isinstance(window, Closed) and now is not None:
        return Candidate(uid, pod.uid, (), (), wait=window_wait(window, now))
    if now is not None and (young := too_young(pod, args, now)) is not None:
        return Candidate(uid, pod.uid, (), (), wait=young)
    plan = limits.plan(facts, pod, workload, pdbs=budgets, args=args)
    if (closed := limits.never_opens(plan)) is not None:
        rule, message = closed
        return rejected(uid, pod.uid, filters.Rejection(rule, REASON_FORBIDDEN_MIGRATE_POD, message))
    return Candidate(uid, pod.uid, plan.slots, plan.buckets, surge=facts.surge)


def rejection_of(outcome: str, rule: str, message: str, *, reason: str) -> filters.Rejection:
    """A ledger refusal (another job holds the pod) or a filter's rejection, as its decision tells it."""
    if outcome == FORBIDDEN:
        return filters.Rejection(rule, REASON_FORBIDDEN_MIGRATE_POD, f"{rule}: {message}")
    return filters.Rejection(rule, reason or REASON_FORBIDDEN_MIGRATE_POD, message)


def rejected(uid: str, pod_uid: str, rejection: filters.Rejection) -> Candidate:
    return Candidate(uid, pod_uid, (), (), reject=(rejection.rule, rejection.reason, rejection.message))
