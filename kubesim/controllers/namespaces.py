"""The namespace controller: a Terminating namespace's content is deleted, then the namespace itself. With
it, two more of kube-controller-manager's loops for every live namespace: the ServiceAccount controller's
`default` account, and the root-CA publisher's ConfigMap `kube-root-ca.crt` with the CA that verifies the
API server (what a pod's projected ServiceAccount volume mounts as ca.crt)."""

from __future__ import annotations

from kubesim.apiserver.records import Event, Obj
from kubesim.apiserver.store import Store
from kubesim.controllers.base import Controller
from kubesim.options import SimOptions

ROOT_CA = "kube-root-ca.crt"
KEPT = {"ConfigMap": ROOT_CA, "ServiceAccount": "default"}  # kind -> the object kept in every namespace
ROOT_CA_DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as"
    " the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of"
    " Kubernetes clusters."
)


class NamespaceController(Controller[str]):
    def __init__(self, store: Store, options: SimOptions, ca_pem: str = "") -> None:
        super().__init__(store, options)
        self.ca_pem = ca_pem
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
            elif self.ca_pem and event.type == "ADDED":
                self.dirty.add(name)
                return True
            return False
        kept = event.rt.kind in KEPT and event.obj["metadata"]["name"] == KEPT[event.rt.kind]
        if kept and self.ca_pem and event.namespace not in self.terminating:
            self.dirty.add(event.namespace)  # changed or deleted by someone: made again
            return True
        if event.type == "DELETED" and event.rt.namespaced and event.namespace in self.terminating:
            self.dirty.add(event.namespace)  # one piece of content less: maybe the last
            return True
        return False

    def reconcile(self, key: str) -> None:
        namespace = self.store.find(self.rt("", "v1", "namespaces"), "", key)
        if namespace is None:
            return
        if not namespace["metadata"].get("deletionTimestamp"):
            self._populate(key)
            return
        for rt in self.store.registry.all():
            if not rt.namespaced:
                continue
            for obj in list(self.store.objects(rt, key)):
                if not obj["metadata"].get("deletionTimestamp"):
                    self.store.verbs.delete(
                        rt, key, obj["metadata"]["name"], options={"propagationPolicy": "Background"}
                    )
        if any(next(self.store.objects(rt, key), None) for rt in self.store.registry.all() if rt.namespaced):
            return  # content still terminating (pods until their kubelet confirms): its deletion wakes us
        self.store.cascade.finish_namespace(namespace)

    def _populate(self, namespace: str) -> None:
        if not self.ca_pem:
            return
        accounts = self.rt("", "v1", "serviceaccounts")
        if self.store.find(accounts, namespace, "default") is None:
            self.store.verbs.create(
                accounts, namespace, {"metadata": {"name": "default", "namespace": namespace}}
            )
        rt = self.rt("", "v1", "configmaps")
        wanted: Obj = {
            "metadata": {
                "name": ROOT_CA,
                "namespace": namespace,
                "annotations": {"kubernetes.io/description": ROOT_CA_DESCRIPTION},
            },
            "data": {"ca.crt": self.ca_pem},
        }
        current = self.store.find(rt, namespace, ROOT_CA)
        if current is None:
            self.store.verbs.create(rt, namespace, wanted)
        elif current.get("data") != wanted["data"]:
            self.store.verbs.update(rt, namespace, ROOT_CA, obj={**current, "data": wanted["data"]})
