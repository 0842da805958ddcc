"""The kubelet: bound pods start (Running), then become Ready (not before a readiness probe's
`initialDelaySeconds`); deleted pods stop after their grace period.

Pods whose images kubesim was told how to run (`SimOptions.images`) run as real processes instead
(kubesim.kubelet.runtime): the runtime then reports their state, and their deletion waits for the processes to
end.

Pods on a NotReady node lose readiness and, as with a real unreachable kubelet, a pod deleted there stays
Terminating until the node is Ready again.
"""

from __future__ import annotations

import copy
import time

from kubesim.apiserver.records import Event, Obj, now_iso, parse_iso
from kubesim.apiserver.store import Store
from kubesim.controllers.base import Controller
from kubesim.controllers.node_filters import node_ready
from kubesim.controllers.recorder import record_event
from kubesim.kubelet.pod_status import gates_hold, pod_conditions, readiness_gates
from kubesim.kubelet.runtime import ProcessRuntime
from kubesim.options import SimOptions

FORCED_GRACE = 2.0


class Kubelet(Controller[tuple[str, str]]):
    tick = 0.05

    def __init__(self, store: Store, options: SimOptions, runtime: ProcessRuntime | None = None) -> None:
        super().__init__(store, options)
        self.runtime = runtime
        self.pods = self.rt("", "v1", "pods")
        self.nodes = self.rt("", "v1", "nodes")
        self.events_rt = self.rt("", "v1", "events")
        # (namespace, name) -> monotonic time at which the pod's next step is due
        self.due: dict[tuple[str, str], float] = {}
        self.ip = 1 << 15  # above the addresses the scenario loader hands out
        # node name -> the pods bound to it (a pod's node never changes), so a node's change wakes its pods
        # without a pass over every pod of the cluster
        self.on_node: dict[str, set[tuple[str, str]]] = {}

    def on_event(self, event: Event) -> bool:
        if event.rt is self.nodes:
            self.dirty.update(self.on_node.get(event.obj["metadata"]["name"], ()))
            return True
        if event.rt is not self.pods:
            return False
        pod = event.obj
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            return False
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        if event.type == "DELETED":
            self.on_node.get(node, set()).discard(key)
            return False
        self.on_node.setdefault(node, set()).add(key)
        self.dirty.add(key)
        return True

    def reconcile(self, key: tuple[str, str]) -> None:
        namespace, name = key
        pod = self.store.find(self.pods, namespace, name)
        if pod is None:
            self.due.pop(key, None)
            if self.runtime is not None:
                self.runtime.terminate(key, FORCED_GRACE)  # force-deleted: its processes go all the same
            return
        node = self.store.find(self.nodes, "", pod["spec"]["nodeName"])
        alive = node is not None and node_ready(node)
        if self.runtime is not None and self.runtime.image(pod) is not None:
            self._run_processes(key, pod, alive, runtime=self.runtime)
            return
        status = pod.get("status") or {}
        now = time.monotonic()
        if pod["metadata"].get("deletionTimestamp"):
            if not alive:
                return  # an unreachable kubelet never confirms termination
            grace = min(
                float(pod["metadata"].get("deletionGracePeriodSeconds") or 0), self.options.max_termination
            )
            if pod["metadata"].get("deletionGracePeriodSeconds") == 0:
                return  # confirmed already: whoever holds a finalizer removes the object
            due = self.due.setdefault(key, now + grace)
            if now >= due:
                self.due.pop(key, None)
                self._confirm_deletion(pod)
            return
        phase = status.get("phase")
        if phase in ("Succeeded", "Failed"):
            return
        if not alive:
            if _ready(status):
                self._write(pod, ready=False)
            return
        if phase != "Running":
            due = self.due.setdefault(key, now + self.options.start_delay)
            if now >= due:
                self.due.pop(key, None)
                self._start(pod)
            return
        if not _true(status, "ContainersReady"):
            due = self.due.setdefault(key, now + max(self.options.ready_delay, _probe_wait(pod)))
            if now >= due:
                self.due.pop(key, None)
                self._write(pod, ready=True)
        elif _ready(status) != gates_hold(pod):
            self._write(pod, ready=True)  # a readiness gate's condition changed

    def _confirm_deletion(self, pod: Obj) -> None:
        """As a kubelet does once the containers stopped: delete with no grace, for this very pod. The API
        server removes it unless finalizers remain, which then hold it until they are removed."""
        meta = pod["metadata"]
        final = {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}}
        self.store.verbs.delete(self.pods, meta["namespace"], meta["name"], options=final)

    def _run_processes(self, key: tuple[str, str], pod: Obj, alive: bool, *, runtime: ProcessRuntime) -> None:
        meta = pod["metadata"]
        if not alive:
            return
        if meta.get("deletionTimestamp"):
            if meta.get("deletionGracePeriodSeconds") == 0 and runtime.finished(key):
                return
            if runtime.finished(key):
                self._confirm_deletion(pod)
            else:
                runtime.terminate(key, float(meta.get("deletionGracePeriodSeconds") or 0))
            return
        if runtime.finished(key) and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            runtime.start(pod)

    def periodic(self) -> None:
        now = time.monotonic()
        for key, due in list(self.due.items()):
            if now >= due:
                self.dirty.add(key)

    def _start(self, pod: Obj) -> None:
        new = copy.deepcopy(pod)
        status = new.setdefault("status", {})
        self.ip += 1
        status["phase"] = "Running"
        status["startTime"] = now_iso()
        status["podIP"] = f"10.{(self.ip >> 16) & 255}.{(self.ip >> 8) & 255}.{self.ip & 255}"
        status["hostIP"] = "192.168.0.1"
        status["containerStatuses"] = [
            {
                "name": c["name"],
                "ready": False,
                "started": True,
                "restartCount": 0,
                "image": c.get("image", ""),
                "imageID": "",
                "state": {"running": {"startedAt": now_iso()}},
            }
            for c in new["spec"].get("containers") or []
        ]
        pod_conditions(status, ready=False)
        self.store.put(self.pods, new, "MODIFIED", old=pod)
        if self.options.record_events:
            record_event(
                self.store,
                self.events_rt,
                pod,
                kind="Normal",
                reason="Started",
                message="Started container",
                component="kubelet",
            )

    def _write(self, pod: Obj, ready: bool) -> None:
        new = copy.deepcopy(pod)
        status = new.setdefault("status", {})
        for container in status.get("containerStatuses") or []:
            container["ready"] = ready
        pod_conditions(status, ready, readiness_gates(pod))
        self.store.put(self.pods, new, "MODIFIED", old=pod)


def _probe_wait(pod: Obj) -> float:
    """Seconds until the readiness probes may first pass: a kubelet's prober reports a container with a
    readinessProbe not ready until `initialDelaySeconds` after it started."""
    delay = max(
        (
            float((c.get("readinessProbe") or {}).get("initialDelaySeconds") or 0)
            for c in pod["spec"]["containers"]
        ),
        default=0.0,
    )
    started = (pod.get("status") or {}).get("startTime")
    return delay - (time.time() - parse_iso(started)) if delay and started else delay


def _ready(status: Obj) -> bool:
    return _true(status, "Ready")


def _true(status: Obj, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in status.get("conditions") or [])
