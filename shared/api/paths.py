"""The API server paths Podherd reads and writes, each spelled once."""

from __future__ import annotations

from typing import Final

from shared.api.pmj import GROUP, PLURAL, VERSION

JOBS: Final = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
RESERVATIONS: Final = f"/apis/{GROUP}/{VERSION}/reservations"
PODS: Final = "/api/v1/pods"
NODES: Final = "/api/v1/nodes"
NAMESPACES: Final = "/api/v1/namespaces"
CLAIMS: Final = "/api/v1/persistentvolumeclaims"
VOLUMES: Final = "/api/v1/persistentvolumes"


def job(name: str) -> str:
    return f"{JOBS}/{name}"


def job_status(name: str) -> str:
    return f"{JOBS}/{name}/status"


def reservation(name: str) -> str:
    return f"{RESERVATIONS}/{name}"


def pod(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods/{name}"


def node(name: str) -> str:
    return f"{NODES}/{name}"


def events(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/events"


def deployments(namespace: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/deployments"


def deployment(namespace: str, name: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}"


def deployment_scale(namespace: str, name: str) -> str:
    return f"{deployment(namespace, name)}/scale"


def replicaset(namespace: str, name: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/replicasets/{name}"


def statefulset(namespace: str, name: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{name}"


def replication_controller(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{namespace}/replicationcontrollers/{name}"


def disruption_budgets(namespace: str) -> str:
    return f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"


def autoscalers(namespace: str) -> str:
    return f"/apis/autoscaling/v2/namespaces/{namespace}/horizontalpodautoscalers"


TOKEN_REVIEWS: Final = "/apis/authentication.k8s.io/v1/tokenreviews"
SELF_SUBJECT_REVIEWS: Final = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
# The admission gate's eviction webhooks, as deploy/ names them.
GATE_WEBHOOKS: Final = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/podherd-gate"
SUBJECT_ACCESS_REVIEWS: Final = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
