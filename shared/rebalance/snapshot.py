"""The cluster a plan is made on, from the API's lists: nodes, pods, the room Reservations hold, the volumes
bound claims use, namespaces' labels (for terms that choose namespaces by label)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from shared.api import paths
from shared.api.names import ANNOTATION_SOURCE_NODE, ANNOTATION_WORKLOAD
from shared.api.quantity import milli
from shared.api.soft_eviction import metav1_time
from shared.config.model import MigrationControllerArgs
from shared.core.durations import parse_duration
from shared.fit.cluster import Cluster, Held
from shared.fit.views import VolumeView, node_view, pod_view, volume_view
from shared.rebalance.candidates import Candidate, candidate
from shared.rebalance.planning import RecentMove

Obj = Mapping[str, Any]

# The lists a plan can do without, by `snapshot_of`'s parameter: where each is, and what a plan lacks
# without it (a cluster without Koordinator has no Reservations; a user may not list volumes).
OPTIONAL_LISTS: Mapping[str, tuple[str, str]] = {
    "reservations": (paths.RESERVATIONS, "room Reservations hold is not counted"),
    "claims": (paths.CLAIMS, "volume zones are not checked"),
    "volumes": (paths.VOLUMES, "volume zones are not checked"),
    "namespaces": (paths.NAMESPACES, "namespace selectors match nothing"),
}
WITHOUT_JOBS = "recent moves are not known, so a plan may undo one"


def window_start(recent: str, *, now: datetime | None = None) -> str:
    """When the window of moves no plan undoes began, `recent` (a duration) ago, as the API writes times."""
    return metav1_time((now or datetime.now(UTC)) - timedelta(seconds=parse_duration(recent)))


def reserving_schedulers(args: MigrationControllerArgs) -> frozenset[str] | None:
    """The schedulers whose pods a plan may move: where jobs reserve room first, only those that honour
    Reservations (`schedulerNames`); else any (None)."""
    return frozenset(args.scheduler_names) if args.default_job_mode == "ReservationFirst" else None


def snapshot_of(
    *,
    nodes: Sequence[Obj],
    pods: Sequence[Obj],
    reservations: Sequence[Obj] = (),
    claims: Sequence[Obj] = (),
    volumes: Sequence[Obj] = (),
    namespaces: Sequence[Obj] = (),
    moved_since: str = "",
) -> tuple[Cluster, list[Candidate]]:
    """The cluster, and every pod bound to a node as a plan sees it (`moved_since`: `candidate`'s)."""
    by_name = {v["metadata"]["name"]: v for v in volumes}
    bound: dict[str, VolumeView] = {}
    for claim in claims:
        name = (claim.get("spec") or {}).get("volumeName")
        if name in by_name:
            meta = claim["metadata"]
            bound[f"{meta['namespace']}/{meta['name']}"] = volume_view(by_name[name])
    cluster = Cluster.of(
        [node_view(n) for n in nodes],
        [pod_view(p) for p in pods],
        held=[h for h in map(held_room, reservations) if h is not None],
        volumes=bound,
        namespace_labels={n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in namespaces},
    )
    placed = [p for p in pods if (p.get("spec") or {}).get("nodeName")]
    return cluster, [candidate(p, moved_since=moved_since) for p in placed]


def held_room(obj: Obj) -> Held | None:
    """An Available Reservation's room still unallocated, on its node, for the pods it names (as owner
    objects: a Reservation owned by a workload holds room no plan may count on)."""
    status = obj.get("status") or {}
    if status.get("phase") != "Available" or not status.get("nodeName"):
        return None
    allocatable = {k: milli(v) for k, v in (status.get("allocatable") or {}).items()}
    allocated = {k: milli(v) for k, v in (status.get("allocated") or {}).items()}
    room = {k: max(0, v - allocated.get(k, 0)) for k, v in allocatable.items() if k != "pods"}
    owners = frozenset(
        f"{ref['object'].get('namespace')}/{ref['object'].get('name')}"
        for ref in (obj.get("spec") or {}).get("owners") or ()
        if ref.get("object")
    )
    return Held(obj["metadata"]["name"], str(status["nodeName"]), room, owners)


def recent_moves(jobs: Sequence[Obj], *, since: str) -> list[RecentMove]:
    """The moves jobs made that began at `since` or after and succeeded: each pod's controller, the node
    it left (recorded when the job was made) and the node its replacement took."""
    found = []
    for job in jobs:
        meta, status = job.get("metadata") or {}, job.get("status") or {}
        annotations = meta.get("annotations") or {}
        source, owner = annotations.get(ANNOTATION_SOURCE_NODE), annotations.get(ANNOTATION_WORKLOAD)
        target = status.get("nodeName")
        began = str(meta.get("creationTimestamp") or "")
        if status.get("phase") == "Succeeded" and source and owner and target and began >= since:
            found.append(RecentMove(owner=str(owner), source=str(source), target=str(target)))
    return found
