"""Helpers for tests against kubesim through the official client: clients, and waiting on watch events."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import kubernetes
from kubernetes.client import ApiClient

from kubesim.sim import SimHandle
from podherd.install import manifests

State = dict[str, Any]


@dataclass
class Kube:
    """The official client's APIs, bound to one kubesim.

    Typed `Any` on purpose: tests send plain dicts as bodies (the client serializes them as it does its
    models, while its annotations name only the models) and read answers whose every field the models
    declare optional; each test asserts the values it needs, which fails as clearly as a None would."""

    handle: SimHandle
    api: ApiClient

    @property
    def core(self) -> Any:
        return kubernetes.client.CoreV1Api(self.api)

    @property
    def apps(self) -> Any:
        return kubernetes.client.AppsV1Api(self.api)

    @property
    def policy(self) -> Any:
        return kubernetes.client.PolicyV1Api(self.api)

    @property
    def custom(self) -> Any:
        return kubernetes.client.CustomObjectsApi(self.api)

    def client(self, name: str) -> Any:
        """Another of the client's APIs, by its class name (e.g. "CoordinationV1Api")."""
        return getattr(kubernetes.client, name)(self.api)


def client_for(handle: SimHandle) -> Kube:
    return Kube(handle, kubernetes.config.new_client_from_config(config_file=str(handle.kubeconfig)))


def watch_until(
    list_fn: Callable[..., Any],
    predicate: Callable[[State], object],
    timeout: float = 15.0,
    *,
    idle: bool = False,
    **kwargs: Any,
) -> State:
    """List with `list_fn`, then follow its watch from the list's resourceVersion (as an informer does),
    until `predicate(state)` holds: on the list itself, or after any change.

    `state` maps "namespace/name" to the latest object (the client's model, or a dict for custom objects).
    Raises TimeoutError with a summary of the last state when `timeout` passes first. With `idle`, `timeout`
    bounds the time without any change instead of the whole wait: a long run that keeps making progress is
    never cut short, and one that stalls fails as soon as it has stalled for `timeout`. A list that is empty,
    or that already holds, is answered at once: a watch would send no event for what is not there.
    """
    state, version = _listed(list_fn, kwargs)
    deadline = time.monotonic() + timeout
    while not _holds(predicate, state):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            still = "without a change for" if idle else "within"
            raise TimeoutError(f"condition not met {still} {timeout}s; last state: {_summary(state)}")
        watch = kubernetes.watch.Watch()
        try:
            for event in watch.stream(
                list_fn, resource_version=version, timeout_seconds=max(1, int(remaining)), **kwargs
            ):
                version = watch.resource_version or version
                if _apply(state, event) and idle:
                    deadline = time.monotonic() + timeout
                if _holds(predicate, state) or time.monotonic() > deadline:
                    watch.stop()
        except kubernetes.client.ApiException as exc:
            if exc.status != 410:
                raise
            state, version = _listed(list_fn, kwargs)  # too old to resume: list again, as an informer does
    return state


def _listed(list_fn: Callable[..., Any], kwargs: dict[str, Any]) -> tuple[State, str]:
    listing = list_fn(**kwargs)
    items = listing["items"] if isinstance(listing, dict) else listing.items
    meta = listing["metadata"] if isinstance(listing, dict) else listing.metadata
    version = meta.get("resourceVersion") if isinstance(meta, dict) else meta.resource_version
    return {_key(obj): obj for obj in items or []}, str(version)


def _key(obj: Any) -> str:
    meta = obj["metadata"] if isinstance(obj, dict) else obj.metadata
    namespace = meta.get("namespace") if isinstance(meta, dict) else meta.namespace
    name = meta.get("name") if isinstance(meta, dict) else meta.name
    return f"{namespace or ''}/{name}"


def _apply(state: State, event: dict[str, Any]) -> bool:
    """Apply a watch event to `state`; whether it changed anything."""
    key = _key(event["object"])
    if event["type"] == "DELETED":
        return state.pop(key, None) is not None
    if event["type"] in ("ADDED", "MODIFIED") and state.get(key) != event["object"]:
        state[key] = event["object"]
        return True
    return False


def _summary(state: State) -> str:
    """The objects by phase (where they have one), then their names."""
    phases = Counter(
        ((obj.get("status") or {}).get("phase") or "-") if isinstance(obj, dict) else "-"
        for obj in state.values()
    )
    return f"{len(state)} objects, by phase {dict(phases)}: {sorted(state)[:20]}"


def _holds(predicate: Callable[[State], object], state: State) -> bool:
    """A predicate that reads an object not seen yet (KeyError) simply does not hold yet."""
    try:
        return bool(predicate(state))
    except KeyError:
        return False


def with_crds(kube: Kube) -> Kube:
    """Apply Podherd's CRDs (deploy/crds) to the cluster behind `kube`."""
    api = kube.client("ApiextensionsV1Api")
    for crd in manifests("crds"):
        api.create_custom_resource_definition(crd)
    return kube


def pod_ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))


def refusal(error: kubernetes.client.ApiException) -> dict[str, Any]:
    """The Status an API error carries: the server's own words for why it said no."""
    assert error.body, f"no Status in {error}"
    status: dict[str, Any] = json.loads(error.body)
    return status


EVICT = {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}
PLACE = {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]}
DRAIN = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
]


def requester(
    kube: Kube,
    name: str,
    rules: list[dict[str, Any]],
    *,
    namespace: str = "default",
    granted_in: str | None = None,
    audience: str = "podherd",
) -> str:
    """A ServiceAccount `namespace/name` holding `rules` (through a RoleBinding in `granted_in`, else a
    ClusterRoleBinding), and a token for it made for `audience`: an external system that sends intents."""
    kube.core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    rbac = kube.client("RbacAuthorizationV1Api")
    subject = {"kind": "ServiceAccount", "name": name, "namespace": namespace}
    role_name = f"requester-{namespace}-{name}"
    if granted_in is None:
        rbac.create_cluster_role({"metadata": {"name": role_name}, "rules": rules})
        ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name}
        rbac.create_cluster_role_binding(
            {"metadata": {"name": role_name}, "roleRef": ref, "subjects": [subject]}
        )
    else:
        rbac.create_namespaced_role(granted_in, {"metadata": {"name": role_name}, "rules": rules})
        ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name}
        binding = {"metadata": {"name": role_name}, "roleRef": ref, "subjects": [subject]}
        rbac.create_namespaced_role_binding(granted_in, binding)
    return token_for(kube, name, namespace=namespace, audience=audience)


def token_for(kube: Kube, name: str, *, namespace: str = "default", audience: str = "podherd") -> str:
    body = {"spec": {"audiences": [audience], "expirationSeconds": 3600}}
    answer = kube.core.create_namespaced_service_account_token(name, namespace, body)
    return str(answer.status.token)


def bearer(token: str) -> dict[str, str]:
    """The NATS headers of a request sent with `token`."""
    return {"Authorization": f"Bearer {token}"}
