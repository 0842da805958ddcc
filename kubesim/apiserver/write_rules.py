"""The generic registry's rules for a write, apart from storing it: what a body must say, what the server
owns in metadata, what an update may change, and how long a deletion waits.
"""

from __future__ import annotations

import copy
import random
import re
import uuid
from collections.abc import Mapping
from typing import Any

from kubesim.apiserver import builtin_openapi, builtin_types, times
from kubesim.apiserver.errors import (
    FieldError,
    GoLiteral,
    bad_request,
    conflict,
    forbidden_resource,
    invalid,
    invalid_fields,
    not_found,
)
from kubesim.apiserver.records import Obj, now_iso
from kubesim.apiserver.resources import ResourceType
from kubesim.apiserver.schema import FieldValidation, prune_unknown, report_unknown

DNS_SUBDOMAIN_MAX = 253
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_SERVER_OWNED = ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink")
_IMMUTABLE = (
    "uid",
    "creationTimestamp",
    "namespace",
    "name",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)


def check_kind(rt: ResourceType, obj: Obj) -> None:
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if kind and kind != rt.kind:
        raise bad_request(f"the kind of the object ({kind}) does not match the resource ({rt.kind})")
    if api_version and api_version != rt.api_version:
        raise bad_request(f"the apiVersion of the object ({api_version}) does not match {rt.api_version}")
    obj["kind"] = rt.kind
    obj["apiVersion"] = rt.api_version


