"""kubesim's object store: what etcd plus the generic registry do for the API server.

One resourceVersion sequence across every object; a bounded history of events so a watch can resume from a
recent resourceVersion and gets 410 Gone once it is older than the retained window; optimistic concurrency
(409 on a stale resourceVersion); the status subresource kept apart from the main resource; graceful
deletion, finalizers and ownerReference garbage collection.

Everything here runs on the server's event loop thread and never awaits: each operation is atomic with
respect to every other request and every control loop, as a single etcd transaction would be.
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec

from kubesim.apiserver.cascade import Cascade, OwnerIndex
from kubesim.apiserver.errors import not_found
from kubesim.apiserver.event_log import EventLog
from kubesim.apiserver.listing import ListPage, ListQuery, Revisions, list_page
from kubesim.apiserver.records import (
    Event,
    Obj,
    ResourceObjects,
    Stored,
    Watch,
    encode,
)
from kubesim.apiserver.resources import Registry, ResourceType
from kubesim.apiserver.verbs import Verbs


class Store:
    def __init__(self, registry: Registry, history: int = 100_000) -> None:
        self.registry = registry
        self.rv = 1
        # Pod uid -> evictions that went through (201) and began the pod's end: a test's witness that no pod
        # is evicted twice. An eviction of a pod already being deleted (by another hand) ends nothing new and
        # is counted apart.
        self.evictions: dict[str, int] = {}
        self.evictions_of_going: dict[str, int] = {}
        self.buckets: dict[tuple[str, str], ResourceObjects] = {}
        self.log = EventLog(history)
        self.owners = OwnerIndex()
        self.cascade = Cascade(self, self.owners)
        self.verbs = Verbs(self)

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

    def copy_of(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        """A copy of the stored object the caller may change: decoded from its stored encoding, which
        costs a fraction of a deep copy."""
        stored = self.bucket(rt).objects.get((namespace if rt.namespaced else "", name))
        if stored is None:
            raise not_found(rt.plural, name, rt.group)
        copied: Obj = msgspec.json.decode(stored.raw)
        return copied

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
    # Storing and removing, as they are (the write verbs, validated and admitted, are `verbs`)

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
        # Nothing holds `obj` once it is out, and events are read, never written: a copy of its top.
        final = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.rv)}}
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
