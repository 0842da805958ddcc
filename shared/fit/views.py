"""The parts of nodes, pods and volumes that kube-scheduler's filters read, taken once from the API's JSON.

A view is read once per snapshot, so a filter compares strings and integers, never walks JSON again.
Resources are in milli-units (`shared.api.quantity`); `pods` is the pod count a node allows, in milli-pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.api.quantity import milli, pod_requests

Obj = Mapping[str, Any]
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
ENDED = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class NodeView:
    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, int]
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False


@dataclass(frozen=True)
class AffinityTerm:
    """A required pod (anti-)affinity term, its namespaces resolved: None means every namespace."""

    selector: Obj | None
    namespaces: frozenset[str] | None
    topology_key: str
    namespace_selector: Obj | None = None


@dataclass(frozen=True)
class SpreadConstraint:
    """A `DoNotSchedule` topology spread constraint, its `matchLabelKeys` folded into its selector."""

    topology_key: str
    max_skew: int
    selector: Obj | None
    min_domains: int = 1
    honor_affinity: bool = True  # nodeAffinityPolicy
    honor_taints: bool = False  # nodeTaintsPolicy


@dataclass(frozen=True)
class PodView:
    namespace: str
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    node: str | None = None
    requests: Mapping[str, int] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    node_terms: tuple[Obj, ...] | None = None  # required node affinity's nodeSelectorTerms
    tolerations: tuple[Obj, ...] = ()
    affinity: tuple[AffinityTerm, ...] = ()
    anti_affinity: tuple[AffinityTerm, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()
    claims: tuple[str, ...] = ()  # the PersistentVolumeClaims it mounts, by name
    terminating: bool = False
    phase: str = "Running"

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class VolumeView:
    """A bound claim's PersistentVolume: its required node affinity and its zone labels."""

    node_terms: tuple[Obj, ...] | None = None
    zones: Mapping[str, frozenset[str]] = field(default_factory=dict)  # zone/region label -> values


def node_view(obj: Obj) -> NodeView:
    """A node as the scheduler sees it: its taints, with those the node lifecycle controller adds for a
    cordoned node and for one whose Ready condition is False (not-ready) or Unknown (unreachable)."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    taints = [
        Taint(t.get("key", ""), t.get("value", "") or "", t.get("effect", ""))
        for t in spec.get("taints") or []
    ]
    have = {t.key for t in taints}
    if spec.get("unschedulable") and UNSCHEDULABLE_TAINT not in have:
        taints.append(Taint(UNSCHEDULABLE_TAINT, "", "NoSchedule"))
    ready = next(
        (c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"), "True"
    )
    lifecycle = {"False": NOT_READY_TAINT, "Unknown": UNREACHABLE_TAINT}.get(str(ready))
    if lifecycle is not None and lifecycle not in have:
        taints.append(Taint(lifecycle, "", "NoSchedule"))
    values = status.get("allocatable") or status.get("capacity") or {}
    return NodeView(
        name=str(meta.get("name") or ""),
        labels=dict(meta.get("labels") or {}),
        allocatable={k: milli(v) for k, v in values.items()},
        taints=tuple(taints),
        unschedulable=bool(spec.get("unschedulable")),
    )


def pod_view(obj: Obj) -> PodView:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    namespace, labels = str(meta.get("namespace") or "default"), dict(meta.get("labels") or {})
    affinity = spec.get("affinity") or {}
    required_nodes = ((affinity.get("nodeAffinity") or {}).get(REQUIRED) or {}).get("nodeSelectorTerms")
    return PodView(
        namespace=namespace,
        name=str(meta.get("name") or ""),
        labels=labels,
        node=spec.get("nodeName") or None,
        requests=pod_requests(dict(spec)),
        node_selector=dict(spec.get("nodeSelector") or {}),
        node_terms=tuple(required_nodes) if required_nodes is not None else None,
        tolerations=tuple(spec.get("tolerations") or ()),
        affinity=_terms(affinity.get("podAffinity"), namespace),
        anti_affinity=_terms(affinity.get("podAntiAffinity"), namespace),
        spread=tuple(_spread(c, labels) for c in spec.get("topologySpreadConstraints") or () if _hard(c)),
        claims=tuple(
            v["persistentVolumeClaim"]["claimName"]
            for v in spec.get("volumes") or ()
            if (v.get("persistentVolumeClaim") or {}).get("claimName")
        ),
        terminating=bool(meta.get("deletionTimestamp")),
        phase=str(status.get("phase") or "Pending"),
    )


def volume_view(obj: Obj) -> VolumeView:
    """A PersistentVolume's node affinity and the zone and region labels VolumeZone reads."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    required = (((obj.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}).get(
        "nodeSelectorTerms"
    )
    zones = {key: frozenset(value.split("__")) for key, value in labels.items() if key in ZONE_LABELS}
    return VolumeView(node_terms=tuple(required) if required else None, zones=zones)


ZONE_LABELS = frozenset(
    {
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
    }
)


def _hard(constraint: Obj) -> bool:
    return bool(constraint.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule")


def _terms(block: Obj | None, namespace: str) -> tuple[AffinityTerm, ...]:
    """A pod's required terms. A term names its namespaces, or selects them (an empty namespaceSelector:
    all), or, naming neither, means the pod's own namespace."""
    out = []
    for term in (block or {}).get(REQUIRED) or ():
        named, chooser = term.get("namespaces") or [], term.get("namespaceSelector")
        if chooser is not None and not chooser:
            namespaces: frozenset[str] | None = None
        else:
            namespaces = frozenset(named) if named or chooser else frozenset([namespace])
        out.append(
            AffinityTerm(
                selector=term.get("labelSelector"),
                namespaces=namespaces,
                topology_key=str(term.get("topologyKey") or ""),
                namespace_selector=chooser or None,
            )
        )
    return tuple(out)


def _spread(constraint: Obj, labels: Mapping[str, str]) -> SpreadConstraint:
    selector = constraint.get("labelSelector")
    keys = [k for k in constraint.get("matchLabelKeys") or () if k in labels]
    if selector is not None and keys:
        extra = {k: labels[k] for k in keys}
        selector = {**selector, "matchLabels": {**(selector.get("matchLabels") or {}), **extra}}
    return SpreadConstraint(
        topology_key=str(constraint.get("topologyKey") or ""),
        max_skew=int(constraint.get("maxSkew") or 1),
        selector=selector,
        min_domains=int(constraint.get("minDomains") or 1),
        honor_affinity=constraint.get("nodeAffinityPolicy", "Honor") == "Honor",
        honor_taints=constraint.get("nodeTaintsPolicy", "Ignore") == "Honor",
    )