def metadata_of(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise bad_request("metadata must be an object")
    return meta


def decode(
    rt: ResourceType, obj: Obj, field_validation: FieldValidation, *, warnings: list[str] | None
) -> None:
    if rt.schema is not None:
        rt.schema.decode(obj, field_validation, [] if warnings is None else warnings)
    elif not rt.crd and (schema := builtin_openapi.schema_of(rt.group, rt.version, rt.kind)) is not None:
        unknown = prune_unknown(obj, schema)
        report_unknown(obj, unknown, field_validation, warnings=[] if warnings is None else warnings)
        builtin_types.check(obj, schema, kind=rt.kind, version=rt.version)
    times.normalize(rt, obj)


def validate(rt: ResourceType, obj: Obj) -> None:
    if rt.schema is not None and (errors := rt.schema.validate(obj)):
        raise invalid_fields(rt.kind, rt.group, obj["metadata"].get("name", ""), errors=errors)


def place_in_namespace(rt: ResourceType, meta: Obj, namespace: str, *, found: Obj | None) -> None:
    """A namespaced object goes into the request's namespace (`found`), which exists and is not being
    terminated; the body may name no other."""
    body_ns = meta.get("namespace")
    if body_ns and body_ns != namespace:
        raise bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    meta["namespace"] = namespace
    if found is None:
        raise not_found("namespaces", namespace)
    if (found.get("status") or {}).get("phase") == "Terminating":  # the NamespaceLifecycle plugin
        raise forbidden_resource(
            rt.plural,
            rt.group,
            meta.get("name") or "",
            why=f"unable to create new content in namespace {namespace} because it is being terminated",
            cause={
                "reason": "NamespaceTerminating",
                "message": f"namespace {namespace} is being terminated",
                "field": "metadata.namespace",
            },
        )


def name_new(rt: ResourceType, meta: Obj) -> str:
    """The new object's name: its own, or its generateName with five random characters."""
    if not meta.get("name"):
        prefix = meta.get("generateName")
        if not prefix:
            raise invalid(
                rt.kind,
                "",
                "metadata.name: Required value: name or generateName is required",
                field="metadata.name",
            )
        meta["name"] = prefix + "".join(random.choices(_NAME_CHARS, k=5))
    name: str = meta["name"]
    if len(name) > DNS_SUBDOMAIN_MAX or not re.match(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", name):
        raise invalid(
            rt.kind,
            name,
            f'metadata.name: Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist '
            "of lower case alphanumeric characters, '-' or '.'",
            field="metadata.name",
        )
    return name


def stamp_new(rt: ResourceType, obj: Obj) -> None:
    """What the server sets on a created object, whatever the body said."""
    meta = obj["metadata"]
    meta.pop("resourceVersion", None)
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = now_iso()
    meta["generation"] = 1
    for name in _SERVER_OWNED:
        meta.pop(name, None)
    if rt.status_subresource and rt.crd:
        obj.pop("status", None)


def require_resource_version(rt: ResourceType, name: str, meta: Obj) -> None:
    """Custom resources allow no unconditional update (the registry's message, uint64 zero in Go's %#v)."""
    if rt.crd and not meta.get("resourceVersion"):
        error = FieldError(
            "FieldValueInvalid",
            "metadata.resourceVersion",
            GoLiteral("0x0"),
            "must be specified for an update",
        )
        raise invalid_fields(rt.kind, rt.group, name, errors=[error])


def check_fresh(rt: ResourceType, name: str, current: Obj, *, wanted_rv: str | None) -> None:
    """Optimistic concurrency: a write naming a resourceVersion must name the current one (409 otherwise)."""
    if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
        raise conflict(
            rt.plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
            group=rt.group,
        )


def replacement(rt: ResourceType, current: Obj, new: Obj, *, subresource: str | None) -> Obj:
    """`new` as stored over `current`: a /status write changes the status only; a write of the main
    resource keeps the server-owned metadata (and the status, where it is a subresource), and bumps the
    generation when the spec changes."""
    cur_meta = current["metadata"]
    new.setdefault("apiVersion", rt.api_version)
    new.setdefault("kind", rt.kind)
    if subresource == "status":
        merged = copy.deepcopy(current)
        if "status" in new:
            merged["status"] = new["status"]
        else:
            merged.pop("status", None)
        new = merged
    else:
        meta = new["metadata"]
        for immutable in _IMMUTABLE:
            if immutable in cur_meta:
                meta[immutable] = cur_meta[immutable]
            else:
                meta.pop(immutable, None)
        meta["generation"] = cur_meta.get("generation", 1)
        if rt.status_subresource:
            if "status" in current:
                new["status"] = current["status"]
            else:
                new.pop("status", None)
        if _spec_of(new) != _spec_of(current) or (
            not rt.status_subresource and new.get("status") != current.get("status")
        ):
            meta["generation"] = cur_meta.get("generation", 1) + 1
    new["metadata"]["resourceVersion"] = cur_meta["resourceVersion"]
    return new


def unchanged(before: Obj, after: Obj) -> bool:
    """A no-op write, which does not bump the resourceVersion (as the API server)."""
    return _without_rv(before) == _without_rv(after)


def check_preconditions(rt: ResourceType, name: str, meta: Obj, *, options: Mapping[str, Any]) -> None:
    pre = options.get("preconditions") or {}
    if pre.get("uid") and pre["uid"] != meta["uid"]:
        raise conflict(
            rt.plural,
            name,
            f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {meta['uid']}",
            group=rt.group,
        )
    if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
        raise conflict(
            rt.plural,
            name,
            f"Precondition failed: ResourceVersion in precondition: "
            f"{pre['resourceVersion']}, ResourceVersion in object meta: {meta['resourceVersion']}",
            group=rt.group,
        )


def grace_period(rt: ResourceType, current: Obj, options: Mapping[str, Any]) -> int:
    """Seconds a deletion waits: a running pod's grace period; nothing for anything else."""
    if not (rt.kind == "Pod" and rt.group == ""):
        return 0
    spec = current.get("spec") or {}
    grace = options.get("gracePeriodSeconds")
    if grace is None:
        grace = spec.get("terminationGracePeriodSeconds", 30)
    # Pods that never ran, or that finished, have nothing to stop.
    if not spec.get("nodeName") or (current.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return 0
    return int(grace)


def propagation_policy(options: Mapping[str, Any]) -> str:
    return str(
        options.get("propagationPolicy") or ("Orphan" if options.get("orphanDependents") else "Background")
    )


def _spec_of(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _without_rv(obj: Obj) -> Obj:
    meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}
