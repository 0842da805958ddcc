"""Defaulting and validation the API server applies on write (the subset Podherd's behaviour depends on)."""

from __future__ import annotations

from kubesim.errors import invalid
from kubesim.resources import ResourceType
from kubesim.store import Obj, Store

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


class Admission:
    def __init__(self, store: Store) -> None:
        self.store = store

    def __call__(self, operation: str, rt: ResourceType, old: Obj | None, obj: Obj) -> None:
        if rt.group == "" and rt.plural == "pods":
            self._pod(operation, obj)
        elif rt.group == "apps":
            spec = obj.setdefault("spec", {})
            spec.setdefault("replicas", 1)
            if not (spec.get("selector") or {}).get("matchLabels") and not (spec.get("selector") or {}).get(
                "matchExpressions"
            ):
                raise invalid(
                    rt.kind, obj["metadata"]["name"], "spec.selector: Required value", "spec.selector"
                )
            if rt.plural == "deployments":
                strategy = spec.setdefault("strategy", {"type": "RollingUpdate"})
                if strategy.get("type", "RollingUpdate") == "RollingUpdate":
                    rolling = strategy.setdefault("rollingUpdate", {})
                    rolling.setdefault("maxSurge", "25%")
                    rolling.setdefault("maxUnavailable", "25%")
                spec.setdefault("revisionHistoryLimit", 10)
            if rt.plural == "statefulsets":
                spec.setdefault("podManagementPolicy", "OrderedReady")
                spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
        elif rt.group == "" and rt.plural == "nodes" and operation == "CREATE":
            self._node(obj)
        elif rt.group == "" and rt.plural == "namespaces" and operation == "CREATE":
            obj["status"] = {"phase": "Active"}

    def _pod(self, operation: str, pod: Obj) -> None:
        spec = pod.setdefault("spec", {})
        name = pod["metadata"]["name"]
        if not spec.get("containers"):
            raise invalid("Pod", name, "spec.containers: Required value", "spec.containers")
        for container in spec["containers"]:
            if not container.get("name"):
                raise invalid("Pod", name, "spec.containers[].name: Required value", "spec.containers[].name")
        if operation != "CREATE":
            return
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("dnsPolicy", "ClusterFirst")
        if "priority" not in spec:
            spec["priority"] = self._priority(spec.get("priorityClassName"))
        pod["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}

    def _priority(self, class_name: str | None) -> int:
        if not class_name:
            return 0
        if class_name in SYSTEM_PRIORITIES:
            return SYSTEM_PRIORITIES[class_name]
        rt = self.store.registry.get("scheduling.k8s.io", "v1", "priorityclasses")
        found = self.store.find(rt, "", class_name) if rt else None
        if found is None:
            raise invalid(
                "Pod",
                "",
                f"spec.priorityClassName: no PriorityClass with name {class_name} was found",
                "spec.priorityClassName",
            )
        return int(found.get("value", 0))

    @staticmethod
    def _node(node: Obj) -> None:
        meta = node["metadata"]
        meta.setdefault("labels", {}).setdefault("kubernetes.io/hostname", meta["name"])
        status = node.setdefault("status", {})
        if "capacity" in status and "allocatable" not in status:
            status["allocatable"] = dict(status["capacity"])
        status.setdefault("conditions", [{"type": "Ready", "status": "True", "reason": "KubeletReady"}])
        status.setdefault("nodeInfo", dict(NODE_INFO))
