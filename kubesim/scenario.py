"""Cluster scenarios: nodes, workloads, budgets and pods, from YAML or generated, loaded into the store.

```yaml
name: example
nodes:
  - {name: "node-{i}", count: 4, capacity: {cpu: "4", memory: 16Gi, pods: "110"}, labels: {zone: a}}
priorityClasses: [{name: high, value: 1000}]
workloads:
  - kind: Deployment            # or StatefulSet
    name: web
    namespace: default
    replicas: 4
    requests: {cpu: "1", memory: 1Gi}
    schedulerName: koord-scheduler
    labels: {app: web}          # pod labels (the selector); default {app: <name>}
    annotations: {}             # pod annotations
    priority: 0                 # or priorityClassName
    pdb: {maxUnavailable: 1}    # or {minAvailable: 3}
    placement: [node-1, node-2] # initial node per replica, cycled; default: round-robin over nodes that fit
    readinessProbe: {tcpSocket: {port: 80}, initialDelaySeconds: 30}  # new replicas Ready only after it
    volumes: [{name: scratch, emptyDir: {}}]
pods:                           # bare pods; without `node` they start Pending for the scheduler
  - {name: big, namespace: default, requests: {cpu: "4"}}
```

Placed pods are created Running and Ready and owned exactly as the controllers would own them, so the
control loops find nothing to do until something changes.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubesim.apiserver import builtin_defaults
from kubesim.apiserver.admission import qos_class
from kubesim.apiserver.records import Obj, now_iso
from kubesim.controllers.owned import owner_ref, template_hash
from kubesim.scenario_nodes import NodePlacer
from kubesim.scenarios import BUILTIN, builtin, generate
from shared.api.quantity import pod_requests


def resolve(scenario: str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(scenario, dict):
        return scenario
    if scenario in BUILTIN:
        return builtin(scenario)
    if scenario.startswith("generate:"):
        try:
            _, nodes, pods = scenario.split(":")
            return generate(int(nodes), int(pods))
        except ValueError:
            raise ValueError(f"expected generate:NODES:PODS, got {scenario!r}") from None
    path = Path(scenario)
    if not path.exists():
        raise FileNotFoundError(
            f"no scenario named {scenario!r} (built-in: {', '.join(sorted(BUILTIN))}, generate:NODES:PODS) "
            "and no such file"
        )
    document = yaml.safe_load(path.read_text())
    if not isinstance(document, dict):
        raise ValueError(f"scenario file {path} must hold a mapping")
    return document


# ---------------------------------------------------------------------------------------------------------
# Loading


class _Loader:
    def __init__(self, sim: Any) -> None:
        self.store = sim.store
        registry = self.store.registry
        self.rts = {
            p: registry.get(g, "v1", p)
            for g, p in (
                ("", "namespaces"),
                ("", "nodes"),
                ("", "pods"),
                ("apps", "deployments"),
                ("apps", "replicasets"),
                ("apps", "statefulsets"),
                ("policy", "poddisruptionbudgets"),
                ("scheduling.k8s.io", "priorityclasses"),
            )
        }
        self.nodes = NodePlacer(self.store, self.rts["nodes"])
        self.ip = 0
        self.priorities: dict[str, int] = {}

    def namespace(self, name: str) -> None:
        if self.store.find(self.rts["namespaces"], "", name) is None:
            self.store.verbs.create(self.rts["namespaces"], "", {"metadata": {"name": name}})

    def pod_spec(self, item: dict[str, Any]) -> dict[str, Any]:
        requests = item.get("requests") or {}
        container: dict[str, Any] = {"name": "main", "image": item.get("image", "registry.k8s.io/pause:3.9")}
        if item.get("readinessProbe"):
            container["readinessProbe"] = copy.deepcopy(item["readinessProbe"])
        if requests or item.get("limits"):
            container["resources"] = {
                k: v for k, v in (("requests", requests), ("limits", item.get("limits"))) if v
            }
        spec: dict[str, Any] = {
            "containers": [container],
            "schedulerName": item.get("schedulerName", "default-scheduler"),
            "terminationGracePeriodSeconds": int(item.get("terminationGracePeriodSeconds", 30)),
        }
        if item.get("volumes"):
            spec["volumes"] = copy.deepcopy(item["volumes"])
        priority = item.get("priority")
        if item.get("priorityClassName"):
            spec["priorityClassName"] = item["priorityClassName"]
            priority = self.priorities.get(item["priorityClassName"], priority)
        spec["priority"] = int(priority or 0)
        for key in ("nodeSelector", "tolerations", "affinity", "volumes", "topologySpreadConstraints"):
            if item.get(key):
                spec[key] = copy.deepcopy(item[key])
        builtin_defaults.pod_spec(spec)  # as the API server's defaulting leaves it
        return spec

    def pod(
        self, namespace: str, name: str, meta: dict[str, Any], *, spec: dict[str, Any], node: str | None
    ) -> None:
        stamp = now_iso()
        builtin_defaults.default_tolerations(spec)  # as admission leaves a pod (not a template)
        builtin_defaults.pod_only(spec)
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        status: dict[str, Any] = {"phase": "Pending", "qosClass": qos_class(spec)}
        if node:
            spec["nodeName"] = node
            self.ip += 1
            status.update(
                phase="Running",
                startTime=stamp,
                hostIP="192.168.0.1",
                podIP=f"10.{(self.ip >> 16) & 255}.{(self.ip >> 8) & 255}.{self.ip & 255}",
                containerStatuses=[
                    {
                        "name": c["name"],
                        "ready": True,
                        "started": True,
                        "restartCount": 0,
                        "image": c.get("image", ""),
                        "imageID": "",
                        "state": {"running": {"startedAt": stamp}},
                    }
                    for c in spec["containers"]
                ],
                conditions=[
                    {"type": t, "status": "True", "lastTransitionTime": stamp}
                    for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
                ],
            )
        self.store.put(
            self.rts["pods"],
            {
                "metadata": {
                    **meta,
                    "name": name,
                    "namespace": namespace,
                    "uid": f"pod-{namespace}-{name}",
                    "creationTimestamp": stamp,
                    "generation": 1,
                },
                "spec": spec,
                "status": status,
            },
            "ADDED",
        )

    def workload(self, item: dict[str, Any]) -> None:
        name, namespace = item["name"], item.get("namespace", "default")
        self.namespace(namespace)
        labels = dict(item.get("labels") or {"app": name})
        annotations = {"annotations": dict(item["annotations"])} if item.get("annotations") else {}
        template = {"metadata": {"labels": dict(labels), **annotations}, "spec": self.pod_spec(item)}
        shape = _Shape(name, namespace, int(item.get("replicas", 1)), labels, now_iso())
        if item.get("kind", "Deployment") == "StatefulSet":
            revision = f"{name}-{template_hash(template)}"
            owner = self.store.put(
                self.rts["statefulsets"], _statefulset(shape, item, template, revision=revision), "ADDED"
            )
            names = [
                (
                    f"{name}-{i}",
                    {
                        "statefulset.kubernetes.io/pod-name": f"{name}-{i}",
                        "controller-revision-hash": revision,
                    },
                )
                for i in range(shape.replicas)
            ]
        else:
            deploy = self.store.put(self.rts["deployments"], _deployment(shape, item, template), "ADDED")
            tmpl_hash = template_hash(template)
            template = copy.deepcopy(template)
            template["metadata"]["labels"]["pod-template-hash"] = tmpl_hash
            owner = self.store.put(
                self.rts["replicasets"], _replicaset(shape, deploy, template, tmpl_hash=tmpl_hash), "ADDED"
            )
            names = [(f"{name}-{tmpl_hash}-{i:05d}", {}) for i in range(shape.replicas)]
        placement = list(item.get("placement") or [])
        requests = pod_requests(template["spec"])
        for index, (pod_name, extra_labels) in enumerate(names):
            node = self.nodes.place(requests, placement[index % len(placement)] if placement else None)
            meta = copy.deepcopy(template["metadata"])
            meta["labels"] = {**meta.get("labels", {}), **extra_labels}
            meta["ownerReferences"] = [owner_ref(owner)]
            self.pod(namespace, pod_name, meta, spec=copy.deepcopy(template["spec"]), node=node)
        if item.get("pdb"):
            self.store.put(self.rts["poddisruptionbudgets"], _pdb(shape, item["pdb"]), "ADDED")

    def bare_pod(self, item: dict[str, Any]) -> None:
        namespace = item.get("namespace", "default")
        self.namespace(namespace)
        spec = self.pod_spec(item)
        node = item.get("node")
        if node:
            placed = self.nodes.place(pod_requests(spec), node)
            if placed is None:
                raise ValueError(f"pod {item['name']} does not fit on node {node}")
        meta = {"labels": dict(item.get("labels") or {}), "annotations": dict(item.get("annotations") or {})}
        self.pod(namespace, item["name"], meta, spec=spec, node=node)


def load_scenario(sim: Any, scenario: str | dict[str, Any]) -> dict[str, Any]:
    document = resolve(scenario)
    loader = _Loader(sim)
    for pc in document.get("priorityClasses") or []:
        loader.priorities[pc["name"]] = int(pc["value"])
        sim.store.put(
            loader.rts["priorityclasses"],
            {
                "metadata": {
                    "name": pc["name"],
                    "uid": f"pc-{pc['name']}",
                    "creationTimestamp": now_iso(),
                    "generation": 1,
                },
                "value": int(pc["value"]),
            },
            "ADDED",
        )
    for namespace in document.get("namespaces") or []:
        loader.namespace(namespace)
    loader.nodes.add(document.get("nodes") or [])
    for item in document.get("workloads") or []:
        loader.workload(item)
    for item in document.get("pods") or []:
        loader.bare_pod(item)
    return document


# ---------------------------------------------------------------------------------------------------------
# A workload's objects, as the API server and its controllers would have left them


@dataclass(frozen=True)
class _Shape:
    name: str
    namespace: str
    replicas: int
    labels: dict[str, str]
    stamp: str

    def meta(self, name: str, uid: str, **more: Any) -> dict[str, Any]:
        base = {"namespace": self.namespace, "creationTimestamp": self.stamp, "generation": 1}
        return {**base, "name": name, "uid": uid, **more}

    def spec(self, template: Obj) -> dict[str, Any]:
        return {
            "replicas": self.replicas,
            "selector": {"matchLabels": dict(self.labels)},
            "template": template,
        }

    def ready(self) -> dict[str, Any]:
        n = self.replicas
        return {"replicas": n, "readyReplicas": n, "availableReplicas": n, "observedGeneration": 1}


def _statefulset(shape: _Shape, item: dict[str, Any], template: Obj, *, revision: str) -> Obj:
    spec = {
        **shape.spec(template),
        "podManagementPolicy": item.get("podManagementPolicy", "OrderedReady"),
        "updateStrategy": {"type": "RollingUpdate"},
        "serviceName": shape.name,
    }
    revisions = {"currentRevision": revision, "updateRevision": revision}
    counts = {"currentReplicas": shape.replicas, "updatedReplicas": shape.replicas}
    return {
        "metadata": shape.meta(shape.name, f"sts-{shape.namespace}-{shape.name}"),
        "spec": spec,
        "status": {**shape.ready(), **counts, **revisions},
    }


def _deployment(shape: _Shape, item: dict[str, Any], template: Obj) -> Obj:
    rolling = {"maxSurge": item.get("maxSurge", "25%"), "maxUnavailable": item.get("maxUnavailable", "25%")}
    spec = {
        **shape.spec(template),
        "revisionHistoryLimit": 10,
        "strategy": {"type": "RollingUpdate", "rollingUpdate": rolling},
    }
    status = {**shape.ready(), "updatedReplicas": shape.replicas, "unavailableReplicas": 0}
    return {
        "metadata": shape.meta(shape.name, f"deploy-{shape.namespace}-{shape.name}"),
        "spec": spec,
        "status": status,
    }


def _replicaset(shape: _Shape, deploy: Obj, template: Obj, *, tmpl_hash: str) -> Obj:
    meta = shape.meta(
        f"{shape.name}-{tmpl_hash}",
        f"rs-{shape.namespace}-{shape.name}",
        labels=dict(template["metadata"]["labels"]),
        ownerReferences=[owner_ref(deploy)],
    )
    selector = {"matchLabels": {**shape.labels, "pod-template-hash": tmpl_hash}}
    spec = {"replicas": shape.replicas, "template": template, "selector": selector}
    return {
        "metadata": meta,
        "spec": spec,
        "status": {**shape.ready(), "fullyLabeledReplicas": shape.replicas},
    }


def _pdb(shape: _Shape, pdb: dict[str, Any]) -> Obj:
    limits = {k: v for k, v in pdb.items() if k in ("minAvailable", "maxUnavailable")}
    return {
        "metadata": shape.meta(pdb.get("name", shape.name), f"pdb-{shape.namespace}-{shape.name}"),
        "spec": {"selector": {"matchLabels": dict(shape.labels)}, **limits},
    }
