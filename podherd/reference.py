"""The configuration reference, generated from the config type itself (`podherd config --reference`), so the
documentation's table (docs/reference/configuration.md) cannot drift from what the code accepts."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from podherd import compatibility
from shared.config.model import PodherdConfig

SKIP = frozenset(
    {"apiVersion", "kind", "replica", "migrationController.apiVersion", "migrationController.kind"}
)

# Each field of Koordinator v1.8.0's MigrationControllerArgs as Podherd reads it (by the longest key that
# starts a row's key); a migrationController key not here is Podherd's own.
HONOURED = "honoured"
KOORDINATOR = {
    **dict.fromkeys(
        (
            "evictFailedBarePods",
            "evictAllBarePods",
            "evictLocalStoragePods",
            "evictSystemCriticalPods",
            "ignorePvcPods",
            "labelSelector",
            "namespaces",
            "maxMigratingGlobally",
            "maxMigratingPerNode",
            "maxMigratingPerNamespace",
            "skipCheckExpectedReplicas",
            "defaultJobMode",
            "schedulerNames",
            "evictQPS",
            "evictBurst",
            "evictionPolicy",
            "defaultDeleteOptions",
            "arbitrationArgs.interval",
        ),
        HONOURED,
    ),
}


def koordinator(key: str) -> str:
    """How Podherd reads a migrationController key Koordinator also has ("" for other sections)."""
    if not key.startswith("migrationController."):
        return ""
    field = key.removeprefix("migrationController.")
    noted = [k for k in compatibility.config_keys() if field == k or field.startswith(k + ".")]
    if noted:
        return compatibility.config_note(max(noted, key=len)) or HONOURED
    known = [k for k in KOORDINATOR if field == k or field.startswith(k + ".")]
    return KOORDINATOR[max(known, key=len)] if known else "Podherd's own"


def _type_name(t: msgspec.inspect.Type) -> str:
    if isinstance(t, msgspec.inspect.UnionType):
        names = [_type_name(x) for x in t.types if not isinstance(x, msgspec.inspect.NoneType)]
        optional = any(isinstance(x, msgspec.inspect.NoneType) for x in t.types)
        return " \\| ".join(names) + (" \\| null" if optional else "")
    if isinstance(t, msgspec.inspect.LiteralType):
        return " \\| ".join(f"`{v}`" for v in t.values)
    if isinstance(t, msgspec.inspect.ListType):
        return f"list of {_type_name(t.item_type)}"
    if isinstance(t, msgspec.inspect.StructType):
        return "object"
    if isinstance(t, msgspec.inspect.Metadata):
        return _type_name(t.type)
    return type(t).__name__.removesuffix("Type").lower()


def _struct(t: msgspec.inspect.Type) -> msgspec.inspect.StructType | None:
    if isinstance(t, msgspec.inspect.StructType):
        return t
    if isinstance(t, msgspec.inspect.UnionType):
        for x in t.types:
            if isinstance(x, msgspec.inspect.StructType):
                return x
    return None


def _default(value: Any) -> str:
    if value is msgspec.NODEFAULT:
        return ""
    return f"`{json.dumps(msgspec.to_builtins(value))}`"


def rows(struct: msgspec.inspect.StructType, prefix: str = "", defaults: Any = None) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for field in struct.fields:
        key = f"{prefix}{field.encode_name}"
        if key in SKIP:
            continue
        value = getattr(defaults, field.name, msgspec.NODEFAULT) if defaults is not None else field.default
        nested = _struct(field.type)
        if nested is not None and value is not None and value is not msgspec.NODEFAULT:
            out.extend(rows(nested, f"{key}.", value))
            continue
        env = "PODHERD_" + "__".join(part.upper() for part in key.split("."))
        out.append((f"`{key}`", _type_name(field.type), _default(value), f"`{env}`", koordinator(key)))
        if nested is not None and value is None:  # a section off by default: its keys, once it is given
            out.extend(rows(nested, f"{key}."))
    return out


def config_reference() -> str:
    struct = msgspec.inspect.type_info(PodherdConfig)
    assert isinstance(struct, msgspec.inspect.StructType)
    table = rows(struct, defaults=PodherdConfig(replica="<hostname>-<pid>"))
    lines = ["| key | type | default | environment | Koordinator v1.8.0 |", "|---|---|---|---|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in table]
    lines.append(
        "| `replica` | str | `<hostname>-<pid>` | `PODHERD_REPLICA` | |",
    )
    return "\n".join(lines) + "\n"
