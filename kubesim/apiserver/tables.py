"""Server-side printing (`meta.k8s.io/v1 Table`), which `kubectl get` asks for with `as=Table`."""

from __future__ import annotations

import re
import time
from typing import Any

from kubesim.apiserver.printers import PRINTERS, human_duration
from kubesim.apiserver.records import Obj, parse_iso
from kubesim.apiserver.resources import AGE, Column, ResourceType

_INDEX = re.compile(r"^([^\[]+)\[(\d+)\]$")


def age(timestamp: str | None, now: float | None = None) -> str:
    if not timestamp:
        return "<unknown>"
    return human_duration((now or time.time()) - parse_iso(timestamp))


def json_path(obj: Any, path: str) -> Any:
    """Evaluate the simple JSONPaths printer columns use: `.a.b`, `.a[0].b`."""
    node = obj
    for part in path.lstrip(".").split("."):
        if not part:
            continue
        match = _INDEX.match(part)
        if match:
            node = node.get(match.group(1)) if isinstance(node, dict) else None
            index = int(match.group(2))
            node = node[index] if isinstance(node, list) and index < len(node) else None
        else:
            node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            return None
    return node


def _pod_cells(pod: Obj) -> list[Any]:
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


def _node_cells(node: Obj) -> list[Any]:
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


def _event_cells(event: Obj) -> list[Any]:
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


def columns_for(rt: ResourceType) -> list[Column]:
    if rt.group == "" and rt.plural == "pods":
        return _POD_COLUMNS
    if rt.group == "" and rt.plural == "nodes":
        return _NODE_COLUMNS
    if rt.group == "" and rt.plural == "events":
        return _EVENT_COLUMNS
    if (printer := PRINTERS.get((rt.group, rt.plural))) is not None:
        return printer[0]
    return [Column("Name", ".metadata.name"), *(rt.columns or [AGE])]


def cells_for(rt: ResourceType, obj: Obj) -> list[Any]:
    if rt.group == "" and rt.plural == "pods":
        return _pod_cells(obj)
    if rt.group == "" and rt.plural == "nodes":
        return _node_cells(obj)
    if rt.group == "" and rt.plural == "events":
        return _event_cells(obj)
    if (printer := PRINTERS.get((rt.group, rt.plural))) is not None:
        return printer[1](obj, age)
    cells: list[Any] = [obj["metadata"]["name"]]
    for column in rt.columns or [AGE]:
        value = json_path(obj, column.json_path)
        if column.type == "date" and column.name == "Age":
            cells.append(age(value))
        elif isinstance(value, dict | list):
            cells.append(str(value))
        else:
            cells.append(value)
    return cells


def table(
    rt: ResourceType, objects: list[Obj], resource_version: str, *, with_definitions: bool = True
) -> dict[str, Any]:
    rows = [
        {
            "cells": cells_for(rt, obj),
            "object": {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"],
            },
        }
        for obj in objects
    ]
    body: dict[str, Any] = {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "rows": rows,
    }
    if with_definitions:
        body["columnDefinitions"] = [
            {
                "name": c.name,
                "type": "integer" if c.type == "integer" else "string",
                "format": "name" if c.name == "Name" else "",
                "description": c.description,
                "priority": c.priority,
            }
            for c in columns_for(rt)
        ]
    return body
