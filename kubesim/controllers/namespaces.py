"""The namespace controller: a Terminating namespace's content is deleted, then the namespace itself."""

from __future__ import annotations

from kubesim.controllers.base import Controller
from kubesim.options import SimOptions
from kubesim.store import Event, Store


class NamespaceController(Controller[str]):
    def __init__(self, store: Store, options: SimOptions) -> None:
        super().__init__(store, options)
        self.terminating: set[str] = set()  # kept from namespace events: pod deletions are a hot path

    def on_event(self, event: Event) -> bool:
        if event.rt.kind == "Namespace" and event.rt.group == "":
            name = event.obj["metadata"]["name"]
            if event.type == "DELETED":
                self.terminating.discard(name)
            elif event.obj["metadata"].get("deletionTimestamp"):
                self.terminating.add(name)
                self.dirty.add(name)
                return True
            return False
        if event.type == "DELETED" and event.rt.namespaced and event.namespace in self.terminating:
            self.dirty.add(event.namespace)  # one piece of content less: maybe the last
            return True
        return False

    def reconcile(self, key: str) -> None:
        namespace = self.store.find(self.rt("", "v1", "namespaces"), "", key)
        if namespace is None or not namespace["metadata"].get("deletionTimestamp"):
            return
        for rt in self.store.registry.all():
            if not rt.namespaced:
                continue
            for obj in list(self.store.objects(rt, key)):
                if not obj["metadata"].get("deletionTimestamp"):
                    self.store.delete(rt, key, obj["metadata"]["name"], {"propagationPolicy": "Background"})
        if any(next(self.store.objects(rt, key), None) for rt in self.store.registry.all() if rt.namespaced):
            return  # content still terminating (pods until their kubelet confirms): its deletion wakes us
        self.store.finish_namespace(namespace)
