"""The order among jobs competing for the same room (the PodMigrationJob proposal's Sort stage, KEP-1397
first).

1. eviction already in progress first (KEP-1397: finishing what has started disturbs least);
   then pods that ask to be left be (`noEvictionPolicy` / `autoscalerProtections` Preferred) last;
2. higher QoS first: LSE > LSR > LS > BE (label `koordinator.sh/qosClass`), pods without the label last;
3. higher pod priority first;
4. higher migration priority first;
5. fewer past failed attempts of this pod first;
6. fewer past migrations of its workload first;
7. fewer replicas of its workload migrating now first;
8. lower eviction cost first, then lower `controller.kubernetes.io/pod-deletion-cost` (the pod its
   ReplicaSet would remove first goes first, Koordinator #939), then the older job, then the name (so the
   order is total).

Koordinator's code sorts QoS and priority the other way (the cheapest pods to disturb first), and so does
Podherd by default (`arbitrator.sortOrder: cheapestFirst`); `seed` selects the order above.

`sort_key` gives a tuple for Python and `lex_key` the same order as a string, for a Redis sorted set read
with ZRANGEBYLEX, so every arbitrator replica sees one queue in one order.
"""

from __future__ import annotations

from shared.api import annotations as known
from shared.config.model import MigrationControllerArgs
from shared.rules.facts import JobFacts, PodInfo, WorkloadFacts
from shared.rules.filters import autoscaler_protection

QOS_LABEL = "koordinator.sh/qosClass"
QOS_RANK = {"LSE": 4, "LSR": 3, "LS": 2, "BE": 1}  # no label: 0
EVICTION_IN_PROGRESS = known.EVICTION_IN_PROGRESS
EVICTION_COST = known.EVICTION_COST
_PRIORITY_OFFSET = 2**31  # priorities are int32: shift to non-negative for fixed-width strings

SortKey = tuple[int, int, int, int, int, int, int, int, int, int, float, str]


def eviction_cost(pod: PodInfo) -> int:
    return _int32(pod.annotations.get(EVICTION_COST, "0"))


def deletion_cost(pod: PodInfo) -> int:
    return _int32(pod.annotations.get(known.POD_DELETION_COST, "0"))


def _int32(text: str) -> int:
    try:
        return max(-_PRIORITY_OFFSET, min(int(text), _PRIORITY_OFFSET - 1))
    except ValueError:
        return 0


def asks_to_stay(pod: PodInfo, args: MigrationControllerArgs) -> bool:
    """The pod asks to be left be, and that is honoured as a preference: its job goes after the others."""
    if args.no_eviction_policy == "Preferred" and known.PREFER_NO_EVICTION in pod.annotations:
        return True
    return args.autoscaler_protections == "Preferred" and autoscaler_protection(pod) is not None


def sort_key(
    job: JobFacts,
    pod: PodInfo,
    workload: WorkloadFacts | None,
    *,
    migrating_in_workload: int,
    order: str = "seed",
    stays: bool = False,
) -> SortKey:
    """Smaller sorts first. `stays`: the pod asks to be left be (`asks_to_stay`)."""
    direction = -1 if order == "seed" else 1
    return (
        0 if EVICTION_IN_PROGRESS in pod.annotations else 1,
        1 if stays else 0,
        direction * QOS_RANK.get(pod.labels.get(QOS_LABEL, ""), 0),
        direction * (pod.priority or 0),
        -max(-_PRIORITY_OFFSET + 1, min(job.migration_priority, _PRIORITY_OFFSET - 1)),
        job.failed_attempts,
        workload.past_migrations if workload else 0,
        migrating_in_workload,
        eviction_cost(pod),
        deletion_cost(pod),
        job.created_at,
        job.name,
    )


def lex_key(key: SortKey) -> str:
    """The sort key as a fixed-width string that sorts like the tuple (every part made non-negative)."""
    in_progress, stays, qos, priority, migration_priority, attempts, migrations, migrating, cost, deletion = (
        key[:10]
    )
    created, name = key[10:]
    return (
        f"{in_progress}{stays}"
        f"{qos + 8:02d}"
        f"{priority + _PRIORITY_OFFSET * 2:011d}"
        f"{migration_priority + _PRIORITY_OFFSET * 2:011d}"
        f"{min(attempts, 99_999):05d}"
        f"{min(migrations, 999_999):06d}"
        f"{min(migrating, 99_999):05d}"
        f"{cost + _PRIORITY_OFFSET:011d}"
        f"{deletion + _PRIORITY_OFFSET:011d}"
        f"{created:017.6f}"
        f"|{name}"
    )
