"""A kubesim scenario document as the API objects a user would create on a real cluster: nodes for kwok to
run, workloads and budgets for kube-controller-manager, pods for the scheduler. Pure: `scenario` sends them.

Where the two engines differ by nature: kubesim's loader writes every placed pod Running where its
`placement` says; here the controllers make the pods and the scheduler places them (a pod a `placement`
names a node for is bound there, see `placement`), and a `priority` without a PriorityClass becomes one
(`priority-<value>`), since the Priority admission plugin refuses a bare value.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from podherd.realcluster.components import KWOK_NODE_ANNOTATION

Obj = dict[str, Any]
POD_KEYS = ("nodeSelector", "tolerations", "affinity", "volumes", "topologySpreadConstraints")


@dataclass
class Objects:
    """In the order they are created."""

    namespaces: list[str] = field(default_factory=list)
    priority_classes: list[Obj] = field(default_factory=list)
    nodes: list[Obj] = field(default_factory=list)
    workloads: list[Obj] = field(default_factory=list)  # Deployments and StatefulSets
    budgets: list[Obj] = field(default_factory=list)
    pods: list[Obj] = field(default_factory=list)
    placement: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # (namespace, name): nodes

    def namespace(self, name: str) -> str:
        if name not in self.namespaces:
            self.namespaces.append(name)
        return name


def objects(document: dict[str, Any]) -> Objects:
    out = Objects()
    values: dict[str, int] = {}
    for pc in document.get("priorityClasses") or []:
        values[pc["name"]] = int(pc["value"])
        out.priority_classes.append(_priority_class(pc["name"], int(pc["value"])))
    for namespace in document.get("namespaces") or []:
        out.namespace(namespace)
    for group in document.get("nodes") or []:
        out.nodes.extend(nodes(group))
    for item in document.get("workloads") or []:
        namespace = out.namespace(item.get("namespace", "default"))
        spec = pod_spec(item, out, values)
        labels = dict(item.get("labels") or {"app": item["name"]})
        template: Obj = {"metadata": {"labels": dict(labels)}, "spec": spec}
        if item.get("annotations"):
            template["metadata"]["annotations"] = dict(item["annotations"])
        out.workloads.append(_workload(item, namespace, labels, template=template))
        if item.get("placement"):
            out.placement[namespace, item["name"]] = [str(node) for node in item["placement"]]
        if item.get("pdb"):
            out.budgets.append(_budget(item, namespace, labels))
    for item in document.get("pods") or []:
        namespace = out.namespace(item.get("namespace", "default"))
        spec = pod_spec(item, out, values)
        if item.get("node"):
            spec["nodeName"] = item["node"]
        meta = {"name": item["name"], "namespace": namespace, "labels": dict(item.get("labels") or {})}
        if item.get("annotations"):
            meta["annotations"] = dict(item["annotations"])
        out.pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
    return out


def nodes(group: dict[str, Any]) -> list[Obj]:
    made = []
    key, value = KWOK_NODE_ANNOTATION
    for i in range(1, int(group.get("count", 1)) + 1):
        name = str(group["name"]).format(i=i)
        capacity = {"cpu": "4", "memory": "16Gi", "pods": "110", **(group.get("capacity") or {})}
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
            **(group.get("labels") or {}),
        }
        # A node that is not to be ready is one no kwok runs: it never reports, as a lost kubelet.
        annotations = {key: value} if group.get("ready", True) else {}
        spec: Obj = {"taints": copy.deepcopy(group["taints"])} if group.get("taints") else {}
        made.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels, "annotations": annotations},
                "spec": spec,
                "status": {"capacity": capacity, "allocatable": dict(capacity)},
            }
        )
    return made


def pod_spec(item: dict[str, Any], out: Objects, values: dict[str, int]) -> Obj:
    container: Obj = {"name": "main", "image": item.get("image", "registry.k8s.io/pause:3.9")}
    resources = {k: item[k] for k in ("requests", "limits") if item.get(k)}
    if resources:
        container["resources"] = copy.deepcopy(resources)
    if item.get("readinessProbe"):
        container["readinessProbe"] = copy.deepcopy(item["readinessProbe"])
    spec: Obj = {
        "containers": [container],
        "schedulerName": item.get("schedulerName", "default-scheduler"),
        "terminationGracePeriodSeconds": int(item.get("terminationGracePeriodSeconds", 30)),
    }
    for key in POD_KEYS:
        if item.get(key):
            spec[key] = copy.deepcopy(item[key])
    if item.get("priorityClassName"):
        spec["priorityClassName"] = item["priorityClassName"]
    elif int(item.get("priority") or 0):
        value = int(item["priority"])
        name = f"priority-{value}"
        if values.get(name) is None:
            values[name] = value
            out.priority_classes.append(_priority_class(name, value))
        spec["priorityClassName"] = name
    return spec


def _priority_class(name: str, value: int) -> Obj:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def _workload(item: dict[str, Any], namespace: str, labels: dict[str, str], *, template: Obj) -> Obj:
    spec: Obj = {
        "replicas": int(item.get("replicas", 1)),
        "selector": {"matchLabels": dict(labels)},
        "template": template,
    }
    meta = {"name": item["name"], "namespace": namespace}
    if item.get("kind", "Deployment") == "StatefulSet":
        spec["serviceName"] = item["name"]
        spec["podManagementPolicy"] = item.get("podManagementPolicy", "OrderedReady")
        return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta, "spec": spec}
    spec["strategy"] = {
        "type": "RollingUpdate",
        "rollingUpdate": {
            "maxSurge": item.get("maxSurge", "25%"),
            "maxUnavailable": item.get("maxUnavailable", "25%"),
        },
    }
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec}


def _budget(item: dict[str, Any], namespace: str, labels: dict[str, str]) -> Obj:
    pdb = item["pdb"]
    limits = {k: v for k, v in pdb.items() if k in ("minAvailable", "maxUnavailable")}
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": pdb.get("name", item["name"]), "namespace": namespace},
        "spec": {"selector": {"matchLabels": dict(labels)}, **limits},
    }
