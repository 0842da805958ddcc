"""The kinds kubesim serves built in, one entry each: its resource (names, scope, subresources, field
selectors, columns), its admission (`kubesim.apiserver.admission`: defaulting and validation on write), its
printer (`kubesim.apiserver.printers`) and the message a protobuf body of it holds
(`kubesim.apiserver.protobuf`). A new kind is an entry here, plus its own hooks; its OpenAPI document is
data (`openapi_v3/`, kube-apiserver's own)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kubesim.apiserver import admission, printers, protobuf, storage_printers
from kubesim.apiserver.resources import (
    AGE,
    COMMON_FIELDS,
    VERBS,
    Column,
    Printer,
    Registry,
    ResourceType,
    Schema,
    Write,
)

POD_FIELDS = COMMON_FIELDS | {
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
}
EVENT_FIELDS = (
    COMMON_FIELDS
    | {
        f"involvedObject.{f}"
        for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
    }
    | {"reason", "reportingComponent", "source", "type"}
)
REPLICAS_COLUMNS = [
    Column("Desired", ".spec.replicas", "integer"),
    Column("Current", ".status.replicas", "integer"),
    Column("Ready", ".status.readyReplicas", "integer"),
    AGE,
]
REVIEW = ("create",)  # the access reviews: created, never kept


@dataclass(frozen=True)
class Kind:
    """One kind as kubesim serves it (`api_version` as the objects spell it)."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    in_all: bool = False  # in the `all` category: `kubectl get all` lists it
    # Its subresources beside `status`; `status` makes status a subresource of its own.
    status: bool = False
    subresources: frozenset[str] = frozenset()
    fields: frozenset[str] = COMMON_FIELDS
    columns: tuple[Column, ...] = ()
    verbs: tuple[str, ...] = tuple(VERBS)
    admit: Callable[[Write], None] | None = None
    printer: Printer | None = None
    protobuf: Schema | None = None

    def resource(self) -> ResourceType:
        group, _, version = self.api_version.rpartition("/")
        return ResourceType(
            group,
            version,
            self.kind,
            self.plural,
            self.namespaced,
            short_names=list(self.short_names),
            categories=["all"] if self.in_all else [],
            subresources=self.subresources | ({"status"} if self.status else set()),
            status_subresource=self.status,
            fields=self.fields,
            columns=list(self.columns),
            verbs=self.verbs,
            admit=self.admit,
            printer=self.printer,
            protobuf=self.protobuf,
        )


