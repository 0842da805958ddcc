"""Which pods a ReplicaSet removes when it scales down, in the ReplicaSet controller's order (pure).

The controller deletes the first `count` pods of its active pods sorted by these rules, each deciding only
when the ones before it tie (kube-controller-manager, `ActivePodsWithRanks` with the PodDeletionCost and
LogarithmicScaleDown gates on, their defaults):

1. unassigned before assigned;
2. phase Pending, then Unknown, then Running;
3. not Ready before Ready;
4. lower `controller.kubernetes.io/pod-deletion-cost` first (`deletion_cost`);
5. more active pods of the workload (every ReplicaSet of its Deployment) on the pod's node first;
6. both Ready: the one Ready for less time first, in powers of two of nanoseconds since now, ties by uid;
7. more container restarts first;
8. newer first, by creation time in powers of two of nanoseconds since now, ties by uid.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence

from kubesim.apiserver.records import Obj, parse_iso
from kubesim.controllers.owned import is_active, is_ready
from shared.api.annotations import POD_DELETION_COST

_PHASE_ORDER = {"Pending": 0, "Unknown": 1, "Running": 2}  # any other phase counts as Pending
_DECIMAL = re.compile(r"-?[0-9]+")


def deletion_cost(pod: Obj) -> int:
    """As the controller reads it: a sign or a first digit other than a leading zero ("+1" and "08" are
    not valid, "-08" is -8), then a base-10 int32; anything else counts as 0."""
    value = (pod["metadata"].get("annotations") or {}).get(POD_DELETION_COST)
    if not value or not (value[0] == "-" or value == "0" or value[0] in "123456789"):
        return 0
    if not _DECIMAL.fullmatch(value):
        return 0
    number = int(value)
    return number if -(2**31) <= number < 2**31 else 0


def victims(pods: Sequence[Obj], related: Sequence[Obj], *, count: int, now: float) -> list[Obj]:
    """The `count` pods of `pods` the ReplicaSet deletes first. `related`: the pods of every ReplicaSet of
    the same owner (a superset of `pods`), whose active ones rank a node by how many it runs."""
    if count >= len(pods):
        return list(pods)
    on_node = Counter(str((p.get("spec") or {}).get("nodeName") or "") for p in related if is_active(p))
    ranked = [(pod, on_node[str((pod.get("spec") or {}).get("nodeName") or "")]) for pod in pods]

    def compare(a: tuple[Obj, int], b: tuple[Obj, int]) -> int:
        return _compare(a, b, now)

    ranked.sort(key=functools.cmp_to_key(compare))
    return [pod for pod, _ in ranked[:count]]


def _compare(a: tuple[Obj, int], b: tuple[Obj, int], now: float) -> int:
    """-1 when `a` goes before `b`."""
    (pa, rank_a), (pb, rank_b) = a, b
    node_a, node_b = _node(pa), _node(pb)
    if node_a != node_b and (not node_a or not node_b):
        return -1 if not node_a else 1
    for key_a, key_b in (
        (_PHASE_ORDER.get(_phase(pa), 0), _PHASE_ORDER.get(_phase(pb), 0)),
        (is_ready(pa), is_ready(pb)),
        (deletion_cost(pa), deletion_cost(pb)),
        (-rank_a, -rank_b),
    ):
        if key_a != key_b:
            return -1 if key_a < key_b else 1
    if is_ready(pa) and is_ready(pb):
        ready_a, ready_b = _ready_since(pa), _ready_since(pb)
        if ready_a != ready_b:
            return _by_age(ready_a, ready_b, now=now, pods=(pa, pb))
    restarts_a, restarts_b = _restarts(pa), _restarts(pb)
    if restarts_a != restarts_b:
        return -1 if restarts_a > restarts_b else 1
    created_a, created_b = _created(pa), _created(pb)
    if created_a != created_b:
        return _by_age(created_a, created_b, now=now, pods=(pa, pb))
    return 0


def _by_age(t_a: float | None, t_b: float | None, *, now: float, pods: tuple[Obj, Obj]) -> int:
    """The younger first; a time not set counts as the youngest; times in the same power of two of
    nanoseconds before `now` tie, broken by uid."""
    if t_a is None or t_b is None:
        return -1 if t_a is None else 1
    diff = _log_rank(now - t_a) - _log_rank(now - t_b)
    if diff == 0:
        uid_a, uid_b = (p["metadata"].get("uid", "") for p in pods)
        return -1 if uid_a < uid_b else (1 if uid_a > uid_b else 0)
    return -1 if diff < 0 else 1


def _log_rank(seconds: float) -> int:
    nanoseconds = round(seconds * 1e9)
    return int(math.log2(nanoseconds)) if nanoseconds > 0 else -1


def _node(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def _ready_since(pod: Obj) -> float | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready" and condition.get("status") == "True":
            since = condition.get("lastTransitionTime")
            return parse_iso(since) if since else None
    return None


def _restarts(pod: Obj) -> int:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return max((int(s.get("restartCount") or 0) for s in statuses), default=0)


def _created(pod: Obj) -> float | None:
    created = pod["metadata"].get("creationTimestamp")
    return parse_iso(created) if created else None
