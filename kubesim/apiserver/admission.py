"""Defaulting and validation the API server applies on write (the subset Podherd's behaviour depends on)."""

from __future__ import annotations

import base64
import copy
import difflib
import json
import secrets

from kubesim.apiserver import batch, builtin_defaults, service_defaults, storage, webhook_configs
from kubesim.apiserver.errors import FieldError, invalid, invalid_fields
from kubesim.apiserver.records import Obj
from kubesim.apiserver.resources import Objects, ResourceType, Write
from kubesim.apiserver.store import Store

NODE_INFO = {
    "architecture": "amd64",
    "bootID": "kubesim",
    "containerRuntimeVersion": "containerd://1.7.0",
    "kernelVersion": "6.1.0",
    "kubeProxyVersion": "v1.32.0",
    "kubeletVersion": "v1.32.0-kubesim",
    "machineID": "kubesim",
    "operatingSystem": "linux",
    "osImage": "kubesim",
    "systemUUID": "kubesim",
}
SYSTEM_PRIORITIES = {"system-node-critical": 2_000_001_000, "system-cluster-critical": 2_000_000_000}
# ValidatePodUpdate's list (Kubernetes 1.32, in-place resize off): all else in a pod's spec is fixed.
UPDATABLE_POD_SPEC_FIELDS = ",".join(
    (
        "`spec.containers[*].image`",
        "`spec.initContainers[*].image`",
        "`spec.activeDeadlineSeconds`",
        "`spec.tolerations` (only additions to existing tolerations)",
        "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
    )
)


def qos_class(spec: Obj) -> str:
    containers = list(spec.get("containers") or []) + list(spec.get("initContainers") or [])
    requests_any = limits_any = False
    guaranteed = bool(containers)
    for container in containers:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        requests_any |= bool(requests)
        limits_any |= bool(limits)
        for name in ("cpu", "memory"):
            if name not in limits or requests.get(name, limits[name]) != limits[name]:
                guaranteed = False
    if guaranteed:
        return "Guaranteed"
    return "Burstable" if requests_any or limits_any else "BestEffort"


SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
_RANDOM_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's utilrand


def _api_access_volume() -> Obj:
    return {
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {
                "downwardAPI": {
                    "items": [
                        {
                            "path": "namespace",
                            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                        }
                    ]
                }
            },
        ],
        "defaultMode": 420,
    }


