"""Server-side printing (`meta.k8s.io/v1 Table`), which `kubectl get` asks for with `as=Table`."""

from __future__ import annotations

import re
import time
from typing import Any

from kubesim.apiserver.printers import human_duration
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


def columns_for(rt: ResourceType) -> list[Column]:
    if rt.printer is not None:
        return rt.printer.columns
    return [Column("Name", ".metadata.name"), *(rt.columns or [AGE])]


def cells_for(rt: ResourceType, obj: Obj) -> list[Any]:
    if rt.printer is not None:
        return rt.printer.cells(obj, age)
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
