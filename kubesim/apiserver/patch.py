"""The three PATCH kinds: JSON merge patch (RFC 7386), strategic merge patch (by the type's schema), JSON
patch (RFC 6902). Pure functions over plain JSON values; the input is never mutated."""

from __future__ import annotations

import copy
from typing import Any

from kubesim.apiserver.builtin_openapi import PATCH_MERGE_KEY, PATCH_STRATEGY
from kubesim.apiserver.errors import ApiError, bad_request


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any, schema: Schema | None) -> Any:
    """`schema`: the type's OpenAPI schema ($refs resolved), whose `x-kubernetes-patch-strategy` and
    `-merge-key` say which lists merge and by what; every other list (and every list below a field the
    schema does not describe) is replaced."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            if key.startswith("$setElementOrder/") or key == "$retainKeys":
                continue
            if key.startswith("$deleteFromPrimitiveList/"):
                field = key.split("/", 1)[1]
                result[field] = [v for v in result.get(field) or [] if v not in value]
            continue
        field = _field(schema, key)
        strategy, merge_key = _list_rule(field)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and merge_key and isinstance(result.get(key), list):
            result[key] = _merge_list(result[key], value, merge_key, items=(field or {}).get("items"))
        elif isinstance(value, list) and strategy and isinstance(result.get(key), list):
            result[key] = list(dict.fromkeys([*result[key], *value]))
        elif isinstance(value, dict):
            result[key] = strategic_merge_patch(result.get(key), value, field)
        else:
            result[key] = copy.deepcopy(value)
    return result


Schema = dict[str, Any]


def _field(schema: Schema | None, key: str) -> Schema | None:
    if schema is None:
        return None
    found = (schema.get("properties") or {}).get(key) or schema.get("additionalProperties")
    return found if isinstance(found, dict) else {}


def _list_rule(field: Schema | None) -> tuple[bool, str | None]:
    """Whether a list merges (rather than replaces), and its merge key (None: merged as a set)."""
    strategy = "merge" in str((field or {}).get(PATCH_STRATEGY) or "").split(",")
    return strategy, (field or {}).get(PATCH_MERGE_KEY) if strategy else None


def _merge_list(current: list[Any], patch: list[Any], key: str, *, items: Schema | None = None) -> list[Any]:
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and i.get("$patch") == "replace")]
    merged = [copy.deepcopy(item) for item in current]
    index = {item.get(key): i for i, item in enumerate(merged) if isinstance(item, dict)}
    deleted: set[Any] = set()
    for item in patch:
        if not isinstance(item, dict):
            merged.append(copy.deepcopy(item))
            continue
        ident = item.get(key)
        if item.get("$patch") == "delete":
            deleted.add(ident)
            continue
        if ident in index:
            merged[index[ident]] = strategic_merge_patch(merged[index[ident]], item, items)
        else:
            index[ident] = len(merged)
            merged.append(strategic_merge_patch({}, item, items))
    return [item for item in merged if not (isinstance(item, dict) and item.get(key) in deleted)]


def json_patch(target: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise bad_request("json patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request(f"invalid json patch operation: {op!r}")
        kind, path = op["op"], op["path"]
        if kind == "add":
            doc = _set(doc, path, copy.deepcopy(op.get("value")), insert=True)
        elif kind == "replace":
            _get(doc, path)
            doc = _set(doc, path, copy.deepcopy(op.get("value")), insert=False)
        elif kind == "remove":
            doc = _remove(doc, path)
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise ApiError(422, "Invalid", f"the json patch test failed at {path}")
        elif kind in ("move", "copy"):
            value = copy.deepcopy(_get(doc, op.get("from", "")))
            if kind == "move":
                doc = _remove(doc, op["from"])
            doc = _set(doc, path, value, insert=True)
        else:
            raise bad_request(f"unknown json patch operation {kind!r}")
    return doc


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"invalid json pointer {path!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _pointer(tokens: list[str]) -> str:
    return "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in tokens)


def _get(doc: Any, path: str) -> Any:
    node = doc
    for token in _tokens(path):
        if isinstance(node, list):
            try:
                node = node[int(token)]
            except (ValueError, IndexError) as exc:
                raise ApiError(422, "Invalid", f"json patch path not found: {path}") from exc
        elif isinstance(node, dict) and token in node:
            node = node[token]
        else:
            raise ApiError(422, "Invalid", f"json patch path not found: {path}")
    return node


def _set(doc: Any, path: str, value: Any, *, insert: bool) -> Any:
    tokens = _tokens(path)
    if not tokens:
        return value
    parent = _get(doc, _pointer(tokens[:-1]))
    last = tokens[-1]
    if isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            index = int(last)
            if insert:
                parent.insert(index, value)
            else:
                parent[index] = value
    elif isinstance(parent, dict):
        parent[last] = value
    else:
        raise ApiError(422, "Invalid", f"json patch cannot set {path}")
    return doc


def _remove(doc: Any, path: str) -> Any:
    tokens = _tokens(path)
    parent = _get(doc, _pointer(tokens[:-1]))
    last = tokens[-1]
    try:
        if isinstance(parent, list):
            del parent[int(last)]
        else:
            del parent[last]
    except (KeyError, IndexError, ValueError) as exc:
        raise ApiError(422, "Invalid", f"json patch path not found: {path}") from exc
    return doc
