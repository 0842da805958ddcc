"""`metadata.managedFields` as the API server records them for an `Update` (a create, update or patch; kubesim
refuses server-side apply): each manager, named by the request's `fieldManager` or its User-Agent up to the
first `/`, owns the fields it last set. A write gives its manager the fields it added or changed and takes
them from every other manager; fields it removed leave every manager; an entry left with no field goes.
Fields are paths as `FieldsV1` writes them: `f:<name>` for a field, `k:{…}` for an item of a keyed list
(by the type's `x-kubernetes-list-map-keys`), `v:<value>` for an item of a set, an atomic list or an
unknown shape as one field; `.` marks a map or list item as set in itself."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from kubesim import builtin_openapi
from kubesim.records import Obj, now_iso
from kubesim.resources import ResourceType

Path = tuple[str, ...]
IGNORED_META = frozenset(
    {
        "name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "selfLink",
        "managedFields", "deletionTimestamp", "deletionGracePeriodSeconds", "generateName",
    }
)  # fmt: skip
MANAGER_LIMIT = 128


def manager_of(field_manager: str | None, user_agent: str | None) -> str:
    """The manager a request is recorded under: its `fieldManager`, else its User-Agent's first part."""
    if field_manager:
        return field_manager
    return (user_agent or "unknown").split("/")[0][:MANAGER_LIMIT] or "unknown"


def record(
    rt: ResourceType, old: Obj | None, new: Obj, *, manager: str, subresource: str | None = None
) -> None:
    """Update `new`'s managedFields for a write by `manager` that turned `old` (None: a create) into it."""
    schema = None if rt.crd else builtin_openapi.schema_of(rt.group, rt.version, rt.kind)
    before = _tracked(rt, old, schema, subresource=subresource) if old is not None else {}
    after = _tracked(rt, new, schema, subresource=subresource)
    changed = {path for path, value in after.items() if before.get(path, _MISSING) != value}
    removed = set(before) - set(after)
    entries = [] if old is None else list(old["metadata"].get("managedFields") or [])
    key = (manager, "Update", rt.api_version, subresource or "")
    kept: list[Obj] = []
    mine: set[Path] = set()
    for entry in entries:
        owned = _paths(entry.get("fieldsV1") or {}) - removed
        if _key(entry) == key:
            mine = owned
            continue
        owned -= changed
        if owned:
            kept.append({**entry, "fieldsV1": _nested(owned)})
    mine |= changed
    if mine:
        entry = {
            "manager": manager,
            "operation": "Update",
            "apiVersion": rt.api_version,
            "time": now_iso(),
            "fieldsType": "FieldsV1",
            "fieldsV1": _nested(mine),
        }
        if subresource:
            entry["subresource"] = subresource
        kept.append(entry)
    if kept:
        new["metadata"]["managedFields"] = kept
    else:
        new["metadata"].pop("managedFields", None)


_MISSING = object()


def _key(entry: Obj) -> tuple[str, str, str, str]:
    return (
        entry.get("manager", ""),
        entry.get("operation", ""),
        entry.get("apiVersion", ""),
        entry.get("subresource", ""),
    )


def _tracked(rt: ResourceType, obj: Obj, schema: Obj | None, *, subresource: str | None) -> dict[Path, Any]:
    """The paths of the fields a write by this route may own, each with its value: a status subresource
    owns only `status`; the main resource of a kind with one owns all but `status`."""
    props = (schema or {}).get("properties") or {}
    found: dict[Path, Any] = {}
    for name, value in obj.items():
        if name in ("apiVersion", "kind"):
            continue
        if rt.status_subresource and (name == "status") != (subresource == "status"):
            continue
        kept = (
            {k: v for k, v in value.items() if k not in IGNORED_META}
            if name == "metadata" and isinstance(value, dict)
            else value
        )
        found.update(_walk((f"f:{name}",), kept, props.get(name)))
    return found


def _walk(path: Path, value: Any, schema: Obj | None) -> Iterator[tuple[Path, Any]]:
    schema = schema or {}
    if isinstance(value, dict) and value and _granular(schema):
        if "additionalProperties" in schema and "properties" not in schema:
            yield (*path, "."), True
        props, extra = schema.get("properties") or {}, schema.get("additionalProperties")
        for name, child in value.items():
            sub = props.get(name) if name in props else (extra if isinstance(extra, dict) else None)
            yield from _walk((*path, f"f:{name}"), child, sub)
        return
    if isinstance(value, list) and value and schema.get("x-kubernetes-list-type") in ("map", "set"):
        keys = schema.get("x-kubernetes-list-map-keys") or []
        items = schema.get("items") or {}
        for item in value:
            if keys and isinstance(item, dict):
                mark = "k:" + json.dumps({k: item.get(k) for k in keys if k in item}, separators=(",", ":"))
                yield (*path, mark, "."), True
                yield from _walk((*path, mark), item, items)
            else:
                yield (*path, "v:" + json.dumps(item, separators=(",", ":"))), True
        return
    yield path, value


def _granular(schema: Obj) -> bool:
    """Whether an object's fields are owned one by one: a struct or map, or a shape no schema tells
    (`x-kubernetes-map-type: atomic` and opaque objects are owned whole)."""
    if schema.get("x-kubernetes-map-type") == "atomic":
        return False
    return "properties" in schema or "additionalProperties" in schema or not schema


def _paths(fields: Obj, prefix: Path = ()) -> set[Path]:
    found: set[Path] = set()
    for key, child in fields.items():
        if isinstance(child, dict) and child:
            found |= _paths(child, (*prefix, key))
        else:
            found.add((*prefix, key))
    return found


def _nested(paths: set[Path]) -> Obj:
    root: Obj = {}
    for path in sorted(paths):
        node = root
        for part in path:
            node = node.setdefault(part, {})
    return root
