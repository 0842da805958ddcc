"""A plan being made: the cluster as the moves so far leave it, the per-run caps and the nodes being emptied.

A move is checked with the pod still on its node, as its Reservation will be scheduled (the pod leaves only
once the room is held), and then applied: the pod leaves its node and takes the room on the target, so the
next move sees both.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from shared.fit.check import Fit
from shared.fit.cluster import Cluster
from shared.fit.views import PodView
from shared.rebalance.candidates import Candidate

FILL_RESOURCES = ("cpu", "memory", "pods")


@dataclass(frozen=True)
class Caps:
    """The descheduler's per-run limits: maxNoOfPodsToEvictPerNode, maxNoOfPodsToEvictPerNamespace and
    maxNoOfPodsToEvictTotal (None: no limit)."""

    per_node: int | None = None
    per_namespace: int | None = None
    total: int | None = None


@dataclass(frozen=True)
class Move:
    pod: str
    owner: str | None
    source: str
    target: str
    why: str


@dataclass
class Planning:
    cluster: Cluster
    candidates: Mapping[str, Candidate]
    caps: Caps = Caps()
    schedulers: frozenset[str] | None = None  # the schedulers that honour Reservations, when jobs use them
    moves: list[Move] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # pod -> why it stays
    emptying: set[str] = field(default_factory=set)
    views: dict[str, PodView] = field(default_factory=dict)  # where each pod is now
    _from_node: Counter[str] = field(default_factory=Counter)
    _in_namespace: Counter[str] = field(default_factory=Counter)

    @classmethod
    def of(
        cls,
        cluster: Cluster,
        candidates: Iterable[Candidate],
        *,
        caps: Caps = Caps(),
        schedulers: frozenset[str] | None = None,
    ) -> Planning:
        found = {c.key: c for c in candidates}
        planning = cls(cluster, found, caps, schedulers)
        planning.views = {key: c.view for key, c in found.items()}
        return planning

    def on(self, node: str) -> list[Candidate]:
        """The candidates now on `node`."""
        return [self.candidates[k] for k in self.cluster.pods_on.get(node, {}) if k in self.candidates]

    def why_not_movable(self, pod: Candidate) -> str | None:
        """Why this pod may not move in this plan, if so: what protects it (a move of the last minutes among
        that), the scheduler that placed it, a cap."""
        if pod.protected:
            return pod.protected
        if self.schedulers is not None and pod.scheduler not in self.schedulers:
            return f"placed by {pod.scheduler}, which holds no Reservation"
        view = self.views[pod.key]
        caps = self.caps
        if caps.total is not None and len(self.moves) >= caps.total:
            return f"maxNoOfPodsToEvictTotal ({caps.total}) reached"
        if caps.per_node is not None and self._from_node[view.node or ""] >= caps.per_node:
            return f"maxNoOfPodsToEvictPerNode ({caps.per_node}) reached on {view.node}"
        if caps.per_namespace is not None and self._in_namespace[view.namespace] >= caps.per_namespace:
            return f"maxNoOfPodsToEvictPerNamespace ({caps.per_namespace}) reached in {view.namespace}"
        return None

    def move(self, pod: Candidate, targets: Iterable[str], *, why: str) -> Move | None:
        """Move the pod to the first of `targets` it fits, as the scheduler would place its replacement;
        None (and the reason kept in `skipped`) when it may not move or fits none."""
        refused = self.why_not_movable(pod)
        if refused is not None:
            self.skipped[pod.key] = refused
            return None
        view = self.views[pod.key]
        now, after = self._fits(view)
        for target in targets:
            if target == view.node or target in self.emptying:
                continue
            node = self.cluster.nodes[target]
            if now.fits(node) and (after is None or after.fits(node)):
                return self._apply(pod, target, why=why)
        self.skipped[pod.key] = "no node it fits"
        return None

    def _fits(self, view: PodView) -> tuple[Fit, Fit | None]:
        """The pod's fit as its Reservation meets it (the pod still on its node), and, where its own terms or
        placed pods' terms are counted, as the cluster will be once it has gone: a move must be right at
        both times, or it would make a spread or affinity violation the next plan undoes."""
        now = Fit(self.cluster, view)
        if now.placement is None:
            return now, None
        self.cluster.remove(view)
        try:
            after = Fit(self.cluster, view)
        finally:
            self.views[view.key] = self.cluster.place(view, view.node or "")
        return now, after

    def take_back(self, count: int) -> None:
        """Undo the last `count` moves (a node that could not be emptied whole keeps its pods)."""
        for move in reversed(self.moves[len(self.moves) - count :]):
            view = self.views[move.pod]
            self.cluster.remove(view)
            self.views[move.pod] = self.cluster.place(view, move.source)
            self._from_node[move.source] -= 1
            self._in_namespace[view.namespace] -= 1
        del self.moves[len(self.moves) - count :]

    def _apply(self, pod: Candidate, target: str, *, why: str) -> Move:
        view = self.views[pod.key]
        source = view.node or ""
        self.cluster.remove(view)
        self.views[pod.key] = self.cluster.place(view, target)
        self._from_node[source] += 1
        self._in_namespace[view.namespace] += 1
        move = Move(pod.key, pod.owner, source, target, why)
        self.moves.append(move)
        return move


def fill(cluster: Cluster, node: str) -> dict[str, float]:
    """How full the node is by requests, per resource, in percent of its allocatable."""
    allocatable, used = cluster.nodes[node].allocatable, cluster.used.get(node, {})
    return {r: 100.0 * used.get(r, 0) / allocatable[r] for r in FILL_RESOURCES if allocatable.get(r)}
