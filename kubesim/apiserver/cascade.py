"""What a write sets off in other objects, as the API server and its built-in controllers do it: a created
CustomResourceDefinition is established (its resource served) and a deleted one takes its objects along;
a deleted namespace turns Terminating and, once empty, goes; a deleted owner's dependents are collected
(or orphaned, if asked).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

from kubesim.apiserver.crd_types import from_crd
from kubesim.apiserver.errors import forbidden_resource, invalid
from kubesim.apiserver.records import Key, Obj, now_iso
from kubesim.apiserver.resources import Registry, ResourceType

IMMORTAL_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})


class Deletes(Protocol):
    """The delete verb, as the cascade asks for a dependent's deletion."""

    def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        *,
        options: Mapping[str, Any] | None = None,
        dry_run: bool = False,
    ) -> Obj: ...


class Objects(Protocol):
    """The store as the cascade writes it."""

    registry: Registry
    verbs: Deletes

    def find(self, rt: ResourceType, namespace: str, name: str) -> Obj | None: ...

    def objects(self, rt: ResourceType, namespace: str | None = None) -> Iterator[Obj]: ...

    def put(self, rt: ResourceType, obj: Obj, event_type: str, *, old: Obj | None = None) -> Obj: ...

    def remove(self, rt: ResourceType, obj: Obj) -> Obj: ...

    def drop_resource(self, group: str, plural: str) -> None: ...


class OwnerIndex:
    """Owner uid -> the objects whose ownerReferences name it: the garbage collector's graph."""

    def __init__(self) -> None:
        self._owned: dict[str, set[tuple[tuple[str, str], Key]]] = {}

    def update(self, rt: ResourceType, key: Key, before: Obj | None, *, after: Obj | None) -> None:
        was, now = _owner_uids(before), _owner_uids(after)
        for uid in was - now:
            dependents = self._owned.get(uid)
            if dependents is not None:
                dependents.discard((rt.key, key))
                if not dependents:
                    del self._owned[uid]
        for uid in now - was:
            self._owned.setdefault(uid, set()).add((rt.key, key))

    def dependents(self, owner_uid: str) -> list[tuple[tuple[str, str], Key]]:
        return sorted(self._owned.get(owner_uid, ()))


class Cascade:
    def __init__(self, store: Objects, owners: OwnerIndex) -> None:
        self.store = store
        self.owners = owners

    def added(self, rt: ResourceType, obj: Obj) -> None:
        if rt.kind == "CustomResourceDefinition":
            self._establish_crd(rt, obj)

    def removed(self, rt: ResourceType, final: Obj) -> None:
        if rt.kind == "CustomResourceDefinition":
            spec = final.get("spec") or {}
            self.store.drop_resource(spec.get("group", ""), (spec.get("names") or {}).get("plural", ""))
        elif rt.kind == "Namespace" and rt.group == "":
            self._drop_namespace(final["metadata"]["name"])
        for dependent_rt, obj in list(self._dependents(final["metadata"]["uid"])):
            meta = obj["metadata"]
            if self.store.find(dependent_rt, meta.get("namespace", ""), meta["name"]) is not None:
                self.store.verbs.delete(
                    dependent_rt,
                    meta.get("namespace", ""),
                    meta["name"],
                    options={"propagationPolicy": "Background"},
                )

    def orphan(self, owner_uid: str) -> None:
        for rt, obj in list(self._dependents(owner_uid)):
            new = copy.deepcopy(obj)
            new["metadata"]["ownerReferences"] = [
                r for r in new["metadata"].get("ownerReferences") or () if r.get("uid") != owner_uid
            ]
            self.store.put(rt, new, "MODIFIED", old=obj)

    def terminate_namespace(self, rt: ResourceType, namespace: Obj, dry_run: bool) -> Obj:
        """A deleted namespace turns Terminating; the namespace controller deletes its content, then it."""
        name = namespace["metadata"]["name"]
        if name in IMMORTAL_NAMESPACES:
            raise forbidden_resource(rt.plural, rt.group, name, why="this namespace may not be deleted")
        if namespace["metadata"].get("deletionTimestamp") or dry_run:
            return namespace
        new = copy.deepcopy(namespace)
        new["metadata"]["deletionTimestamp"] = now_iso()
        new["metadata"]["deletionGracePeriodSeconds"] = 0
        new.setdefault("status", {})["phase"] = "Terminating"
        return self.store.put(rt, new, "MODIFIED", old=namespace)

    def finish_namespace(self, namespace: Obj) -> None:
        """The namespace controller's last step, once the content is gone: the namespace goes too."""
        self.store.remove(self.store.registry.core("namespaces"), namespace)

    def _drop_namespace(self, namespace: str) -> None:
        for rt in self.store.registry.all():
            if rt.namespaced:
                for obj in list(self.store.objects(rt, namespace)):
                    self.store.remove(rt, obj)

    def _establish_crd(self, rt: ResourceType, crd: Obj) -> None:
        try:
            types = from_crd(crd)
        except (KeyError, TypeError) as exc:
            raise invalid(
                "CustomResourceDefinition", crd["metadata"]["name"], f"spec is incomplete: {exc}"
            ) from exc
        for new_type in types:
            self.store.registry.add(new_type)
        established = copy.deepcopy(crd)
        names = (crd.get("spec") or {}).get("names") or {}
        established["status"] = {
            "acceptedNames": names,
            "storedVersions": [v["name"] for v in crd["spec"].get("versions", []) if v.get("storage")],
            "conditions": [
                _condition("NamesAccepted", "NoConflicts"),
                _condition("Established", "InitialNamesAccepted"),
            ],
        }
        self.store.put(rt, established, "MODIFIED", old=crd)

    def _dependents(self, owner_uid: str) -> Iterable[tuple[ResourceType, Obj]]:
        types = {rt.key: rt for rt in self.store.registry.all()}
        for type_key, (namespace, name) in self.owners.dependents(owner_uid):
            rt = types.get(type_key)
            obj = self.store.find(rt, namespace, name) if rt is not None else None
            if rt is not None and obj is not None:
                yield rt, obj


def _condition(kind: str, reason: str) -> Obj:
    return {"type": kind, "status": "True", "reason": reason, "lastTransitionTime": now_iso()}


def _owner_uids(obj: Obj | None) -> set[str]:
    if obj is None:
        return set()
    return {str(r["uid"]) for r in obj["metadata"].get("ownerReferences") or () if r.get("uid")}
