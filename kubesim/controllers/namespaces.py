"""The namespace controller: a Terminating namespace's content is deleted, then the namespace itself."""

from __future__ import annotations

from kubesim.controllers.base import Controller
from kubesim.store import Event


class NamespaceController(Controller[str]):
    def on_event(self, event: Event) -> bool:
        if event.rt.kind == "Namespace" and event.rt.group == "":
            if event.type != "DELETED" and event.obj["metadata"].get("deletionTimestamp"):
                self.dirty.add(event.obj["metadata"]["name"])
                return True
            return False
        if event.type == "DELETED" and event.rt.namespaced and event.namespace in self.terminating():
            self.dirty.add(event.namespace)  # one piece of content less: maybe the last
            return True
        return False

    def terminating(self) -> set[str]:
        rt = self.rt("", "v1", "namespaces")
        return {
            n["metadata"]["name"] for n in self.store.objects(rt) if n["metadata"].get("deletionTimestamp")
        }

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