SCALE = frozenset({"scale"})
BUILTIN = (
    Kind("v1", "Namespace", "namespaces", namespaced=False, short_names=("ns",), status=True,
         subresources=frozenset({"finalize"}), fields=COMMON_FIELDS | {"status.phase"},
         columns=(Column("Status", ".status.phase"), AGE), admit=admission.namespace,
         protobuf=protobuf.NAMESPACE),
    Kind("v1", "Node", "nodes", namespaced=False, short_names=("no",), status=True,
         fields=COMMON_FIELDS | {"spec.unschedulable"}, admit=admission.node, printer=printers.NODE),
    Kind("v1", "Pod", "pods", short_names=("po",), in_all=True, status=True,
         subresources=frozenset({"eviction", "binding", "log"}), fields=POD_FIELDS, admit=admission.pod,
         printer=printers.POD),
    Kind("v1", "Event", "events", short_names=("ev",), fields=EVENT_FIELDS, printer=printers.EVENT),
    # The same objects, converted (kubesim.apiserver.event_view); never stored under this type.
    Kind("events.k8s.io/v1", "Event", "events", short_names=("ev",), fields=EVENT_FIELDS),
    Kind("v1", "ConfigMap", "configmaps", short_names=("cm",), protobuf=protobuf.CONFIG_MAP),
    Kind("v1", "ServiceAccount", "serviceaccounts", short_names=("sa",), subresources=frozenset({"token"}),
         protobuf=protobuf.SERVICE_ACCOUNT),
    Kind("authentication.k8s.io/v1", "SelfSubjectReview", "selfsubjectreviews", namespaced=False,
         verbs=REVIEW, protobuf=protobuf.SELF_SUBJECT_REVIEW),
    Kind("authentication.k8s.io/v1", "TokenReview", "tokenreviews", namespaced=False, verbs=REVIEW),
    Kind("authorization.k8s.io/v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews", namespaced=False,
         verbs=REVIEW, protobuf=protobuf.SELF_SUBJECT_ACCESS_REVIEW),
    Kind("authorization.k8s.io/v1", "SelfSubjectRulesReview", "selfsubjectrulesreviews", namespaced=False,
         verbs=REVIEW, protobuf=protobuf.SELF_SUBJECT_RULES_REVIEW),
    Kind("authorization.k8s.io/v1", "SubjectAccessReview", "subjectaccessreviews", namespaced=False,
         verbs=REVIEW),
    Kind("authorization.k8s.io/v1", "LocalSubjectAccessReview", "localsubjectaccessreviews", verbs=REVIEW),
    Kind("v1", "Service", "services", short_names=("svc",), in_all=True, status=True, admit=admission.service,
         printer=printers.SERVICE, protobuf=protobuf.SERVICE),
    Kind("v1", "Secret", "secrets", admit=admission.secret, protobuf=protobuf.SECRET),
    # Stored and listed, as the API server does; nothing enforces them (kubesim has no pod network).
    Kind("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies", short_names=("netpol",)),
    Kind("apps/v1", "Deployment", "deployments", short_names=("deploy",), in_all=True, status=True,
         subresources=SCALE, admit=admission.workload, printer=printers.DEPLOYMENT,
         columns=(Column("Ready", ".status.readyReplicas", "integer"),
                  Column("Up-to-date", ".status.updatedReplicas", "integer"),
                  Column("Available", ".status.availableReplicas", "integer"), AGE),
         protobuf=protobuf.DEPLOYMENT),
    Kind("v1", "ReplicationController", "replicationcontrollers", short_names=("rc",), in_all=True,
         status=True, subresources=SCALE, columns=tuple(REPLICAS_COLUMNS)),
    Kind("apps/v1", "ReplicaSet", "replicasets", short_names=("rs",), in_all=True, status=True,
         subresources=SCALE, columns=tuple(REPLICAS_COLUMNS), admit=admission.workload),
    Kind("apps/v1", "StatefulSet", "statefulsets", short_names=("sts",), in_all=True, status=True,
         subresources=SCALE, columns=(Column("Ready", ".status.readyReplicas", "integer"), AGE),
         admit=admission.workload, printer=printers.STATEFULSET),
    Kind("apps/v1", "DaemonSet", "daemonsets", short_names=("ds",), in_all=True, status=True,
         admit=admission.workload),
    Kind("autoscaling/v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", short_names=("hpa",),
         in_all=True, status=True, admit=admission.autoscaler,
         columns=(Column("Reference", ".spec.scaleTargetRef.name"),
                  Column("MinPods", ".spec.minReplicas", "integer"),
                  Column("MaxPods", ".spec.maxReplicas", "integer"),
                  Column("Replicas", ".status.currentReplicas", "integer"), AGE)),
    Kind("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", short_names=("pdb",), status=True,
         columns=(Column("Min Available", ".spec.minAvailable"),
                  Column("Max Unavailable", ".spec.maxUnavailable"),
                  Column("Allowed Disruptions", ".status.disruptionsAllowed", "integer"), AGE),
         protobuf=protobuf.POD_DISRUPTION_BUDGET),
    Kind("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration",
         "validatingwebhookconfigurations", namespaced=False, admit=admission.webhook_configuration),
    Kind("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations",
         namespaced=False, admit=admission.webhook_configuration),
    Kind("coordination.k8s.io/v1", "Lease", "leases",
         columns=(Column("Holder", ".spec.holderIdentity"), AGE)),
    Kind("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", namespaced=False, short_names=("pc",),
         columns=(Column("Value", ".value", "integer"), AGE), protobuf=protobuf.PRIORITY_CLASS),
    Kind("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", namespaced=False,
         protobuf=protobuf.ROLE),
    Kind("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", namespaced=False,
         protobuf=protobuf.BINDING),
    Kind("rbac.authorization.k8s.io/v1", "Role", "roles", protobuf=protobuf.ROLE),
    Kind("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", protobuf=protobuf.BINDING),
    Kind("batch/v1", "Job", "jobs", in_all=True, status=True, admit=admission.batch_kind,
         printer=printers.JOB, protobuf=protobuf.JOB),
    Kind("batch/v1", "CronJob", "cronjobs", short_names=("cj",), in_all=True, status=True,
         admit=admission.batch_kind, protobuf=protobuf.CRON_JOB),
    Kind("v1", "PersistentVolumeClaim", "persistentvolumeclaims", short_names=("pvc",), status=True,
         admit=admission.storage_kind, printer=storage_printers.CLAIM),
    Kind("v1", "PersistentVolume", "persistentvolumes", namespaced=False, short_names=("pv",), status=True,
         admit=admission.storage_kind, printer=storage_printers.VOLUME),
    Kind("storage.k8s.io/v1", "StorageClass", "storageclasses", namespaced=False, short_names=("sc",),
         admit=admission.storage_kind, printer=storage_printers.CLASS),
    Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", namespaced=False,
         short_names=("crd", "crds"), status=True,
         columns=(Column("Created At", ".metadata.creationTimestamp", "date"),)),
)  # fmt: skip


def registry(kinds: Iterable[Kind] = BUILTIN) -> Registry:
    """The resources of a new API server: every built-in kind."""
    return Registry(kind.resource() for kind in kinds)
