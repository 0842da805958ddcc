"""A plan being made: the cluster as the moves so far leave it, the per-run caps and the nodes being emptied.

A move is checked with the pod still on its node, as its Reservation will be scheduled (the pod leaves only
once the room is held), and then applied: the pod leaves its node and takes the room on the target, so the
next move sees both.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from shared.api.selectors import matches_selector_dict
from shared.fit.check import Fit
from shared.fit.cluster import Cluster
from shared.fit.pod_rules import term_selects
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
class RecentMove:
    """A move of the last minutes: a pod of `owner` ("Kind/name") left `source` for `target`."""

    owner: str
    source: str
    target: str


@dataclass(frozen=True)
class Move:
    pod: str
    owner: str | None
    source: str
    target: str
    why: str
    wave: int = 0  # moves of one wave may run at once; a wave starts once the one before it has ended


@dataclass
class Planning:
    cluster: Cluster
    candidates: Mapping[str, Candidate]
    caps: Caps = Caps()
    schedulers: frozenset[str] | None = None  # the schedulers that honour Reservations, when jobs use them
    recent: tuple[RecentMove, ...] = ()  # moves no plan may undo
    moves: list[Move] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # pod -> why it stays
    emptying: set[str] = field(default_factory=set)
    views: dict[str, PodView] = field(default_factory=dict)  # where each pod is now
    _from_node: Counter[str] = field(default_factory=Counter)
    _in_namespace: Counter[str] = field(default_factory=Counter)
    _wave: int = 0
    _freed: dict[str, dict[str, int]] = field(default_factory=dict)  # room the wave's departures free
    _wave_pods: list[PodView] = field(default_factory=list)  # the pods the wave moves

    @classmethod
    def of(
        cls,
        cluster: Cluster,
        candidates: Iterable[Candidate],
        *,
        caps: Caps = Caps(),
        schedulers: frozenset[str] | None = None,
        recent: Iterable[RecentMove] = (),
    ) -> Planning:
        found = {c.key: c for c in candidates}
        planning = cls(cluster, found, caps, schedulers, tuple(recent))
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
        if any(r.owner == pod.owner and r.target == view.node for r in self.recent):
            return f"a pod of {pod.owner} was moved onto {view.node} recently: no plan undoes it"
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
        undoing = False
        for target in targets:
            if target == view.node or target in self.emptying:
                continue
            node = self.cluster.nodes[target]
            if now.fits(node) and (after is None or after.fits(node)):
                if not self._undoes(pod, target):
                    return self._apply(pod, target, why=why)
                undoing = True
        self.skipped[pod.key] = (
            f"it fits only where a recent move of {pod.owner} came from" if undoing else "no node it fits"
        )
        return None

    def _undoes(self, pod: Candidate, target: str) -> bool:
        """Whether moving the pod to `target` takes a pod of its workload back where a recent move took one
        from."""
        return any(r.owner == pod.owner and r.source == target for r in self.recent)

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
        wave = self._wave_of(view, target)
        self.cluster.remove(view)
        self.views[pod.key] = self.cluster.place(view, target)
        self._from_node[source] += 1
        self._in_namespace[view.namespace] += 1
        freed = self._freed.setdefault(source, {})
        for name, value in view.requests.items():
            freed[name] = freed.get(name, 0) + value
        move = Move(pod.key, pod.owner, source, target, why, wave)
        self.moves.append(move)
        return move

    def _wave_of(self, view: PodView, target: str) -> int:
        """The wave a move joins: the current one, unless it needs room a move of that wave frees (a chain:
        it must wait for that move to end), or the order in which the wave's replacements land could
        matter to it: its own spread or affinity terms select a pod the wave moves, or theirs select it.
        Moves of one wave may then land in any order."""
        if self.moves and (self._needs_freed(view, target) or self._coupled(view)):
            self._wave += 1
            self._freed = {}
            self._wave_pods = []
        self._wave_pods.append(view)
        return self._wave

    def _coupled(self, view: PodView) -> bool:
        return any(
            _selects(view, other, self.cluster) or _selects(other, view, self.cluster)
            for other in self._wave_pods
        )

    def _needs_freed(self, view: PodView, target: str) -> bool:
        freed = self._freed.get(target)
        if not freed:
            return False
        allocatable, used = self.cluster.nodes[target].allocatable, self.cluster.used.get(target, {})
        return any(
            want > 0 and want > allocatable.get(name, 0) - used.get(name, 0) - freed.get(name, 0)
            for name, want in view.requests.items()
        )

    def waves(self) -> list[list[Move]]:
        """The moves by wave, in order."""
        found: dict[int, list[Move]] = {}
        for move in self.moves:
            found.setdefault(move.wave, []).append(move)
        return [found[w] for w in sorted(found)]


def fill(cluster: Cluster, node: str) -> dict[str, float]:
    """How full the node is by requests, per resource, in percent of its allocatable."""
    allocatable, used = cluster.nodes[node].allocatable, cluster.used.get(node, {})
    return {r: 100.0 * used.get(r, 0) / allocatable[r] for r in FILL_RESOURCES if allocatable.get(r)}


def _selects(pod: PodView, other: PodView, cluster: Cluster) -> bool:
    """Whether one of `pod`'s spread or inter-pod affinity terms counts `other`."""
    spread = any(
        other.namespace == pod.namespace and matches_selector_dict(c.selector, other.labels)
        for c in pod.spread
    )
    return spread or any(term_selects(t, other, cluster) for t in (*pod.affinity, *pod.anti_affinity))
