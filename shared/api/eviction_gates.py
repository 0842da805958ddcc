"""The eviction gates, each named once: what `skipEvictionGates` can switch off (pure data).

Koordinator's gates keep its names and meaning (its `EvictionGate`s: the workload, node, namespace and
global limits, and the filters); Podherd's own filters have names no Koordinator gate can be mistaken for.
A filter's check lives in `shared.rules.filters`, a limit's slot in the arbitrator's limits, each keyed by
its entry here; missing pods and another active job for the same pod are not gates: they can never be
skipped.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeVar


class Kind(enum.Enum):
    FILTER = "filter"  # a pod that fails it is never moved by this job
    LIMIT = "limit"  # a budget the job waits for room in
    PLACEMENT = "placement"  # where the replacement may go


@dataclass(frozen=True)
class EvictionGate:
    name: str  # as skipEvictionGates spells it
    kind: Kind
    koordinator: bool = True
    # Lifted for a pod annotated `descheduler.alpha.kubernetes.io/evict`, as Koordinator's arbitrator lets
    # "any annotated as evictable pod pass non-retryable filter"; Podherd's filters of pods that cannot be
    # moved at all, or that ask to be left be, still hold.
    lifted_by_evict: bool = False
    setting: str | None = None  # a limit's number in migrationController


def _podherd(name: str) -> EvictionGate:
    return EvictionGate(f"podherd.io/{name}", Kind.FILTER, koordinator=False)


def _filter(name: str) -> EvictionGate:
    return EvictionGate(name, Kind.FILTER, lifted_by_evict=True)


def _limit(name: str) -> EvictionGate:
    return EvictionGate(name, Kind.LIMIT, setting=name[0].lower() + name[1:])


MAX_UNAVAILABLE_PER_WORKLOAD: Final = _limit("MaxUnavailablePerWorkload")
MAX_MIGRATING_PER_WORKLOAD: Final = _limit("MaxMigratingPerWorkload")
MAX_MIGRATING_PER_NODE: Final = _limit("MaxMigratingPerNode")
MAX_MIGRATING_PER_NAMESPACE: Final = _limit("MaxMigratingPerNamespace")
MAX_MIGRATING_GLOBALLY: Final = _limit("MaxMigratingGlobally")
NODE_FIT: Final = EvictionGate("NodeFit", Kind.PLACEMENT)

# The filters, in the order a job is judged by them.
EVICTION_COST: Final = EvictionGate(
    "podherd.io/EvictionCost", Kind.FILTER, koordinator=False, lifted_by_evict=True
)
NO_EVICTION: Final = _podherd("NoEviction")
DO_NOT_DISRUPT: Final = _podherd("DoNotDisrupt")
TERMINATING: Final = _podherd("Terminating")
MIRROR_POD: Final = _podherd("MirrorPod")
STATIC_POD: Final = _podherd("StaticPod")
DAEMON_SET: Final = _podherd("DaemonSet")
BARE_PODS: Final = _filter("BarePods")
SCHEDULER_NAME: Final = _podherd("SchedulerName")
NAMESPACES: Final = _filter("Namespaces")
LABEL_SELECTOR: Final = _filter("LabelSelector")
PRIORITY_THRESHOLD: Final = _filter("PriorityThreshold")
SYSTEM_CRITICAL: Final = _filter("SystemCritical")
LOCAL_STORAGE: Final = _filter("LocalStorage")
PVC: Final = _filter("PVC")
EXPECTED_REPLICAS: Final = _filter("ExpectedReplicas")
MIN_POD_AGE: Final = _podherd("MinPodAge")  # judged where the job is gathered: the pod's age is time

FILTERS: Final = (
    EVICTION_COST, NO_EVICTION, DO_NOT_DISRUPT, TERMINATING, MIRROR_POD, STATIC_POD, DAEMON_SET, BARE_PODS,
    SCHEDULER_NAME, NAMESPACES, LABEL_SELECTOR, PRIORITY_THRESHOLD, SYSTEM_CRITICAL, LOCAL_STORAGE, PVC,
    EXPECTED_REPLICAS,
)  # fmt: skip
GATES: Final = (
    MAX_UNAVAILABLE_PER_WORKLOAD, MAX_MIGRATING_PER_WORKLOAD, MAX_MIGRATING_PER_NODE,
    MAX_MIGRATING_PER_NAMESPACE, MAX_MIGRATING_GLOBALLY, *FILTERS, NODE_FIT, MIN_POD_AGE,
)  # fmt: skip
BY_NAME: Final = {gate.name: gate for gate in GATES}
EVICTION_GATES: Final = frozenset(BY_NAME)
KOORDINATOR_GATES: Final = tuple(gate.name for gate in GATES if gate.koordinator)
PODHERD_GATES: Final = tuple(gate.name for gate in GATES if not gate.koordinator)

Half = TypeVar("Half")


def registrar(
    kind: Kind, table: dict[EvictionGate, Half]
) -> Callable[[EvictionGate], Callable[[Half], Half]]:
    """A decorator that registers the half of each gate of `kind` (a filter's check, a limit's slot) in
    `table`, one per gate, on the function that is that half."""

    def for_gate(gate: EvictionGate) -> Callable[[Half], Half]:
        def registered(half: Half) -> Half:
            assert gate.kind is kind and gate not in table, gate
            table[gate] = half
            return half

        return registered

    return for_gate
