"""kubesim's object store: what etcd plus the generic registry do for the API server.

One resourceVersion sequence across every object; a bounded history of events so a watch can resume from a
recent resourceVersion and gets 410 Gone once it is older than the retained window; optimistic concurrency
(409 on a stale resourceVersion); the status subresource kept apart from the main resource; graceful
deletion, finalizers and ownerReference garbage collection.

Everything here runs on the server's event loop thread and never awaits: each operation is atomic with
respect to every other request and every control loop, as a single etcd transaction would be.
"""

from __future__ import annotations

import base64
import bisect
import copy
import itertools
import json
import random
import re
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec

from kubesim.errors import (
    FieldError,
    GoLiteral,
    already_exists,
    bad_request,
    conflict,
    forbidden_resource,
    gone,
    invalid,
    invalid_fields,
    not_found,
)
from kubesim.resources import Registry, ResourceType, from_crd
from kubesim.schema import FieldValidation
from kubesim.selectors import LabelMatcher, parse_field_selector, parse_label_selector

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects
Admission = Callable[[str, ResourceType, "Obj | None", Obj, "str | None"], None]

_encode = msgspec.json.Encoder().encode
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
DNS_SUBDOMAIN_MAX = 253


def now_iso(at: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if at is None else at, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


@dataclass(slots=True)
class Stored:
    obj: Obj
    raw: bytes


@dataclass(slots=True)
class Event:
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    rt: ResourceType
    namespace: str
    obj: Obj
    raw: bytes
    old: Obj | None = None


@dataclass(eq=False)
class Watch:
    """One open watch: its filters and a queue of encoded events for the HTTP handler to stream."""

    rt: ResourceType
    namespace: str | None
    labels: LabelMatcher | None
    fields: Callable[[Mapping[str, Any]], bool] | None
    queue: Any = None  # asyncio.Queue[bytes | None], created by the server

    def matches(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        if self.namespace and obj["metadata"].get("namespace", "") != self.namespace:
            return False
        if self.labels and not self.labels(obj["metadata"].get("labels") or {}):
            return False
        return not (self.fields and not self.fields(obj))


@dataclass
class ResourceObjects:
    """The objects of one resource, with a sorted key list for paginated lists (rebuilt lazily)."""

    objects: dict[Key, Stored] = field(default_factory=dict)
    _sorted: list[Key] | None = None

    def sorted_keys(self) -> list[Key]:
        if self._sorted is None:
            self._sorted = sorted(self.objects)
        return self._sorted

    def put(self, key: Key, stored: Stored) -> None:
        if key not in self.objects:
            self._sorted = None
        self.objects[key] = stored

    def pop(self, key: Key) -> Stored | None:
        self._sorted = None
        return self.objects.pop(key, None)


class Store:
    def __init__(self, registry: Registry | None = None, history: int = 100_000) -> None:
        self.registry = registry or Registry()
        self.rv = 1
        # Pod uid -> evictions that went through (201): a test's witness that no pod is evicted twice.
        self.evictions: dict[str, int] = {}
        self.compacted_rv = 1  # a watch may resume from any rv >= this
        self.buckets: dict[tuple[str, str], ResourceObjects] = {}
        self.history: deque[Event] = deque(maxlen=history)
        self.watches: set[Watch] = set()
        self.observers: list[Callable[[Event], None]] = []
        self.admission: list[Admission] = []
        self.owned: dict[str, set[tuple[tuple[str, str], Key]]] = {}

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

    def list_raw(
        self,
        rt: ResourceType,
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None,
        limit: int | None,
        continue_token: str | None,
    ) -> tuple[list[bytes], str, str | None, int | None]:
        """(encoded items, list resourceVersion, continue token, remaining item count)."""
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, rt.fields)
        bucket = self.bucket(rt)
        list_rv = self.rv
        keys = bucket.sorted_keys()
        start = 0
        at: Callable[[Key], Stored | None] = bucket.objects.get
        if continue_token:
            token_rv, after = _decode_continue(continue_token)
            if 0 <= token_rv < self.compacted_rv:
                # The first page's revision is compacted: the rest only from the latest state, if asked.
                raise gone(_INCONSISTENT_CONTINUE, _encode_continue(-1, after))
            if token_rv >= 0:
                # Later pages show the first page's snapshot, as etcd serves them at its revision.
                list_rv = token_rv
                keys, at = self._snapshot(rt, bucket, token_rv)
            start = bisect.bisect_right(keys, after)
        items: list[bytes] = []
        last: Key | None = None
        index = start
        for index in range(start, len(keys)):
            key = keys[index]
            if namespace and key[0] != namespace:
                continue
            stored = at(key)
            if stored is None:
                continue
            meta = stored.obj["metadata"]
            if labels and not labels(meta.get("labels") or {}):
                continue
            if fields and not fields(stored.obj):
                continue
            items.append(stored.raw)
            last = key
            if limit and len(items) >= limit:
                break
        else:
            index = len(keys)
        token = None
        remaining = None
        if limit and last is not None and len(items) >= limit and index + 1 < len(keys):
            token = _encode_continue(list_rv, last)
            if not labels and not fields:
                remaining = sum(
                    1 for k in keys[index + 1 :] if (not namespace or k[0] == namespace) and at(k) is not None
                )
        return items, str(list_rv), token, remaining

    def _snapshot(
        self, rt: ResourceType, bucket: ResourceObjects, rv: int
    ) -> tuple[list[Key], Callable[[Key], Stored | None]]:
        """The resource's keys and objects as they were at `rv`: today's, with every later change undone."""
        then: dict[Key, Stored | None] = {}
        first_later = bisect.bisect_right(self.history, rv, key=lambda event: event.rv)
        for event in itertools.islice(self.history, first_later, None):
            if event.rt.key != rt.key:
                continue
            key = (event.namespace, event.obj["metadata"]["name"])
            if key not in then:  # the first change after `rv` knows what the object was at `rv`
                old = event.old if event.type != "ADDED" else None
                then[key] = Stored(old, _encode(old)) if old is not None else None
        if not then:
            return bucket.sorted_keys(), bucket.objects.get
        keys = sorted(set(bucket.sorted_keys()).union(then))

        def at(key: Key) -> Stored | None:
            return then[key] if key in then else bucket.objects.get(key)

        return keys, at

    # ----------------------------------------------------------------------------------------------------
    # Writes

    def create(
        self,
        rt: ResourceType,
        namespace: str,
        obj: Obj,
        dry_run: bool = False,
        field_validation: FieldValidation = "Warn",
        warnings: list[str] | None = None,
    ) -> Obj:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        self._check_kind(rt, obj)
        _decode(rt, obj, field_validation, warnings)
        if rt.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and body_ns != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = namespace
            found = self.find(self.registry.core("namespaces"), "", namespace)
            if found is None:
                raise not_found("namespaces", namespace)
            if (found.get("status") or {}).get("phase") == "Terminating":  # the NamespaceLifecycle plugin
                raise forbidden_resource(
                    rt.plural,
                    rt.group,
                    meta.get("name") or "",
                    f"unable to create new content in namespace {namespace} because it is being terminated",
                    cause={
                        "reason": "NamespaceTerminating",
                        "message": f"namespace {namespace} is being terminated",
                        "field": "metadata.namespace",
                    },
                )
        else:
            meta.pop("namespace", None)
        if not meta.get("name"):
            prefix = meta.get("generateName")
            if not prefix:
                raise invalid(
                    rt.kind,
                    "",
                    "metadata.name: Required value: name or generateName is required",
                    "metadata.name",
                )
            meta["name"] = prefix + "".join(random.choices(_NAME_CHARS, k=5))
        _validate_name(rt, meta["name"])
        key = (namespace if rt.namespaced else "", meta["name"])
        if key in self.bucket(rt).objects:
            raise already_exists(rt.plural, meta["name"], rt.group)
        meta.pop("resourceVersion", None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_iso()
        meta["generation"] = 1
        for field_name in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"):
            meta.pop(field_name, None)
        if rt.status_subresource and rt.crd:
            obj.pop("status", None)
        _validate(rt, obj)
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
        obj: Obj,
        subresource: str | None = None,
        dry_run: bool = False,
        field_validation: FieldValidation = "Warn",
        warnings: list[str] | None = None,
    ) -> Obj:
        current = self.get(rt, namespace, name)
        obj = copy.deepcopy(obj)
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if meta.get("name") not in (None, name):
            raise bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        self._check_kind(rt, obj)
        _decode(rt, obj, field_validation, warnings)
        wanted_rv = meta.get("resourceVersion")
        if rt.crd and not wanted_rv:  # custom resources allow no unconditional update
            # The registry's message, its uint64 zero printed with Go's %#v.
            zero = GoLiteral("0x0")
            error = FieldError(
                "FieldValueInvalid", "metadata.resourceVersion", zero, "must be specified for an update"
            )
            raise invalid_fields(rt.kind, rt.group, name, [error])
        _check_fresh(rt, name, current, wanted_rv)
        return self._replace(rt, current, obj, subresource, dry_run)

    def patch(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
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
        _decode(rt, patched, field_validation, warnings)
        wanted_rv = patched["metadata"].get("resourceVersion")
        _check_fresh(rt, name, current, wanted_rv)
        return self._replace(rt, current, patched, subresource, dry_run)

    def _replace(
        self, rt: ResourceType, current: Obj, new: Obj, subresource: str | None, dry_run: bool
    ) -> Obj:
        cur_meta = current["metadata"]
        new.setdefault("apiVersion", rt.api_version)
        new.setdefault("kind", rt.kind)
        meta = new["metadata"]
        if subresource == "status":
            # /status writes change the status only.
            merged = copy.deepcopy(current)
            if "status" in new:
                merged["status"] = new["status"]
            else:
                merged.pop("status", None)
            new = merged
            meta = new["metadata"]
        else:
            # Immutable and server-owned metadata.
            for immutable in (
                "uid",
                "creationTimestamp",
                "namespace",
                "name",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
            ):
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
        meta["resourceVersion"] = cur_meta["resourceVersion"]
        if _without_rv(new) == _without_rv(current):
            return current  # a no-op write does not bump the resourceVersion (as the API server)
        _validate(rt, new)
        for hook in self.admission:
            hook("UPDATE", rt, current, new, subresource)
        if dry_run:
            return new
        if (
            cur_meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and not cur_meta.get("deletionGracePeriodSeconds")  # no kubelet still to confirm it
        ):
            return self._remove(rt, new)
        return self.put(rt, new, "MODIFIED", old=current)

    def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        options: Mapping[str, Any] | None = None,
        dry_run: bool = False,
    ) -> Obj:
        options = options or {}
        current = self.get(rt, namespace, name)
        meta = current["metadata"]
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != meta["uid"]:
            raise conflict(
                rt.plural,
                name,
                f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {meta['uid']}",
                rt.group,
            )
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
            raise conflict(
                rt.plural,
                name,
                f"Precondition failed: ResourceVersion in precondition: "
                f"{pre['resourceVersion']}, ResourceVersion in object meta: {meta['resourceVersion']}",
                rt.group,
            )
        if rt.kind == "Namespace" and rt.group == "":
            return self._terminate_namespace(rt, current, dry_run)
        grace = options.get("gracePeriodSeconds")
        if rt.kind == "Pod" and rt.group == "":
            if grace is None:
                grace = (current.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
            # Pods that never ran, or that finished, have nothing to stop.
            phase = (current.get("status") or {}).get("phase")
            if not (current.get("spec") or {}).get("nodeName") or phase in ("Succeeded", "Failed"):
                grace = 0
        else:
            grace = 0
        propagation = options.get("propagationPolicy") or (
            "Orphan" if options.get("orphanDependents") else "Background"
        )
        if dry_run:
            return current
        if propagation == "Orphan":
            self._orphan_dependents(meta["uid"])
        finalizers = list(meta.get("finalizers") or [])
        if meta.get("deletionTimestamp"):
            if grace == 0 and rt.kind == "Pod":  # the kubelet's last word (or a forced delete)
                if not finalizers:
                    return self._remove(rt, current)
                if meta.get("deletionGracePeriodSeconds"):  # stays until its finalizers are removed
                    new = copy.deepcopy(current)
                    new["metadata"]["deletionTimestamp"] = now_iso()
                    new["metadata"]["deletionGracePeriodSeconds"] = 0
                    return self.put(rt, new, "MODIFIED", old=current)
            return current
        if grace > 0 or finalizers:
            new = copy.deepcopy(current)
            new["metadata"]["deletionTimestamp"] = now_iso(time.time() + grace)
            new["metadata"]["deletionGracePeriodSeconds"] = grace
            new["metadata"]["generation"] = meta.get("generation", 1) + 1
            return self.put(rt, new, "MODIFIED", old=current)
        return self._remove(rt, current)

    def put(self, rt: ResourceType, obj: Obj, event_type: str, old: Obj | None = None) -> Obj:
        """Store `obj` as it is (new resourceVersion, no admission): the control loops' and loader's path."""
        self.rv += 1
        obj.setdefault("apiVersion", rt.api_version)
        obj.setdefault("kind", rt.kind)
        meta = obj["metadata"]
        meta["resourceVersion"] = str(self.rv)
        namespace = meta.get("namespace", "") if rt.namespaced else ""
        raw = _encode(obj)
        bucket = self.bucket(rt)
        key = (namespace, meta["name"])
        before = bucket.objects.get(key)
        if old is None and event_type == "MODIFIED" and before is not None:
            old = before.obj  # what a paged list's snapshot shows for a version before this one
        self._index_owners(rt, key, before.obj if before is not None else None, obj)
        bucket.put(key, Stored(obj, raw))
        self._emit(Event(self.rv, event_type, rt, namespace, obj, raw, old))
        if rt.kind == "CustomResourceDefinition" and event_type == "ADDED":
            self._establish_crd(rt, obj)
        return obj

    def _remove(self, rt: ResourceType, obj: Obj) -> Obj:
        meta = obj["metadata"]
        namespace = meta.get("namespace", "") if rt.namespaced else ""
        gone = self.bucket(rt).pop((namespace, meta["name"]))
        self._index_owners(rt, (namespace, meta["name"]), gone.obj if gone is not None else None, None)
        self.rv += 1
        final = copy.deepcopy(obj)
        final["metadata"]["resourceVersion"] = str(self.rv)
        self._emit(Event(self.rv, "DELETED", rt, namespace, final, _encode(final), obj))
        if rt.kind == "CustomResourceDefinition":
            self._drop_crd(final)
        elif rt.kind == "Namespace" and rt.group == "":
            self._drop_namespace(meta["name"])
        self._collect_dependents(meta["uid"])
        return final

    # ----------------------------------------------------------------------------------------------------
    # Watch

    def open_watch(self, watch: Watch, resource_version: str | None) -> list[tuple[str, Obj, bytes]]:
        """Register `watch`; return the events it must see first (synthetic ADDED, or the replay)."""
        initial: list[tuple[str, Obj, bytes]] = []
        if resource_version in (None, "", "0"):
            for key, stored in list(self.bucket(watch.rt).objects.items()):
                if (watch.namespace is None or key[0] == watch.namespace) and watch.matches(stored.obj):
                    initial.append(("ADDED", stored.obj, stored.raw))
        else:
            try:
                start = int(resource_version or 0)
            except ValueError:
                raise bad_request(f"invalid resourceVersion {resource_version!r}") from None
            if start < self.compacted_rv:
                raise gone(f"too old resource version: {start} ({self.compacted_rv})")
            for event in self.history:
                if event.rv > start and event.rt.key == watch.rt.key:
                    translated = translate(watch, event)
                    if translated:
                        initial.append((translated, event.obj, event.raw))
        self.watches.add(watch)
        return initial

    def close_watch(self, watch: Watch) -> None:
        self.watches.discard(watch)

    def compact(self) -> None:
        """Forget all history: every watch or continue token from before now gets 410 Gone."""
        self.history.clear()
        self.compacted_rv = self.rv

    def _emit(self, event: Event) -> None:
        if len(self.history) == self.history.maxlen:
            self.compacted_rv = self.history[0].rv
        self.history.append(event)
        for watch in list(self.watches):
            if watch.rt.key != event.rt.key or watch.queue is None:
                continue
            translated = translate(watch, event)
            if translated:
                watch.queue.put_nowait(encode_event(translated, event.raw))
        for observer in self.observers:
            observer(event)

    # ----------------------------------------------------------------------------------------------------
    # Custom resources, namespaces and garbage collection

    def _establish_crd(self, rt: ResourceType, crd: Obj) -> None:
        try:
            types = from_crd(crd)
        except (KeyError, TypeError) as exc:
            raise invalid(
                "CustomResourceDefinition", crd["metadata"]["name"], f"spec is incomplete: {exc}"
            ) from exc
        for new_type in types:
            self.registry.add(new_type)
        status_obj = copy.deepcopy(crd)
        names = (crd.get("spec") or {}).get("names") or {}
        status_obj["status"] = {
            "acceptedNames": names,
            "storedVersions": [v["name"] for v in crd["spec"].get("versions", []) if v.get("storage")],
            "conditions": [
                {
                    "type": "NamesAccepted",
                    "status": "True",
                    "reason": "NoConflicts",
                    "lastTransitionTime": now_iso(),
                },
                {
                    "type": "Established",
                    "status": "True",
                    "reason": "InitialNamesAccepted",
                    "lastTransitionTime": now_iso(),
                },
            ],
        }
        self.put(rt, status_obj, "MODIFIED", old=crd)

    def _drop_crd(self, crd: Obj) -> None:
        spec = crd.get("spec") or {}
        group, plural = spec.get("group", ""), (spec.get("names") or {}).get("plural", "")
        bucket = self.buckets.pop((group, plural), None)
        rt = next((t for t in self.registry.all() if t.key == (group, plural)), None)
        if bucket and rt:
            for stored in list(bucket.objects.values()):
                self.rv += 1
                self._emit(
                    Event(
                        self.rv,
                        "DELETED",
                        rt,
                        stored.obj["metadata"].get("namespace", ""),
                        stored.obj,
                        stored.raw,
                        stored.obj,
                    )
                )
        self.registry.remove_group_resource(group, plural)

    def _terminate_namespace(self, rt: ResourceType, namespace: Obj, dry_run: bool) -> Obj:
        """A deleted namespace turns Terminating; the namespace controller deletes its content, then it."""
        name = namespace["metadata"]["name"]
        if name in IMMORTAL_NAMESPACES:
            raise forbidden_resource(rt.plural, rt.group, name, "this namespace may not be deleted")
        if namespace["metadata"].get("deletionTimestamp") or dry_run:
            return namespace
        new = copy.deepcopy(namespace)
        new["metadata"]["deletionTimestamp"] = now_iso()
        new["metadata"]["deletionGracePeriodSeconds"] = 0
        new.setdefault("status", {})["phase"] = "Terminating"
        return self.put(rt, new, "MODIFIED", old=namespace)

    def finish_namespace(self, namespace: Obj) -> None:
        """The namespace controller's last step, once the content is gone: the namespace goes too."""
        rt = self.registry.get("", "v1", "namespaces")
        assert rt is not None
        self._remove(rt, namespace)

    def _drop_namespace(self, namespace: str) -> None:
        for rt in self.registry.all():
            if not rt.namespaced:
                continue
            for obj in list(self.objects(rt, namespace)):
                self._remove(rt, obj)

    def _index_owners(self, rt: ResourceType, key: Key, before: Obj | None, after: Obj | None) -> None:
        """Keep `owned`: owner uid -> the objects whose ownerReferences name it (the collector's graph)."""
        was, now = _owner_uids(before), _owner_uids(after)
        for uid in was - now:
            dependents = self.owned.get(uid)
            if dependents is not None:
                dependents.discard((rt.key, key))
                if not dependents:
                    del self.owned[uid]
        for uid in now - was:
            self.owned.setdefault(uid, set()).add((rt.key, key))

    def _dependents(self, owner_uid: str) -> Iterable[tuple[ResourceType, Obj]]:
        types = {rt.key: rt for rt in self.registry.all()}
        for type_key, key in sorted(self.owned.get(owner_uid, ())):
            rt = types.get(type_key)
            bucket = self.buckets.get(type_key)
            stored = bucket.objects.get(key) if bucket is not None else None
            if rt is not None and stored is not None:
                yield rt, stored.obj

    def _collect_dependents(self, owner_uid: str) -> None:
        for rt, obj in list(self._dependents(owner_uid)):
            meta = obj["metadata"]
            if self.find(rt, meta.get("namespace", ""), meta["name"]) is not None:
                self.delete(rt, meta.get("namespace", ""), meta["name"], {"propagationPolicy": "Background"})

    def _orphan_dependents(self, owner_uid: str) -> None:
        for rt, obj in list(self._dependents(owner_uid)):
            new = copy.deepcopy(obj)
            new["metadata"]["ownerReferences"] = [
                r for r in new["metadata"].get("ownerReferences") or () if r.get("uid") != owner_uid
            ]
            self.put(rt, new, "MODIFIED", old=obj)

    @staticmethod
    def _check_kind(rt: ResourceType, obj: Obj) -> None:
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        if kind and kind != rt.kind:
            raise bad_request(f"the kind of the object ({kind}) does not match the resource ({rt.kind})")
        if api_version and api_version != rt.api_version:
            raise bad_request(f"the apiVersion of the object ({api_version}) does not match {rt.api_version}")
        obj["kind"] = rt.kind
        obj["apiVersion"] = rt.api_version


def _check_fresh(rt: ResourceType, name: str, current: Obj, wanted_rv: str | None) -> None:
    """Optimistic concurrency: a write naming a resourceVersion must name the current one (409 otherwise)."""
    if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
        raise conflict(
            rt.plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
            rt.group,
        )


def translate(watch: Watch, event: Event) -> str | None:
    """The event type this watch sees: an object leaving the selection is DELETED, entering it is ADDED."""
    if watch.namespace and event.namespace != watch.namespace:
        return None
    now_in = event.type != "DELETED" and watch.matches(event.obj)
    if event.type == "DELETED":
        return "DELETED" if watch.matches(event.old or event.obj) else None
    was_in = event.old is not None and watch.matches(event.old)
    if now_in and was_in:
        return "MODIFIED"
    if now_in:
        return "ADDED"
    if was_in:
        return "DELETED"
    return None


def encode_event(event_type: str, raw: bytes) -> bytes:
    return b'{"type":"' + event_type.encode() + b'","object":' + raw + b"}\n"


def _spec_of(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _without_rv(obj: Obj) -> Obj:
    meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}


def _decode(
    rt: ResourceType, obj: Obj, field_validation: FieldValidation, warnings: list[str] | None
) -> None:
    if rt.schema is not None:
        rt.schema.decode(obj, field_validation, [] if warnings is None else warnings)


def _validate(rt: ResourceType, obj: Obj) -> None:
    if rt.schema is not None and (errors := rt.schema.validate(obj)):
        raise invalid_fields(rt.kind, rt.group, obj["metadata"].get("name", ""), errors)


def _validate_name(rt: ResourceType, name: str) -> None:
    if len(name) > DNS_SUBDOMAIN_MAX or not re.match(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", name):
        raise invalid(
            rt.kind,
            name,
            f'metadata.name: Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist '
            "of lower case alphanumeric characters, '-' or '.'",
            "metadata.name",
        )


IMMORTAL_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})
_INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new"
    " list without the continue parameter, or use the continue token in this response to retrieve the"
    " remainder of the results. Continuing with the provided token results in an inconsistent list -"
    " objects that were created, modified, or deleted between the time the first chunk was returned and"
    " now may show up in the list."
)


def _encode_continue(rv: int, after: Key) -> str:
    return base64.urlsafe_b64encode(
        json.dumps({"rv": rv, "ns": after[0], "name": after[1]}).encode()
    ).decode()


def _decode_continue(token: str) -> tuple[int, Key]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        return int(data["rv"]), (str(data["ns"]), str(data["name"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise bad_request(f"invalid continue token: {exc}") from exc


def _owner_uids(obj: Obj | None) -> set[str]:
    if obj is None:
        return set()
    return {str(r["uid"]) for r in obj["metadata"].get("ownerReferences") or () if r.get("uid")}
