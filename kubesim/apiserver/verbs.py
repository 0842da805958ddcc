"""The API's write verbs over kubesim's store, as the generic registry does them: create, update, patch and
delete, each decoded, defaulted, validated and admitted (the `admission` hooks: kubesim.apiserver.admission)
before the store keeps it, with optimistic concurrency, dry runs, graceful deletion and finalizers. The
control loops write through these too, as a controller writes through the API server."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from kubesim.apiserver import managed_fields
from kubesim.apiserver import write_rules as rules
from kubesim.apiserver.cascade import Cascade
from kubesim.apiserver.errors import already_exists, bad_request
from kubesim.apiserver.records import Obj, ResourceObjects, now_iso
from kubesim.apiserver.resources import Registry, ResourceType
from kubesim.apiserver.schema import FieldValidation


class Store(Protocol):
    """What the verbs use of the store (kubesim.apiserver.store, which makes them)."""

    registry: Registry
    cascade: Cascade

    def bucket(self, rt: ResourceType) -> ResourceObjects: ...

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj: ...

    def copy_of(self, rt: ResourceType, namespace: str, name: str) -> Obj: ...

    def find(self, rt: ResourceType, namespace: str, name: str) -> Obj | None: ...

    def put(self, rt: ResourceType, obj: Obj, event_type: str, *, old: Obj | None = None) -> Obj: ...

    def remove(self, rt: ResourceType, obj: Obj) -> Obj: ...


Admission = Callable[[str, ResourceType, "Obj | None", Obj, "str | None"], None]


class Verbs:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.admission: list[Admission] = []

    def create(
        self,
        rt: ResourceType,
        namespace: str,
        obj: Obj,
        *,
        dry_run: bool = False,
        field_validation: FieldValidation = "Warn",
        warnings: list[str] | None = None,
        decoded: bool = False,
        manager: str | None = None,
    ) -> Obj:
        """`decoded`: made by kubesim's own control loops from objects the decoder already took (a
        template), which it would find nothing to drop or normalise in; the rest of a write applies.
        `manager`: whom managedFields record the write under (a request's; kubesim's loops record none)."""
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})
        meta = rules.metadata_of(obj)
        rules.check_kind(rt, obj)
        if not decoded:
            rules.decode(rt, obj, field_validation, warnings=warnings)
        if rt.namespaced:
            found = self.store.find(self.store.registry.core("namespaces"), "", namespace)
            rules.place_in_namespace(rt, meta, namespace, found=found)
        else:
            meta.pop("namespace", None)
        name = rules.name_new(rt, meta)
        if (namespace if rt.namespaced else "", name) in self.store.bucket(rt).objects:
            raise already_exists(rt.plural, name, rt.group)
        rules.stamp_new(rt, obj)
        rules.validate(rt, obj)
        for hook in self.admission:
            hook("CREATE", rt, None, obj, None)
        if manager:
            managed_fields.record(rt, None, obj, manager=manager)
        if dry_run:
            return obj
        return self.store.put(rt, obj, "ADDED")

    def update(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        *,
        obj: Obj,
        subresource: str | None = None,
        dry_run: bool = False,
        field_validation: FieldValidation = "Warn",
        warnings: list[str] | None = None,
        manager: str | None = None,
    ) -> Obj:
        current = self.store.get(rt, namespace, name)
        obj = copy.deepcopy(obj)
        meta = rules.metadata_of(obj)
        if meta.get("name") not in (None, name):
            raise bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        rules.check_kind(rt, obj)
        rules.decode(rt, obj, field_validation, warnings=warnings)
        rules.require_resource_version(rt, name, meta)
        rules.check_fresh(rt, name, current, wanted_rv=meta.get("resourceVersion"))
        return self._replace(rt, current, obj, subresource=subresource, dry_run=dry_run, manager=manager)

    def patch(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        *,
        apply: Callable[[Obj], Obj],
        subresource: str | None = None,
        dry_run: bool = False,
        field_validation: FieldValidation = "Warn",
        warnings: list[str] | None = None,
        manager: str | None = None,
    ) -> Obj:
        current = self.store.get(rt, namespace, name)
        patched = apply(self.store.copy_of(rt, namespace, name))
        if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
            raise bad_request("the patch produced an object without metadata")
        rules.decode(rt, patched, field_validation, warnings=warnings)
        rules.check_fresh(rt, name, current, wanted_rv=patched["metadata"].get("resourceVersion"))
        return self._replace(rt, current, patched, subresource=subresource, dry_run=dry_run, manager=manager)

    def _replace(
        self,
        rt: ResourceType,
        current: Obj,
        new: Obj,
        *,
        subresource: str | None,
        dry_run: bool,
        manager: str | None = None,
    ) -> Obj:
        new = rules.replacement(rt, current, new, subresource=subresource)
        kept = current["metadata"].get("managedFields")
        if kept is not None and new["metadata"].get("managedFields") is None:
            new["metadata"]["managedFields"] = kept  # a write that leaves them out keeps them
        if rules.unchanged(current, new):
            return current
        rules.validate(rt, new)
        for hook in self.admission:
            hook("UPDATE", rt, current, new, subresource)
        if manager:
            managed_fields.record(rt, current, new, manager=manager, subresource=subresource)
        if dry_run:
            return new
        cur_meta = current["metadata"]
        if (
            cur_meta.get("deletionTimestamp")
            and not new["metadata"].get("finalizers")
            and not cur_meta.get("deletionGracePeriodSeconds")  # no kubelet still to confirm it
        ):
            return self.store.remove(rt, new)
        return self.store.put(rt, new, "MODIFIED", old=current)

    def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        *,
        options: Mapping[str, Any] | None = None,
        dry_run: bool = False,
    ) -> Obj:
        options = options or {}
        current = self.store.get(rt, namespace, name)
        meta = current["metadata"]
        rules.check_preconditions(rt, name, meta, options=options)
        if rt.kind == "Namespace" and rt.group == "":
            return self.store.cascade.terminate_namespace(rt, current, dry_run)
        grace = rules.grace_period(rt, current, options)
        if dry_run:
            return current
        if rules.propagation_policy(options) == "Orphan":
            self.store.cascade.orphan(meta["uid"])
        finalizers = list(meta.get("finalizers") or [])
        if meta.get("deletionTimestamp"):
            if grace == 0 and rt.kind == "Pod":  # the kubelet's last word (or a forced delete)
                if not finalizers:
                    return self.store.remove(rt, current)
                if meta.get("deletionGracePeriodSeconds"):  # stays until its finalizers are removed
                    return self._mark_deleted(rt, current, 0)
            return current
        if grace > 0 or finalizers:
            return self._mark_deleted(rt, current, grace, bump=True)
        return self.store.remove(rt, current)

    def _mark_deleted(self, rt: ResourceType, current: Obj, grace: int, *, bump: bool = False) -> Obj:
        new = copy.deepcopy(current)
        meta = new["metadata"]
        meta["deletionTimestamp"] = now_iso(time.time() + grace)
        meta["deletionGracePeriodSeconds"] = grace
        if bump:  # the generation, as a graceful deletion's first step does
            meta["generation"] = current["metadata"].get("generation", 1) + 1
        return self.store.put(rt, new, "MODIFIED", old=current)
