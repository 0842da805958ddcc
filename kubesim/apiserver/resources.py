"""The resources kubesim serves: built-ins, plus any custom resource whose CRD is applied."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kubesim.apiserver.schema import CrdSchema

COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True)
class Column:
    name: str
    json_path: str
    type: str = "string"
    priority: int = 0
    description: str = ""


@dataclass(frozen=True)
class ScalePaths:
    """A CRD's `subresources.scale`: where its objects keep their replicas, the replicas observed and the
    selector (as `.spec.replicas`, split at the dots)."""

    spec: tuple[str, ...]
    status: tuple[str, ...]
    selector: tuple[str, ...] | None

    @classmethod
    def of(cls, scale: dict[str, Any]) -> ScalePaths:
        selector = scale.get("labelSelectorPath")
        return cls(
            _path(scale.get("specReplicasPath") or ".spec.replicas"),
            _path(scale.get("statusReplicasPath") or ".status.replicas"),
            _path(selector) if selector else None,
        )


def _path(text: str) -> tuple[str, ...]:
    return tuple(part for part in text.split(".") if part)


@dataclass
class ResourceType:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    singular: str = ""
    short_names: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    subresources: frozenset[str] = frozenset()
    fields: frozenset[str] = COMMON_FIELDS
    columns: list[Column] = field(default_factory=list)
    # Whether `status` is a subresource (main-resource writes ignore status; /status writes only status).
    status_subresource: bool = False
    crd: bool = False
    verbs: tuple[str, ...] = tuple(VERBS)  # what discovery lists (the access reviews: create only)
    # A custom resource's schema, applied on every write through the API (prune, default, validate).
    schema: CrdSchema | None = None
    # A custom resource's scale subresource: where its replicas, observed replicas and selector are.
    scale_paths: ScalePaths | None = None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.plural)

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def discovery(self) -> list[dict[str, Any]]:
        entries = [
            {
                "name": self.plural,
                "singularName": self.singular or self.kind.lower(),
                "namespaced": self.namespaced,
                "kind": self.kind,
                "verbs": list(self.verbs),
                **({"shortNames": self.short_names} if self.short_names else {}),
                **({"categories": self.categories} if self.categories else {}),
            }
        ]
        for sub in sorted(self.subresources):
            entry: dict[str, Any] = {
                "name": f"{self.plural}/{sub}",
                "singularName": "",
                "namespaced": self.namespaced,
            }
            if sub == "eviction":
                entry.update(kind="Eviction", group="policy", version="v1", verbs=["create"])
            elif sub == "binding":
                entry.update(kind="Binding", verbs=["create"])
            elif sub == "log":
                entry.update(kind="Pod", verbs=["get"])
            elif sub == "token":
                entry.update(
                    kind="TokenRequest", group="authentication.k8s.io", version="v1", verbs=["create"]
                )
            elif sub == "scale":
                entry.update(
                    kind="Scale", group="autoscaling", version="v1", verbs=["get", "patch", "update"]
                )
            else:
                entry.update(kind=self.kind, verbs=["get", "patch", "update"])
            entries.append(entry)
        return entries


AGE = Column("Age", ".metadata.creationTimestamp", "date")


def _builtin() -> list[ResourceType]:
    pod_fields = COMMON_FIELDS | {
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    }
    event_fields = (
        COMMON_FIELDS
        | {
            f"involvedObject.{f}"
            for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
        }
        | {"reason", "reportingComponent", "source", "type"}
    )
    return [
        ResourceType(
            "",
            "v1",
            "Namespace",
            "namespaces",
            False,
            short_names=["ns"],
            subresources=frozenset({"status", "finalize"}),
            status_subresource=True,
            fields=COMMON_FIELDS | {"status.phase"},
            columns=[Column("Status", ".status.phase"), AGE],
        ),
        ResourceType(
            "",
            "v1",
            "Node",
            "nodes",
            False,
            short_names=["no"],
            subresources=frozenset({"status"}),
            status_subresource=True,
            fields=COMMON_FIELDS | {"spec.unschedulable"},
        ),
        ResourceType(
            "",
            "v1",
            "Pod",
            "pods",
            True,
            short_names=["po"],
            categories=["all"],
            subresources=frozenset({"status", "eviction", "binding", "log"}),
            status_subresource=True,
            fields=pod_fields,
        ),
        ResourceType("", "v1", "Event", "events", True, short_names=["ev"], fields=event_fields),
        # The same objects, converted (kubesim.apiserver.event_view); never stored under this type.
        ResourceType("events.k8s.io", "v1", "Event", "events", True, short_names=["ev"], fields=event_fields),
        ResourceType("", "v1", "ConfigMap", "configmaps", True, short_names=["cm"]),
        ResourceType(
            "",
            "v1",
            "ServiceAccount",
            "serviceaccounts",
            True,
            short_names=["sa"],
            subresources=frozenset({"token"}),
        ),
        ResourceType(
            "authentication.k8s.io", "v1", "SelfSubjectReview", "selfsubjectreviews", False, verbs=("create",)
        ),
        ResourceType("authentication.k8s.io", "v1", "TokenReview", "tokenreviews", False, verbs=("create",)),
        *(
            ResourceType(
                "authorization.k8s.io", "v1", kind, kind.lower() + "s", namespaced, verbs=("create",)
            )
            for kind, namespaced in (
                ("SelfSubjectAccessReview", False),
                ("SelfSubjectRulesReview", False),
                ("SubjectAccessReview", False),
                ("LocalSubjectAccessReview", True),
            )
        ),
        ResourceType(
            "",
            "v1",
            "Service",
            "services",
            True,
            short_names=["svc"],
            categories=["all"],
            subresources=frozenset({"status"}),
            status_subresource=True,
        ),
        ResourceType("", "v1", "Secret", "secrets", True),
        # Stored and listed, as the API server does; nothing enforces them (kubesim has no pod network).
        ResourceType(
            "networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", True, short_names=["netpol"]
        ),
        ResourceType(
            "apps",
            "v1",
            "Deployment",
            "deployments",
            True,
            short_names=["deploy"],
            categories=["all"],
            subresources=frozenset({"status", "scale"}),
            status_subresource=True,
            columns=[
                Column("Ready", ".status.readyReplicas", "integer"),
                Column("Up-to-date", ".status.updatedReplicas", "integer"),
                Column("Available", ".status.availableReplicas", "integer"),
                AGE,
            ],
        ),
        _replicated("", "ReplicationController", "replicationcontrollers", short="rc"),
        _replicated("apps", "ReplicaSet", "replicasets", short="rs"),
        ResourceType(
            "apps",
            "v1",
            "StatefulSet",
            "statefulsets",
            True,
            short_names=["sts"],
            categories=["all"],
            subresources=frozenset({"status", "scale"}),
            status_subresource=True,
            columns=[Column("Ready", ".status.readyReplicas", "integer"), AGE],
        ),
        ResourceType(
            "apps",
            "v1",
            "DaemonSet",
            "daemonsets",
            True,
            short_names=["ds"],
            categories=["all"],
            subresources=frozenset({"status"}),
            status_subresource=True,
        ),
        ResourceType(
            "autoscaling",
            "v2",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
            True,
            short_names=["hpa"],
            categories=["all"],
            subresources=frozenset({"status"}),
            status_subresource=True,
            columns=[
                Column("Reference", ".spec.scaleTargetRef.name"),
                Column("MinPods", ".spec.minReplicas", "integer"),
                Column("MaxPods", ".spec.maxReplicas", "integer"),
                Column("Replicas", ".status.currentReplicas", "integer"),
                AGE,
            ],
        ),
        ResourceType(
            "policy",
            "v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            True,
            short_names=["pdb"],
            subresources=frozenset({"status"}),
            status_subresource=True,
            columns=[
                Column("Min Available", ".spec.minAvailable"),
                Column("Max Unavailable", ".spec.maxUnavailable"),
                Column("Allowed Disruptions", ".status.disruptionsAllowed", "integer"),
                AGE,
            ],
        ),
        *(
            ResourceType("admissionregistration.k8s.io", "v1", kind, kind.lower() + "s", False)
            for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
        ),
        ResourceType(
            "coordination.k8s.io",
            "v1",
            "Lease",
            "leases",
            True,
            columns=[Column("Holder", ".spec.holderIdentity"), AGE],
        ),
        ResourceType(
            "scheduling.k8s.io",
            "v1",
            "PriorityClass",
            "priorityclasses",
            False,
            short_names=["pc"],
            columns=[Column("Value", ".value", "integer"), AGE],
        ),
        ResourceType("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False),
        ResourceType("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False),
        ResourceType("rbac.authorization.k8s.io", "v1", "Role", "roles", True),
        ResourceType("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True),
        ResourceType(
            "batch",
            "v1",
            "Job",
            "jobs",
            True,
            categories=["all"],
            subresources=frozenset({"status"}),
            status_subresource=True,
        ),
        ResourceType(
            "batch",
            "v1",
            "CronJob",
            "cronjobs",
            True,
            short_names=["cj"],
            categories=["all"],
            subresources=frozenset({"status"}),
            status_subresource=True,
        ),
        ResourceType(
            "",
            "v1",
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            True,
            short_names=["pvc"],
            subresources=frozenset({"status"}),
            status_subresource=True,
        ),
        ResourceType(
            "",
            "v1",
            "PersistentVolume",
            "persistentvolumes",
            False,
            short_names=["pv"],
            subresources=frozenset({"status"}),
            status_subresource=True,
        ),
        ResourceType("storage.k8s.io", "v1", "StorageClass", "storageclasses", False, short_names=["sc"]),
        ResourceType(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            False,
            short_names=["crd", "crds"],
            subresources=frozenset({"status"}),
            status_subresource=True,
            columns=[Column("Created At", ".metadata.creationTimestamp", "date")],
        ),
    ]


def _replicated(group: str, kind: str, plural: str, *, short: str) -> ResourceType:
    """A kind that keeps a number of copies of a pod template (a ReplicaSet, a ReplicationController)."""
    return ResourceType(
        group,
        "v1",
        kind,
        plural,
        True,
        short_names=[short],
        categories=["all"],
        subresources=frozenset({"status", "scale"}),
        status_subresource=True,
        columns=[
            Column("Desired", ".spec.replicas", "integer"),
            Column("Current", ".status.replicas", "integer"),
            Column("Ready", ".status.readyReplicas", "integer"),
            AGE,
        ],
    )


class Registry:
    def __init__(self) -> None:
        self._by_path: dict[tuple[str, str, str], ResourceType] = {}
        for rt in _builtin():
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        self._by_path[(rt.group, rt.version, rt.plural)] = rt

    def remove_group_resource(self, group: str, plural: str) -> None:
        for key in [k for k in self._by_path if k[0] == group and k[2] == plural]:
            del self._by_path[key]

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def core(self, plural: str) -> ResourceType:
        """A built-in resource of the core group (`namespaces`, `pods`, ...): always registered."""
        return self._by_path[("", "v1", plural)]

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        for rt in self._by_path.values():
            if rt.group == group and rt.version == version and rt.kind == kind:
                return rt
        return None

    def all(self) -> Iterable[ResourceType]:
        return list(self._by_path.values())

    def groups(self) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        for rt in self._by_path.values():
            if rt.group:
                versions = groups.setdefault(rt.group, [])
                if rt.version not in versions:
                    versions.append(rt.version)
        return groups
