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

from kubesim.apiserver import builtin_openapi
from kubesim.apiserver.records import Obj, now_iso
from kubesim.apiserver.resources import ResourceType

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
    props = (schema or {}).get("properties") or {}
    after = _tracked(rt, new, subresource=subresource)
    if old is None:  # a create: the manager owns every field it wrote, the one entry there is
        fields = {f"f:{name}": _fields_of(value, props.get(name)) for name, value in after.items()}
        if fields:
            new["metadata"]["managedFields"] = [
                _entry(rt, manager, subresource=subresource, fields=dict(sorted(fields.items())))
            ]
        return
    before = _tracked(rt, old, subresource=subresource)
    changed: set[Path] = set()
    removed: set[Path] = set()
    for name in before.keys() | after.keys():
        field = (f"f:{name}",)
        was, now = before.get(name, _MISSING), after.get(name, _MISSING)
        _diff(field, was, now, schema=props.get(name), into=(changed, removed))
    entries = list(old["metadata"].get("managedFields") or [])
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
        kept.append(_entry(rt, manager, subresource=subresource, fields=_nested(mine)))
    if kept:
        new["metadata"]["managedFields"] = kept
    else:
        new["metadata"].pop("managedFields", None)


def _entry(rt: ResourceType, manager: str, *, subresource: str | None, fields: Obj) -> Obj:
    entry = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": rt.api_version,
        "time": now_iso(),
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def _fields_of(value: Any, schema: Obj | None) -> Obj:
    """The FieldsV1 of every field of `value`, its keys sorted ({} for a value owned whole): `_children`
    written out for the one pass a create takes."""
    schema = schema or _NO_SCHEMA
    if type(value) is dict and value and _granular(schema):
        out: Obj = {}
        if schema.get(_ITEM) or ("additionalProperties" in schema and "properties" not in schema):
            out["."] = {}
        props, extra = schema.get("properties") or _NO_SCHEMA, schema.get("additionalProperties")
        extra = extra if isinstance(extra, dict) else None
        for name in sorted(value):
            out["f:" + name] = _fields_of(value[name], props.get(name, extra))
        return out
    if type(value) is list and value and schema.get("x-kubernetes-list-type") in ("map", "set"):
        children = _children(value, schema) or {}
        return {key: _fields_of(child, sub) for key, (child, sub) in sorted(children.items())}
    return {}


_MISSING = object()
_NO_SCHEMA: Obj = {}
_ITEM = "kubesim/list-item"  # marks the schema of a keyed list's item, which owns a `.` of its own


def _key(entry: Obj) -> tuple[str, str, str, str]:
    return (
        entry.get("manager", ""),
        entry.get("operation", ""),
        entry.get("apiVersion", ""),
        entry.get("subresource", ""),
    )


def _tracked(rt: ResourceType, obj: Obj, *, subresource: str | None) -> dict[str, Any]:
    """The top-level fields a write by this route may own: a status subresource owns only `status`; the
    main resource of a kind with one owns all but `status`; metadata less what the server sets."""
    found: dict[str, Any] = {}
    for name, value in obj.items():
        if name in ("apiVersion", "kind"):
            continue
        if rt.status_subresource and (name == "status") != (subresource == "status"):
            continue
        found[name] = (
            {k: v for k, v in value.items() if k not in IGNORED_META}
            if name == "metadata" and isinstance(value, dict)
            else value
        )
    return found


def _diff(path: Path, old: Any, new: Any, *, schema: Obj | None, into: tuple[set[Path], set[Path]]) -> None:
    """Add to `into` (changed, removed) the leaves under `path` that the write set anew or took away,
    skipping every subtree it left equal."""
    changed, removed = into
    if old is _MISSING:
        changed.update(_leaves(path, new, schema))
        return
    if new is _MISSING:
        removed.update(_leaves(path, old, schema))
        return
    if old == new:
        return
    before, after = _children(old, schema), _children(new, schema)
    if before is None or after is None:  # a leaf, or a value that changed its shape
        now = set(_leaves(path, new, schema))
        removed.update(set(_leaves(path, old, schema)) - now)
        changed.update(now)
        return
    for key in before.keys() | after.keys():
        was, sub = before.get(key, (_MISSING, None))
        is_now, sub_now = after.get(key, (_MISSING, None))
        _diff((*path, key), was, is_now, schema=sub_now if key in after else sub, into=into)


def _leaves(path: Path, value: Any, schema: Obj | None) -> Iterator[Path]:
    children = _children(value, schema)
    if children is None:
        yield path
        return
    for key, (child, sub) in children.items():
        yield from _leaves((*path, key), child, sub)


def _children(value: Any, schema: Obj | None) -> dict[str, tuple[Any, Obj | None]] | None:
    """A value's fields as FieldsV1 names them, each with its schema; None for a value owned whole."""
    schema = schema or {}
    if isinstance(value, dict) and value and _granular(schema):
        out: dict[str, tuple[Any, Obj | None]] = {}
        if schema.get(_ITEM) or ("additionalProperties" in schema and "properties" not in schema):
            out["."] = (True, None)
        props, extra = schema.get("properties") or {}, schema.get("additionalProperties")
        for name, child in value.items():
            sub = props.get(name) if name in props else (extra if isinstance(extra, dict) else None)
            out[f"f:{name}"] = (child, sub)
        return out
    if isinstance(value, list) and value and schema.get("x-kubernetes-list-type") in ("map", "set"):
        keys = schema.get("x-kubernetes-list-map-keys") or []
        item_schema = {**(schema.get("items") or {}), _ITEM: True}
        out = {}
        for item in value:
            if keys and isinstance(item, dict):
                mark = "k:" + json.dumps({k: item.get(k) for k in keys if k in item}, separators=(",", ":"))
                out[mark] = (item, item_schema)
            else:
                out["v:" + json.dumps(item, separators=(",", ":"))] = (True, None)
        return out
    return None


def _granular(schema: Obj) -> bool:
    """Whether an object's fields are owned one by one: a struct or map, or a shape no schema tells
    (`x-kubernetes-map-type: atomic` and opaque objects are owned whole)."""
    if schema.get("x-kubernetes-map-type") == "atomic":
        return False
    return "properties" in schema or "additionalProperties" in schema or not schema or bool(schema.get(_ITEM))


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