class Admission:
    """The built-in admission of every write, as each kind has it (`ResourceType.admit`, listed in
    `kubesim.apiserver.kinds`)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __call__(
        self, operation: str, rt: ResourceType, old: Obj | None, obj: Obj, subresource: str | None = None
    ) -> None:
        if rt.admit is not None:
            rt.admit(Write(self.store, operation, rt, old, obj, subresource))


def pod(w: Write) -> None:
    _pod(w.objects, w.operation, w.obj)
    if w.operation == "UPDATE" and w.old is not None and w.subresource is None:
        _pod_spec_update(w.old, w.obj)


def autoscaler(w: Write) -> None:
    if w.subresource is None and (errors := _autoscaler_errors(w.obj.get("spec") or {})):
        raise invalid_fields(w.rt.kind, w.rt.group, w.obj["metadata"]["name"], errors=errors)


def workload(w: Write) -> None:
    """A workload of `apps`: defaulted as its kind is, its selector required."""
    rt, obj = w.rt, w.obj
    spec = obj.setdefault("spec", {})
    if w.subresource is None:
        builtin_defaults.workload(rt.kind, spec)
    if rt.plural != "daemonsets":
        spec.setdefault("replicas", 1)
    selector = spec.get("selector") or {}
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        raise invalid(
            rt.kind, obj["metadata"]["name"], "spec.selector: Required value", field="spec.selector"
        )
    if rt.plural == "deployments":
        strategy = spec.setdefault("strategy", {})
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            rolling.setdefault("maxSurge", "25%")
            rolling.setdefault("maxUnavailable", "25%")
        spec.setdefault("revisionHistoryLimit", 10)
    if rt.plural == "statefulsets":
        spec.setdefault("podManagementPolicy", "OrderedReady")
        spec.setdefault("updateStrategy", {"type": "RollingUpdate"})


def storage_kind(w: Write) -> None:
    classes = w.objects.registry.get(storage.STORAGE_GROUP, "v1", "storageclasses")
    found = list(w.objects.objects(classes)) if classes is not None else []
    storage.admitted(w.rt.plural, w.obj, old=w.old, subresource=w.subresource, classes=found)


def batch_kind(w: Write) -> None:
    batch.admitted(w.operation, w.rt.kind, w.obj, old=w.old, subresource=w.subresource)


def webhook_configuration(w: Write) -> None:
    if w.subresource is not None:
        return
    webhook_configs.defaulted(w.obj, mutating=w.rt.plural.startswith("mutating"))
    if errors := webhook_configs.errors_of(w.obj):
        raise invalid_fields(w.rt.kind, w.rt.group, w.obj["metadata"]["name"], errors=errors)


def service(w: Write) -> None:
    if w.subresource is None:
        others = service_defaults.services_but(w.objects.objects(w.rt), w.obj)
        service_defaults.defaulted(w.obj, w.old, others)


def secret(w: Write) -> None:
    """As the Secret's conversion does: `stringData` written into `data` (its keys win), never stored; `type`
    Opaque unless said."""
    secret = w.obj
    written = secret.pop("stringData", None) or {}
    if written:
        data = secret.setdefault("data", {}) or {}
        data.update({k: base64.b64encode(str(v).encode()).decode() for k, v in written.items()})
        secret["data"] = data
    if not secret.get("type"):
        secret["type"] = "Opaque"


def node(w: Write) -> None:
    if w.operation != "CREATE":
        return
    node = w.obj
    meta = node["metadata"]
    meta.setdefault("labels", {}).setdefault("kubernetes.io/hostname", meta["name"])
    status = node.setdefault("status", {})
    if "capacity" in status and "allocatable" not in status:
        status["allocatable"] = dict(status["capacity"])
    status.setdefault("conditions", [{"type": "Ready", "status": "True", "reason": "KubeletReady"}])
    status.setdefault("nodeInfo", dict(NODE_INFO))


def namespace(w: Write) -> None:
    if w.operation == "CREATE":
        w.obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        w.obj["status"] = {"phase": "Active"}


def _pod(objects: Objects, operation: str, pod: Obj) -> None:
    spec = pod.setdefault("spec", {})
    name = pod["metadata"]["name"]
    if not spec.get("containers"):
        raise invalid("Pod", name, "spec.containers: Required value", field="spec.containers")
    for container in spec["containers"]:
        if not container.get("name"):
            raise invalid(
                "Pod", name, "spec.containers[].name: Required value", field="spec.containers[].name"
            )
    builtin_defaults.pod_spec(spec)  # defaulting: on every write, before validation
    builtin_defaults.pod_only(spec)
    if operation != "CREATE":
        return
    builtin_defaults.default_tolerations(spec)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    if spec.get("nodeName") and spec.get("schedulingGates"):
        detail = "cannot be set until all schedulingGates have been cleared"
        raise invalid_fields(
            "Pod", "", name, errors=[FieldError("FieldValueForbidden", "spec.nodeName", None, detail)]
        )
    if "priority" not in spec:
        spec["priority"] = _priority(objects, spec.get("priorityClassName"))
    _service_account(objects, spec, pod["metadata"].get("namespace") or "default")
    pod["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}
    if spec.get("schedulingGates"):  # as the pod strategy's PrepareForCreate: the scheduler skips it
        pod["status"]["conditions"] = [SCHEDULING_GATED]


def _service_account(objects: Objects, spec: Obj, namespace: str) -> None:
    """The ServiceAccount admission plugin: the pod's account (`default` unless named) and, unless
    automounting is off for the pod or its account, the projected `kube-api-access-*` volume (token, the
    cluster's CA, the namespace) mounted in every container where nothing else is mounted there."""
    account = spec.setdefault("serviceAccountName", "default")
    spec.setdefault("serviceAccount", account)
    if spec.get("automountServiceAccountToken") is False:
        return
    rt = objects.registry.get("", "v1", "serviceaccounts")
    found = objects.find(rt, namespace, account) if rt is not None else None
    if found is not None and found.get("automountServiceAccountToken") is False:
        return
    name = "kube-api-access-" + "".join(secrets.choice(_RANDOM_ALPHABET) for _ in range(5))
    mounted = False
    for container in (spec.get("initContainers") or []) + spec["containers"]:
        mounts = container.setdefault("volumeMounts", [])
        if any(m.get("mountPath") == SERVICE_ACCOUNT_DIR for m in mounts):
            continue
        mounts.append({"name": name, "readOnly": True, "mountPath": SERVICE_ACCOUNT_DIR})
        mounted = True
    if mounted:
        spec.setdefault("volumes", []).append({"name": name, "projected": _api_access_volume()})


def _priority(objects: Objects, class_name: str | None) -> int:
    if not class_name:
        return 0
    if class_name in SYSTEM_PRIORITIES:
        return SYSTEM_PRIORITIES[class_name]
    rt = objects.registry.get("scheduling.k8s.io", "v1", "priorityclasses")
    found = objects.find(rt, "", class_name) if rt else None
    if found is None:
        raise invalid(
            "Pod",
            "",
            f"spec.priorityClassName: no PriorityClass with name {class_name} was found",
            field="spec.priorityClassName",
        )
    return int(found.get("value", 0))


SCHEDULING_GATED = {
    "type": "PodScheduled",
    "status": "False",
    "reason": "SchedulingGated",
    "message": "Scheduling is blocked due to non-empty scheduling gates",
}


def _autoscaler_errors(spec: Obj) -> list[FieldError]:
    """A HorizontalPodAutoscaler's spec as the API server validates it (the bounds and the target named)."""
    errors = []
    minimum, maximum = spec.get("minReplicas"), int(spec.get("maxReplicas") or 0)
    if minimum is not None and minimum < 1:
        errors.append(
            FieldError("FieldValueInvalid", "spec.minReplicas", minimum, "must be greater than or equal to 1")
        )
    if maximum < 1:
        errors.append(FieldError("FieldValueInvalid", "spec.maxReplicas", maximum, "must be greater than 0"))
    if minimum is not None and maximum < minimum:
        detail = "must be greater than or equal to `minReplicas`"
        errors.append(FieldError("FieldValueInvalid", "spec.maxReplicas", maximum, detail))
    target = spec.get("scaleTargetRef") or {}
    for part in ("kind", "name"):
        if not target.get(part):
            errors.append(FieldError("FieldValueRequired", f"spec.scaleTargetRef.{part}"))
    return errors


def _pod_spec_update(old: Obj, new: Obj) -> None:
    """Refuse a pod update that changes its spec beyond what ValidatePodUpdate lets change: the updatable
    fields are set back to their old values, and whatever still differs is refused (with a diff)."""
    before, after = old.get("spec") or {}, new.get("spec") or {}
    munged = copy.deepcopy(after)
    munged.setdefault("priority", before.get("priority"))  # set by admission on create, never sent back
    for kind in ("containers", "initContainers"):
        old_list, new_list = before.get(kind) or [], munged.get(kind) or []
        if len(old_list) == len(new_list):
            for was, now in zip(old_list, new_list, strict=True):
                if "image" in was:
                    now["image"] = was["image"]
    if "activeDeadlineSeconds" in before or "activeDeadlineSeconds" in munged:
        _restore(munged, before, "activeDeadlineSeconds")
    old_tolerations = before.get("tolerations") or []
    new_tolerations = munged.get("tolerations") or []
    if new_tolerations[: len(old_tolerations)] == old_tolerations:  # additions only
        _restore(munged, before, "tolerations")
    grace_was = before.get("terminationGracePeriodSeconds")
    if isinstance(grace_was, int) and grace_was < 0 and munged.get("terminationGracePeriodSeconds") == 1:
        _restore(munged, before, "terminationGracePeriodSeconds")
    had = {g.get("name") for g in before.get("schedulingGates") or []}
    added = [
        FieldError(
            "FieldValueForbidden",
            f"spec.schedulingGates[{i}].name",
            None,
            f"only deletion is allowed, but found new scheduling gate '{g.get('name')}'",
        )
        for i, g in enumerate(munged.get("schedulingGates") or [])
        if g.get("name") not in had
    ]
    if added:
        raise invalid_fields("Pod", "", new["metadata"]["name"], errors=added)
    _restore(munged, before, "schedulingGates")  # gates may be removed
    if munged == before:
        return
    diff = "\n".join(
        difflib.unified_diff(_lines(before), _lines(munged), "old spec", "new spec", lineterm="", n=1)
    )
    detail = f"pod updates may not change fields other than {UPDATABLE_POD_SPEC_FIELDS}\n{diff}"
    raise invalid_fields(
        "Pod", "", new["metadata"]["name"], errors=[FieldError("FieldValueForbidden", "spec", None, detail)]
    )


def _restore(spec: Obj, before: Obj, field: str) -> None:
    if field in before:
        spec[field] = copy.deepcopy(before[field])
    else:
        spec.pop(field, None)


def _lines(spec: Obj) -> list[str]:
    return json.dumps(spec, indent=1, sort_keys=True).splitlines()
