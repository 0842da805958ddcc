"""Which admission webhooks a request reaches, and what they are sent, as kube-apiserver decides it (pure;
k8s.io/apiserver/pkg/admission/plugin/webhook: `rules.Matcher`, the namespace and object matchers, and
`request.CreateAdmissionObjects`).

A webhook is called when one of its rules matches the operation, group, version and resource (`pods/eviction`
for the eviction subresource: `*` alone matches no subresource, `*/*` every one, `pods/*` and `*/eviction`
theirs) and scope; its `namespaceSelector` matches the labels of the request's namespace (of the namespace
itself for a Namespace; ignored for other cluster-scoped objects) and its `objectSelector` the labels of the
object or of the old object (for `pods/eviction`, the Eviction's, not the pod's). Requests on webhook
configurations themselves reach no webhook, so a bad one can always be removed.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from kubesim.apiserver.records import Obj
from kubesim.apiserver.selectors import match_label_selector

GROUP = "admissionregistration.k8s.io"
CONFIGURATIONS = ("validatingwebhookconfigurations", "mutatingwebhookconfigurations")
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # the API server puts it on every namespace
DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S = 10, 30


@dataclass(frozen=True)
class Request:
    """What an admission request is about (`admission.Attributes`)."""

    operation: str  # CREATE, UPDATE, DELETE
    group: str
    version: str
    resource: str
    kind: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    obj: Obj | None = None
    old: Obj | None = None
    user: dict[str, Any] = field(default_factory=dict)
    dry_run: bool = False
    options: Obj | None = None
    # The object's own kind when it is not the resource's (an Eviction on pods/eviction): group, version, kind
    object_kind: tuple[str, str, str] | None = None


def matches(webhook: Obj, request: Request, namespace_labels: dict[str, str] | None) -> bool:
    """The webhook is called for the request. `namespace_labels`: the request's namespace's labels (None:
    cluster-scoped, or the namespace is not known)."""
    return may_match(webhook, request, namespace_labels) and _object_matches(webhook, request)


def may_match(webhook: Obj, request: Request, namespace_labels: dict[str, str] | None) -> bool:
    """The webhook is called for the request, whatever its object turns out to be (its `objectSelector`
    aside): what is known before the object is."""
    if request.group == GROUP and request.resource in CONFIGURATIONS:
        return False
    if not any(_rule_matches(rule, request) for rule in webhook.get("rules") or []):
        return False
    return _namespace_matches(webhook, request, namespace_labels)


def _rule_matches(rule: Obj, request: Request) -> bool:
    operations = rule.get("operations") or []
    if "*" not in operations and request.operation not in operations:
        return False
    if not _listed(rule.get("apiGroups"), request.group) or not _listed(
        rule.get("apiVersions"), request.version
    ):
        return False
    if not any(
        _resource_matches(r, request.resource, request.subresource) for r in rule.get("resources") or []
    ):
        return False
    scope = rule.get("scope") or "*"
    namespace_object = request.resource == "namespaces" and request.group == ""
    if scope == "Namespaced":
        return not namespace_object and bool(request.namespace)
    if scope == "Cluster":
        return namespace_object or not request.namespace
    return True


def _listed(values: list[str] | None, value: str) -> bool:
    return "*" in (values or []) or value in (values or [])


def _resource_matches(wanted: str, resource: str, subresource: str) -> bool:
    name, _, sub = wanted.partition("/")
    if not sub:
        return not subresource and name in ("*", resource)
    return bool(subresource) and name in ("*", resource) and sub in ("*", subresource)


def _namespace_matches(webhook: Obj, request: Request, labels: dict[str, str] | None) -> bool:
    selector = webhook.get("namespaceSelector") or {}
    if not selector:
        return True
    if request.resource == "namespaces" and request.group == "" and not request.subresource:
        own = request.obj or request.old or {}
        named = {NAMESPACE_NAME_LABEL: request.name}
        return match_label_selector(selector, {**((own.get("metadata") or {}).get("labels") or {}), **named})
    if not request.namespace:
        return True  # a cluster-scoped object: the selector does not apply
    return match_label_selector(selector, {**(labels or {}), NAMESPACE_NAME_LABEL: request.namespace})


def _object_matches(webhook: Obj, request: Request) -> bool:
    selector = webhook.get("objectSelector") or {}
    if not selector:
        return True
    return any(
        match_label_selector(selector, (obj.get("metadata") or {}).get("labels") or {})
        for obj in (request.obj, request.old)
        if obj is not None
    )


def review(request: Request) -> Obj:
    """The AdmissionReview (admission.k8s.io/v1) a webhook is sent for the request."""
    group, version, kind = request.object_kind or (request.group, request.version, request.kind)
    kinds = {"group": group, "version": version, "kind": kind}
    resource = {"group": request.group, "version": request.version, "resource": request.resource}
    body: Obj = {
        "uid": str(uuid.uuid4()),
        "kind": kinds,
        "resource": resource,
        "requestKind": kinds,
        "requestResource": resource,
        "operation": request.operation,
        "userInfo": request.user,
        "object": request.obj,
        "oldObject": request.old,
        "dryRun": request.dry_run,
        "options": request.options,
    }
    if request.subresource:
        body["subResource"] = body["requestSubResource"] = request.subresource
    if request.name:
        body["name"] = request.name
    if request.namespace:
        body["namespace"] = request.namespace
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": body}


def timeout_of(webhook: Obj) -> int:
    return int(webhook.get("timeoutSeconds") or DEFAULT_TIMEOUT_S)


def fails_closed(webhook: Obj) -> bool:
    """`failurePolicy: Fail` (the v1 default): a webhook that cannot be asked refuses the request."""
    return (webhook.get("failurePolicy") or "Fail") == "Fail"


def url_of(webhook: Obj) -> str:
    """The address the API server posts to (for a Service, its in-cluster name), with the `timeout` query
    parameter it adds."""
    config = webhook.get("clientConfig") or {}
    if config.get("url"):
        base = str(config["url"])
    else:
        service = config.get("service") or {}
        port = int(service.get("port") or 443)
        base = (
            f"https://{service.get('name')}.{service.get('namespace')}.svc:{port}{service.get('path') or ''}"
        )
    return f"{base}{'&' if '?' in base else '?'}timeout={timeout_of(webhook)}s"
