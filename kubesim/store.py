"""kubesim's object store: what etcd plus the generic registry do for the API server.

One resourceVersion sequence across every object; a bounded history of events so a watch can resume from a
recent resourceVersion and gets 410 Gone once it is older than the retained window; optimistic concurrency
(409 on a stale resourceVersion); the status subresource kept apart from the main resource; graceful
deletion, finalizers and ownerReference garbage collection.

Everything here runs on the server's event loop thread and never awaits: each operation is atomic with
respect to every other request and every control loop, as a single etcd transaction would be.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from kubesim import write_rules as rules
from kubesim.cascade import Cascade, OwnerIndex
from kubesim.errors import already_exists, bad_request, not_found
from kubesim.event_log import EventLog
from kubesim.listing import ListPage, ListQuery, Revisions, list_page
from kubesim.records import (
    Event,
    Obj,
    ResourceObjects,
    Stored,
    Watch,
    encode,
    now_iso,
)
from kubesim.resources import Registry, ResourceType
from kubesim.schema import FieldValidation

Admission = Callable[[str, ResourceType, "Obj | None", Obj, "str | None"], None]


class Store:
    def __init__(self, registry: Registry | None = None, history: int = 100_000) -> None:
        self.registry = registry or Registry()
        self.rv = 1
        # Pod uid -> evictions that went through (201): a test's witness that no pod is evicted twice.
        self.evictions: dict[str, int] = {}
        self.buckets: dict[tuple[str, str], ResourceObjects] = {}
        self.log = EventLog(history)
        self.admission: list[Admission] = []
        self.owners = OwnerIndex()
        self.cascade = Cascade(self, self.owners)

    # ----------------------------------------------------------------------------------------------------
    # Reads

    def bucket(self, rt: ResourceType) -> ResourceObjects:
        bucket = self.buckets.get(rt.key)
        if bucket is None:
            bucket = self.buckets[rt.key] = ResourceObjects()
        return bucket

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        """The stored object. Callers must not mutate it: writes go through update/patch/put."""
        stored = self.bucket(rt).objects.get((namespace if rt.namespaced else "", name))
        if stored is None:
            raise not_found(rt.plural, name, rt.group)
        return stored.obj

    def find(self, rt: ResourceType, namespace: str, name: str) -> Obj | None:
        stored = self.bucket(rt).objects.get((namespace if rt.namespaced else "", name))
        return stored.obj if stored else None

    def objects(self, rt: ResourceType, namespace: str | None = None) -> Iterator[Obj]:
        for key, stored in list(self.bucket(rt).objects.items()):
            if namespace is None or key[0] == namespace:
                yield stored.obj

    def list_raw(self, rt: ResourceType, query: ListQuery) -> ListPage:
        revisions = Revisions(self.rv, self.log.compacted_rv, self.log.history)
        return list_page(rt, self.bucket(rt), revisions, query=query)

    # ----------------------------------------------------------------------------------------------------
    # Writes

    def create(
        self,
        rt: ResourceType,
        namespace: str,
        obj: Obj,
        *,
        dry_run: bool = False,
        field_validation: FieldValidation = "Warn",
        warnings: list[str] | None = None,
    ) -> Obj:
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})
        meta = rules.metadata_of(obj)
        rules.check_kind(rt, obj)
        rules.decode(rt, obj, field_validation, warnings=warnings)
        if rt.namespaced:
            found = self.find(self.registry.core("namespaces"), "", namespace)
            rules.place_in_namespace(rt, meta, namespace, found=found)
        else:
            meta.pop("namespace", None)
        name = rules.name_new(rt, meta)
        if (namespace if rt.namespaced else "", name) in self.bucket(rt).objects:
            raise already_exists(rt.plural, name, rt.group)
        rules.stamp_new(rt, obj)
        rules.validate(rt, obj)
        for hook in self.admission:
            hook("CREATE", rt, None, obj, None)
        if dry_run:
            return obj
        return self.put(rt, obj, "ADDED")

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
    ) -> Obj:
        current = self.get(rt, namespace, name)
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
        return self._replace(rt, current, obj, subresource=subresource, dry_run=dry_run)

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
    ) -> Obj:
        current = self.get(rt, namespace, name)
        patched = apply(copy.deepcopy(current))
        if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
            raise bad_request("the patch produced an object without metadata")
        rules.decode(rt, patched, field_validation, warnings=warnings)
        rules.check_fresh(rt, name, current, wanted_rv=patched["metadata"].get("resourceVersion"))
        return self._replace(rt, current, patched, subresource=subresource, dry_run=dry_run)

    def _replace(
        self, rt: ResourceType, current: Obj, new: Obj, *, subresource: str | None, dry_run: bool
    ) -> Obj:
        new = rules.replacement(rt, current, new, subresource=subresource)
        if rules.unchanged(current, new):
            return current
        rules.validate(rt, new)
        for hook in self.admission:
            hook("UPDATE", rt, current, new, subresource)
        if dry_run:
            return new
        cur_meta = current["metadata"]
        if (
            cur_meta.get("deletionTimestamp")
            and not new["metadata"].get("finalizers")
            and not cur_meta.get("deletionGracePeriodSeconds")  # no kubelet still to confirm it
        ):
            return self.remove(rt, new)
        return self.put(rt, new, "MODIFIED", old=current)

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
        current = self.get(rt, namespace, name)
        meta = current["metadata"]
        rules.check_preconditions(rt, name, meta, options=options)
        if rt.kind == "Namespace" and rt.group == "":
            return self.cascade.terminate_namespace(rt, current, dry_run)
        grace = rules.grace_period(rt, current, options)
        if dry_run:
            return current
        if rules.propagation_policy(options) == "Orphan":
            self.cascade.orphan(meta["uid"])
        finalizers = list(meta.get("finalizers") or [])
        if meta.get("deletionTimestamp"):
            if grace == 0 and rt.kind == "Pod":  # the kubelet's last word (or a forced delete)
                if not finalizers:
                    return self.remove(rt, current)
                if meta.get("deletionGracePeriodSeconds"):  # stays until its finalizers are removed
                    return self._mark_deleted(rt, current, 0)
            return current
        if grace > 0 or finalizers:
            return self._mark_deleted(rt, current, grace, bump=True)
        return self.remove(rt, current)

    def _mark_deleted(self, rt: ResourceType, current: Obj, grace: int, *, bump: bool = False) -> Obj:
        new = copy.deepcopy(current)
        meta = new["metadata"]
        meta["deletionTimestamp"] = now_iso(time.time() + grace)
        meta["deletionGracePeriodSeconds"] = grace
        if bump:  # the generation, as a graceful deletion's first step does
            meta["generation"] = current["metadata"].get("generation", 1) + 1
        return self.put(rt, new, "MODIFIED", old=current)

    def put(self, rt: ResourceType, obj: Obj, event_type: str, *, old: Obj | None = None) -> Obj:
        """Store `obj` as it is (new resourceVersion, no admission): the control loops' and loader's path."""
        self.rv += 1
        obj.setdefault("apiVersion", rt.api_version)
        obj.setdefault("kind", rt.kind)
        meta = obj["metadata"]
        meta["resourceVersion"] = str(self.rv)
        namespace = meta.get("namespace", "") if rt.namespaced else ""
        raw = encode(obj)
        bucket = self.bucket(rt)
        key = (namespace, meta["name"])
        before = bucket.objects.get(key)
        if old is None and event_type == "MODIFIED" and before is not None:
            old = before.obj  # what a paged list's snapshot shows for a version before this one
        self.owners.update(rt, key, before.obj if before is not None else None, after=obj)
        bucket.put(key, Stored(obj, raw))
        self.log.emit(Event(self.rv, event_type, rt, namespace, obj, raw, old))
        if event_type == "ADDED":
            self.cascade.added(rt, obj)
        return obj

    def remove(self, rt: ResourceType, obj: Obj) -> Obj:
        """Take `obj` out now (no grace, no finalizers), with what its removal sets off."""
        meta = obj["metadata"]
        namespace = meta.get("namespace", "") if rt.namespaced else ""
        removed = self.bucket(rt).pop((namespace, meta["name"]))
        self.owners.update(
            rt, (namespace, meta["name"]), removed.obj if removed is not None else None, after=None
        )
        self.rv += 1
        final = copy.deepcopy(obj)
        final["metadata"]["resourceVersion"] = str(self.rv)
        self.log.emit(Event(self.rv, "DELETED", rt, namespace, final, encode(final), obj))
        self.cascade.removed(rt, final)
        return final

    def drop_resource(self, group: str, plural: str) -> None:
        """A resource no longer served: its objects go, each with a DELETED event, and its type."""
        bucket = self.buckets.pop((group, plural), None)
        rt = next((t for t in self.registry.all() if t.key == (group, plural)), None)
        if bucket and rt:
            for stored in list(bucket.objects.values()):
                self.rv += 1
                namespace = stored.obj["metadata"].get("namespace", "")
                self.log.emit(Event(self.rv, "DELETED", rt, namespace, stored.obj, stored.raw, stored.obj))
        self.registry.remove_group_resource(group, plural)

    # ----------------------------------------------------------------------------------------------------
    # Watch

    def open_watch(self, watch: Watch, resource_version: str | None) -> list[tuple[str, Obj, bytes]]:
        """Register `watch`; return the events it must see first (synthetic ADDED, or the replay)."""
        if resource_version in (None, "", "0"):
            initial = [
                ("ADDED", stored.obj, stored.raw)
                for key, stored in list(self.bucket(watch.rt).objects.items())
                if (watch.namespace is None or key[0] == watch.namespace) and watch.matches(stored.obj)
            ]
        else:
            initial = self.log.replay(watch, resource_version or "")
        self.log.watches.add(watch)
        return initial

    def close_watch(self, watch: Watch) -> None:
        self.log.watches.discard(watch)

    def compact(self) -> None:
        """Forget all history: every watch or continue token from before now gets 410 Gone."""
        self.log.compact(self.rv)
