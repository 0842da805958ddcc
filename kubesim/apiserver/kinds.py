"""The kinds kubesim serves built in, one entry each: its resource (names, scope, subresources, field
selectors, columns), its admission (`kubesim.apiserver.admission`: defaulting and validation on write) and
its printer (`kubesim.apiserver.printers`). A new kind is an entry here, plus its own hooks. Its OpenAPI
document is data (`openapi_v3/`), and a protobuf body's wire schema is keyed by its kind
(`kubesim.apiserver.protobuf`): a body is decoded before the resource it is for is known."""

from __future__ import annotations

from collections.abc import Callable

from kubesim.apiserver import admission, printers, storage_printers
from kubesim.apiserver.resources import AGE, COMMON_FIELDS, Column, Registry, ResourceType, Write


def registry() -> Registry:
    """The resources of a new API server: every built-in kind."""
    return Registry(builtin())


def builtin() -> list[ResourceType]:
    """Every built-in kind, each with its admission and its printer where it has them."""
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
            admit=admission.namespace,
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
            admit=admission.node,
            printer=printers.NODE,
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
            admit=admission.pod,
            printer=printers.POD,
        ),
        ResourceType(
            "", "v1", "Event", "events", True, short_names=["ev"], fields=event_fields, printer=printers.EVENT
        ),
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
            admit=admission.service,
            printer=printers.SERVICE,
        ),
        ResourceType("", "v1", "Secret", "secrets", True, admit=admission.secret),
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
            admit=admission.workload,
            printer=printers.DEPLOYMENT,
        ),
        _replicated("", "ReplicationController", "replicationcontrollers", short="rc"),
        _replicated("apps", "ReplicaSet", "replicasets", short="rs", admit=admission.workload),
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
            admit=admission.workload,
            printer=printers.STATEFULSET,
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
            admit=admission.workload,
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
            admit=admission.autoscaler,
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
            ResourceType(
                "admissionregistration.k8s.io",
                "v1",
                kind,
                kind.lower() + "s",
                False,
                admit=admission.webhook_configuration,
            )
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
            admit=admission.batch_kind,
            printer=printers.JOB,
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
            admit=admission.batch_kind,
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
            admit=admission.storage_kind,
            printer=storage_printers.CLAIM,
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
            admit=admission.storage_kind,
            printer=storage_printers.VOLUME,
        ),
        ResourceType(
            "storage.k8s.io",
            "v1",
            "StorageClass",
            "storageclasses",
            False,
            short_names=["sc"],
            admit=admission.storage_kind,
            printer=storage_printers.CLASS,
        ),
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


def _replicated(
    group: str, kind: str, plural: str, *, short: str, admit: Callable[[Write], None] | None = None
) -> ResourceType:
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
        admit=admit,
        columns=[
            Column("Desired", ".spec.replicas", "integer"),
            Column("Current", ".status.replicas", "integer"),
            Column("Ready", ".status.readyReplicas", "integer"),
            AGE,
        ],
    )
