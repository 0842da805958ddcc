"""The API server's printers (pkg/printers/internalversion) for Pods, Nodes, Events, Services, Deployments,
StatefulSets and Jobs (storage's: kubesim.apiserver.storage_printers): the columns `kubectl get` shows, and
with `-o wide` the ones of priority 1."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kubesim.apiserver.records import Obj, parse_iso
from kubesim.apiserver.resources import Column, Printer


def _selector(selector: dict[str, str] | None) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted((selector or {}).items())) or "<none>"


def _containers(spec: Obj) -> tuple[str, str]:
    template = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    return ",".join(c.get("name", "") for c in template), ",".join(c.get("image", "") for c in template)


SERVICE_COLUMNS = [
    Column("Name", ".metadata.name"),
    Column("Type", ""),
    Column("Cluster-IP", ""),
    Column("External-IP", ""),
    Column("Port(s)", ""),
    Column("Age", ""),
    Column("Selector", "", priority=1),
]


def service_cells(service: Obj, age: Callable[[str | None], str]) -> list[Any]:
    spec = service.get("spec") or {}
    kind = spec.get("type") or "ClusterIP"
    ports = [
        f"{p.get('port')}:{p['nodePort']}/{p.get('protocol', 'TCP')}"
        if p.get("nodePort")
        else f"{p.get('port')}/{p.get('protocol', 'TCP')}"
        for p in spec.get("ports") or []
    ]
    return [
        service["metadata"]["name"],
        kind,
        spec.get("clusterIP") or "<none>",
        _external_ip(service, kind),
        ",".join(ports) or "<none>",
        age(service["metadata"].get("creationTimestamp")),
        _selector(spec.get("selector")),
    ]


def _external_ip(service: Obj, kind: str) -> str:
    spec = service.get("spec") or {}
    if kind == "ExternalName":
        return str(spec.get("externalName") or "<none>")
    ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    addresses = [i.get("ip") or i.get("hostname") for i in ingress] + list(spec.get("externalIPs") or [])
    if addresses:
        return ",".join(str(a) for a in addresses)
    return "<pending>" if kind == "LoadBalancer" else "<none>"


DEPLOYMENT_COLUMNS = [
    Column("Name", ".metadata.name"),
    Column("Ready", ""),
    Column("Up-to-date", "", "integer"),
    Column("Available", "", "integer"),
    Column("Age", ""),
    Column("Containers", "", priority=1),
    Column("Images", "", priority=1),
    Column("Selector", "", priority=1),
]


def deployment_cells(deployment: Obj, age: Callable[[str | None], str]) -> list[Any]:
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    names, images = _containers(spec)
    return [
        deployment["metadata"]["name"],
        f"{int(status.get('readyReplicas') or 0)}/{int(spec.get('replicas') or 0)}",
        int(status.get("updatedReplicas") or 0),
        int(status.get("availableReplicas") or 0),
        age(deployment["metadata"].get("creationTimestamp")),
        names,
        images,
        _label_selector((spec.get("selector") or {}).get("matchLabels")),
    ]


def _label_selector(labels: dict[str, str] | None) -> str:
    return _selector(labels) if labels else "<none>"


STATEFULSET_COLUMNS = [
    Column("Name", ".metadata.name"),
    Column("Ready", ""),
    Column("Age", ""),
    Column("Containers", "", priority=1),
    Column("Images", "", priority=1),
]


def statefulset_cells(statefulset: Obj, age: Callable[[str | None], str]) -> list[Any]:
    spec, status = statefulset.get("spec") or {}, statefulset.get("status") or {}
    names, images = _containers(spec)
    return [
        statefulset["metadata"]["name"],
        f"{int(status.get('readyReplicas') or 0)}/{int(spec.get('replicas') or 0)}",
        age(statefulset["metadata"].get("creationTimestamp")),
        names,
        images,
    ]


JOB_COLUMNS = [
    Column("Name", ".metadata.name"),
    Column("Status", ""),
    Column("Completions", ""),
    Column("Duration", ""),
    Column("Age", ""),
    Column("Containers", "", priority=1),
    Column("Images", "", priority=1),
    Column("Selector", "", priority=1),
]
# The first condition (True) of these names the Job's status; a Job being deleted is Terminating before
# it is Suspended or on its way to an end.
_JOB_STATES = (("Complete",), ("Failed",), ("Suspended", "FailureTarget", "SuccessCriteriaMet"))


def job_cells(job: Obj, age: Callable[[str | None], str]) -> list[Any]:
    spec, status = job.get("spec") or {}, job.get("status") or {}
    succeeded = int(status.get("succeeded") or 0)
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{spec['completions']}"
    elif int(spec.get("parallelism") or 0) > 1:
        completions = f"{succeeded}/1 of {spec['parallelism']}"
    else:
        completions = f"{succeeded}/1"
    names, images = _containers(spec)
    return [
        job["metadata"]["name"],
        _job_status(job),
        completions,
        _duration(status.get("startTime"), status.get("completionTime")),
        age(job["metadata"].get("creationTimestamp")),
        names,
        images,
        _label_selector((spec.get("selector") or {}).get("matchLabels")),
    ]


def _job_status(job: Obj) -> str:
    true = {
        c.get("type") for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"
    }
    for i, names in enumerate(_JOB_STATES):
        if i == 2 and job["metadata"].get("deletionTimestamp"):
            return "Terminating"
        if found := next((n for n in names if n in true), None):
            return found
    return "Terminating" if job["metadata"].get("deletionTimestamp") else "Running"


def _duration(start: str | None, end: str | None) -> str:
    if not start:
        return ""
    return human_duration((parse_iso(end) if end else time.time()) - parse_iso(start))


def human_duration(span: float) -> str:
    seconds = max(0, int(span))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 48:
        return f"{hours}h"
    return f"{hours // 24}d"


def _pod_cells(pod: Obj, age: Callable[[str | None], str]) -> list[Any]:
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    containers = spec.get("containers") or []
    ready = sum(1 for c in status.get("containerStatuses") or [] if c.get("ready"))
    phase = status.get("phase") or "Pending"
    if pod["metadata"].get("deletionTimestamp"):
        phase = "Terminating"
    elif any(
        c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated"
        for c in status.get("conditions") or []
    ):
        phase = "SchedulingGated"
    restarts = sum(int(c.get("restartCount", 0)) for c in status.get("containerStatuses") or [])
    return [
        pod["metadata"]["name"],
        f"{ready}/{len(containers)}",
        phase,
        restarts,
        age(pod["metadata"].get("creationTimestamp")),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        _readiness_gates(spec, status),
    ]


def _readiness_gates(spec: Obj, status: Obj) -> str:
    gates = [g.get("conditionType") for g in spec.get("readinessGates") or []]
    if not gates:
        return "<none>"
    true = {c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"}
    return f"{sum(1 for g in gates if g in true)}/{len(gates)}"


def _node_cells(node: Obj, age: Callable[[str | None], str]) -> list[Any]:
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    state = "Ready" if ready and ready.get("status") == "True" else "NotReady"
    if (node.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    info = (node.get("status") or {}).get("nodeInfo") or {}
    return [
        node["metadata"]["name"],
        state,
        "<none>",
        age(node["metadata"].get("creationTimestamp")),
        info.get("kubeletVersion", "v1.32.0"),
    ]


_POD_COLUMNS = [
    Column("Name", ".metadata.name"),
    Column("Ready", ""),
    Column("Status", ""),
    Column("Restarts", "", "integer"),
    Column("Age", ""),
    Column("IP", "", priority=1),
    Column("Node", "", priority=1),
    Column("Nominated Node", "", priority=1),
    Column("Readiness Gates", "", priority=1),
]
_NODE_COLUMNS = [
    Column("Name", ""),
    Column("Status", ""),
    Column("Roles", ""),
    Column("Age", ""),
    Column("Version", ""),
]


# The API server's Event printer (pkg/printers/internalversion): what `kubectl get events` shows.
_EVENT_COLUMNS = [
    Column("Last Seen", ""),
    Column("Type", ""),
    Column("Reason", ""),
    Column("Object", ""),
    Column("Subobject", "", priority=1),
    Column("Source", "", priority=1),
    Column("Message", ""),
    Column("First Seen", "", priority=1),
    Column("Count", "", "integer", priority=1),
    Column("Name", "", priority=1),
]


def _event_cells(event: Obj, age: Callable[[str | None], str]) -> list[Any]:
    involved = event.get("involvedObject") or {}
    source = event.get("source") or {}
    last = event.get("lastTimestamp") or event.get("eventTime")
    first = event.get("firstTimestamp") or event.get("eventTime")
    return [
        age(last),
        event.get("type", ""),
        event.get("reason", ""),
        f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
        involved.get("fieldPath", ""),
        ", ".join(v for v in (source.get("component"), source.get("host")) if v),
        str(event.get("message", "")).strip(),
        age(first),
        int(event.get("count") or 1),
        event["metadata"]["name"],
    ]


POD = Printer(_POD_COLUMNS, _pod_cells)
NODE = Printer(_NODE_COLUMNS, _node_cells)
EVENT = Printer(_EVENT_COLUMNS, _event_cells)
SERVICE = Printer(SERVICE_COLUMNS, service_cells)
DEPLOYMENT = Printer(DEPLOYMENT_COLUMNS, deployment_cells)
STATEFULSET = Printer(STATEFULSET_COLUMNS, statefulset_cells)
JOB = Printer(JOB_COLUMNS, job_cells)
