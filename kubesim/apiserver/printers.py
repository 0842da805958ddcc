"""The API server's printers (pkg/printers/internalversion) for Services, Deployments, StatefulSets,
Jobs and storage (kubesim.apiserver.storage_printers): the columns `kubectl get` shows, and with `-o wide` the
ones of priority 1."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kubesim.apiserver import storage_printers
from kubesim.apiserver.records import Obj, parse_iso
from kubesim.apiserver.resources import Column

Cells = Callable[[Obj, Callable[[str | None], str]], list[Any]]


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


PRINTERS: dict[tuple[str, str], tuple[list[Column], Cells]] = {
    ("batch", "jobs"): (JOB_COLUMNS, job_cells),
    ("", "services"): (SERVICE_COLUMNS, service_cells),
    ("apps", "deployments"): (DEPLOYMENT_COLUMNS, deployment_cells),
    ("apps", "statefulsets"): (STATEFULSET_COLUMNS, statefulset_cells),
    ("", "persistentvolumeclaims"): (storage_printers.CLAIM_COLUMNS, storage_printers.claim_cells),
    ("", "persistentvolumes"): (storage_printers.VOLUME_COLUMNS, storage_printers.volume_cells),
    ("storage.k8s.io", "storageclasses"): (storage_printers.CLASS_COLUMNS, storage_printers.class_cells),
}
