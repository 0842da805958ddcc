"""The cluster as a plan reads it, once: nodes, pods, the room Reservations hold, the volumes bound claims
use and the namespaces' labels (for terms that choose namespaces by label)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from podherd.client import kube_client, kube_get
from podherd.errors import CliError
from shared.api import paths
from shared.config import PodherdConfig
from shared.fit.cluster import Cluster, Held
from shared.fit.views import VolumeView, node_view, pod_view, volume_view
from shared.quantity import milli
from shared.rebalance.candidates import Candidate, candidate

RESERVATIONS = "/apis/scheduling.koordinator.sh/v1alpha1/reservations"


@dataclass
class Snapshot:
    cluster: Cluster
    candidates: list[Candidate]  # every pod bound to a node
    pods: list[dict[str, Any]]  # every pod, as the API returned it
    unread: list[str]  # what could not be read, and so is not checked: why, each


def read(config: PodherdConfig, *, moved_since: str = "") -> Snapshot:
    """The cluster now: nodes, pods, the room Reservations hold, bound volumes, namespaces' labels."""
    unread: list[str] = []
    with kube_client(config) as kube:
        nodes = [node_view(n) for n in kube_get(kube, paths.NODES).get("items") or []]
        pod_objs = kube_get(kube, paths.PODS).get("items") or []
        reservations = _items(kube, RESERVATIONS, unread, lacking="room Reservations hold is not counted")
        claims = _items(
            kube, "/api/v1/persistentvolumeclaims", unread, lacking="volume zones are not checked"
        )
        found = _items(kube, "/api/v1/persistentvolumes", unread, lacking="volume zones are not checked")
        volumes = {v["metadata"]["name"]: v for v in found}
        namespaces = _items(kube, "/api/v1/namespaces", unread, lacking="namespace selectors match nothing")
    bound: dict[str, VolumeView] = {}
    for claim in claims:
        name = (claim.get("spec") or {}).get("volumeName")
        if name in volumes:
            bound[f"{claim['metadata']['namespace']}/{claim['metadata']['name']}"] = volume_view(
                volumes[name]
            )
    cluster = Cluster.of(
        nodes,
        [pod_view(p) for p in pod_objs],
        held=[h for h in map(held_room, reservations) if h is not None],
        volumes=bound,
        namespace_labels={n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in namespaces},
    )
    placed = [p for p in pod_objs if (p.get("spec") or {}).get("nodeName")]
    return Snapshot(cluster, [candidate(p, moved_since=moved_since) for p in placed], pod_objs, unread)


def _items(kube: Any, path: str, unread: list[str], *, lacking: str) -> list[dict[str, Any]]:
    """A list the plan can do without (a cluster without Koordinator has no Reservations; a user may not
    read PersistentVolumes): what it could not read goes to `unread`, with what the plan then lacks."""
    try:
        return list(kube_get(kube, path).get("items") or [])
    except CliError as exc:
        unread.append(f"{exc}: {lacking}")
        return []


def held_room(obj: Mapping[str, Any]) -> Held | None:
    """An Available Reservation's room still unallocated, on its node, for the pods it names."""
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
