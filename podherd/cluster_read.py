"""The cluster as a plan reads it, once: nodes, pods, the room Reservations hold, the volumes bound claims
use and the namespaces' labels (for terms that choose namespaces by label)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from podherd.client import kube_client, kube_get
from podherd.errors import CliError
from shared.api import paths
from shared.config.model import PodherdConfig
from shared.fit.cluster import Cluster
from shared.rebalance.candidates import Candidate
from shared.rebalance.planning import RecentMove
from shared.rebalance.snapshot import OPTIONAL_LISTS, WITHOUT_JOBS, recent_moves, snapshot_of


@dataclass
class Snapshot:
    cluster: Cluster
    candidates: list[Candidate]  # every pod bound to a node
    pods: list[dict[str, Any]]  # every pod, as the API returned it
    unread: list[str]  # what could not be read, and so is not checked: why, each
    recent: list[RecentMove]  # the moves since `moved_since`, which no plan may undo


def read(config: PodherdConfig, *, moved_since: str = "") -> Snapshot:
    """The cluster now: nodes, pods, the room Reservations hold, bound volumes, namespaces' labels."""
    unread: list[str] = []
    with kube_client(config) as kube:
        nodes = kube_get(kube, paths.NODES).get("items") or []
        pod_objs = kube_get(kube, paths.PODS).get("items") or []
        optional = {
            name: _items(kube, path, unread, lacking=lacking)
            for name, (path, lacking) in OPTIONAL_LISTS.items()
        }
        jobs = _items(kube, paths.JOBS, unread, lacking=WITHOUT_JOBS)
    cluster, candidates = snapshot_of(nodes=nodes, pods=pod_objs, moved_since=moved_since, **optional)
    return Snapshot(cluster, candidates, pod_objs, unread, recent_moves(jobs, since=moved_since))


def _items(kube: Any, path: str, unread: list[str], *, lacking: str) -> list[dict[str, Any]]:
    """A list the plan can do without: what it could not read goes to `unread`, with what it then lacks."""
    try:
        return list(kube_get(kube, path).get("items") or [])
    except CliError as exc:
        unread.append(f"{exc}: {lacking}")
        return []
