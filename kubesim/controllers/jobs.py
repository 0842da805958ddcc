"""The Job controller of kube-controller-manager 1.32, for what a migration meets: a Job keeps
`parallelism` pods running until `completions` of them succeed; each pod it makes carries the
`batch.kubernetes.io/job-tracking` finalizer until the Job has counted it; a pod that fails, or is deleted
before it succeeds (an eviction), counts as failed and is replaced after a backoff (10 s, doubled per
failure); past `backoffLimit` failures or `activeDeadlineSeconds` the Job fails; `suspend` removes its
pods; `ttlSecondsAfterFinished` deletes it once finished. Indexed Jobs give each pod its index."""

from __future__ import annotations

import copy
import time
from collections import defaultdict
from typing import Any

from kubesim.apiserver import batch
from kubesim.apiserver.errors import ApiError
from kubesim.apiserver.records import Event, Obj, now_iso, parse_iso
from kubesim.apiserver.store import Store
from kubesim.controllers.base import Controller
from kubesim.controllers.owned import is_ready, owner_ref
from kubesim.options import SimOptions

TRACKING = "batch.kubernetes.io/job-tracking"
INDEX = "batch.kubernetes.io/job-completion-index"
MAX_BACKOFF = 360.0
FINISHED = ("Complete", "Failed")


class Jobs(Controller[tuple[str, str]]):
    tick = 0.5  # backoffs, deadlines and ttls

    def __init__(self, store: Store, options: SimOptions) -> None:
        super().__init__(store, options)
        self.pods = self.rt("", "v1", "pods")
        self.jobs = self.rt("batch", "v1", "jobs")
        self.pods_of: dict[str, set[tuple[str, str]]] = defaultdict(set)  # job uid -> its pods
        self.job_uids: dict[str, tuple[str, str]] = {}  # the Jobs that exist, by uid
        self.orphaned: set[str] = set()  # uids of Jobs gone whose pods may still carry the finalizer
        self.counted: set[str] = set()  # uids of the pods counted, until they are gone
        self.timed: set[tuple[str, str]] = set()  # jobs waiting for a backoff, deadline or ttl
        self.failed_at: dict[str, list[float]] = defaultdict(list)  # job uid -> when its pods failed

    def on_event(self, event: Event) -> bool:
        meta = event.obj["metadata"]
        namespace = meta.get("namespace", "")
        if event.rt is self.jobs:
            if event.type == "DELETED":
                self.job_uids.pop(meta["uid"], None)
                self.orphaned.add(meta["uid"])
            else:
                self.job_uids[meta["uid"]] = (namespace, meta["name"])
            self.dirty.add((namespace, meta["name"]))
            return True
        if event.rt is not self.pods or (owner := batch.owner_job(event.obj)) is None:
            return False
        key = (namespace, meta["name"])
        if event.type == "DELETED":
            self.pods_of[owner["uid"]].discard(key)
            self.counted.discard(meta["uid"])
        else:
            self.pods_of[owner["uid"]].add(key)
        if owner["uid"] not in self.job_uids:
            self.orphaned.add(owner["uid"])
        self.dirty.add((namespace, owner["name"]))
        return True

    def periodic(self) -> None:
        for key in list(self.timed):
            self.timed.discard(key)
            self.reconcile(key)
        for uid in list(self.orphaned):
            self.orphaned.discard(uid)
            if uid not in self.job_uids:
                self._release_orphans(uid)

    def reconcile(self, key: tuple[str, str]) -> None:
        namespace, name = key
        job = self.store.find(self.jobs, namespace, name)
        if job is None:
            return
        pods = self._pods_of(job)
        status = copy.deepcopy(job.get("status") or {})
        counted = self._count_finished(job, pods, status)
        conditions = status.setdefault("conditions", [])
        now = time.time()
        spec = job["spec"]
        active = [p for p in pods if _active(p)]
        finished = _condition(conditions, FINISHED)
        if finished is None and not spec.get("suspend"):
            finished = self._judge(job, status, active=active, now=now)
        if finished is not None or spec.get("suspend") or job["metadata"].get("deletionTimestamp"):
            self._delete(active)
            active = []
            if spec.get("suspend") and finished is None:
                _set_condition(conditions, "Suspended", "True", why=("JobSuspended", "Job suspended"))
                status.pop("startTime", None)
        else:
            if _condition(conditions, ("Suspended",)):
                _set_condition(conditions, "Suspended", "False", why=("JobResumed", "Job resumed"))
            status.setdefault("startTime", now_iso())
            active += self._create(job, status, active, pods=pods, now=now)
        status.pop("active", None)
        status.update(_counts(active, pods))
        if not conditions:
            status.pop("conditions")
        self._write(job, status)
        for pod in counted:
            self.drop_finalizer(self.pods, pod, TRACKING)
        self._expire(job, status, now)

    def _pods_of(self, job: Obj) -> list[Obj]:
        namespace = job["metadata"]["namespace"]
        found = (self.store.find(self.pods, *k) for k in self.pods_of.get(job["metadata"]["uid"], ()))
        return sorted(
            (p for p in found if p is not None and p["metadata"]["namespace"] == namespace),
            key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]),
        )

    def _count_finished(self, job: Obj, pods: list[Obj], status: Obj) -> list[Obj]:
        """Count each pod that ended and still carries the finalizer; the pods counted."""
        counted = []
        replace_failed_only = job["spec"].get("podReplacementPolicy") == "Failed"
        for pod in pods:
            if (
                TRACKING not in (pod["metadata"].get("finalizers") or [])
                or pod["metadata"]["uid"] in self.counted
            ):
                continue
            phase = (pod.get("status") or {}).get("phase")
            deleted = pod["metadata"].get("deletionTimestamp") is not None
            if phase == "Succeeded":
                status["succeeded"] = status.get("succeeded", 0) + 1
                if (index := _index(pod)) is not None:
                    status["completedIndexes"] = _ranges(
                        _parse_ranges(status.get("completedIndexes")) | {index}
                    )
            elif phase == "Failed" or (deleted and not replace_failed_only):
                status["failed"] = status.get("failed", 0) + 1
                self.failed_at[job["metadata"]["uid"]].append(time.time())
            else:
                continue
            self.counted.add(pod["metadata"]["uid"])
            counted.append(pod)
        return counted

    def _judge(self, job: Obj, status: Obj, *, active: list[Obj], now: float) -> Obj | None:
        """The Job's end, once its pods decide it: a Complete or Failed condition (both recorded)."""
        found = verdict(job, status, active=active, now=now)
        if found is None:
            if job["spec"].get("activeDeadlineSeconds") is not None:
                self.timed.add(_key(job))
            return None
        kind, reason, message = found
        conditions = status["conditions"]
        first = "FailureTarget" if kind == "Failed" else "SuccessCriteriaMet"
        _set_condition(conditions, first, "True", why=(reason, message))
        _set_condition(conditions, kind, "True", why=(reason, message))
        if kind == "Complete":
            status["completionTime"] = now_iso(now)
        ended: Obj = conditions[-1]
        return ended

    def _create(self, job: Obj, status: Obj, active: list[Obj], *, pods: list[Obj], now: float) -> list[Obj]:
        spec = job["spec"]
        completions = spec.get("completions")
        wanted = int(spec.get("parallelism", 1))
        if completions is not None:
            wanted = min(wanted, int(completions) - status.get("succeeded", 0))
        elif status.get("succeeded"):
            wanted = 0
        if spec.get("podReplacementPolicy") == "Failed":
            wanted -= sum(1 for p in pods if _terminating(p))
        missing = wanted - len(active)
        if missing <= 0:
            return []
        if backoff_left(self.failed_at.get(job["metadata"]["uid"]) or [], self.options.job_backoff, now) > 0:
            self.timed.add(_key(job))
            return []
        indexes = _free_indexes(job, status, active, count=missing)
        namespace = job["metadata"]["namespace"]
        return [
            self.store.verbs.create(self.pods, namespace, pod_for(job, index), decoded=True)
            for index in indexes
        ]

    def _delete(self, pods: list[Obj]) -> None:
        for pod in pods:
            try:
                self.store.verbs.delete(self.pods, pod["metadata"]["namespace"], pod["metadata"]["name"])
            except ApiError as exc:
                if exc.code != 404:
                    raise

    def _write(self, job: Obj, status: Obj) -> None:
        if status != (job.get("status") or {}):
            new = copy.deepcopy(job)
            new["status"] = status
            self.store.put(self.jobs, new, "MODIFIED", old=job)

    def _release_orphans(self, uid: str) -> None:
        """A Job gone leaves the finalizers of its pods to remove, as the controller does."""
        for key in list(self.pods_of.pop(uid, ())):
            if (pod := self.store.find(self.pods, *key)) is not None:
                self.drop_finalizer(self.pods, pod, TRACKING)
        self.failed_at.pop(uid, None)

    def _expire(self, job: Obj, status: Obj, now: float) -> None:
        ttl = job["spec"].get("ttlSecondsAfterFinished")
        ended = _condition(status.get("conditions") or [], FINISHED)
        if ttl is None or ended is None or job["metadata"].get("deletionTimestamp"):
            return
        if now - parse_iso(ended["lastTransitionTime"]) >= ttl:
            options = {"propagationPolicy": "Foreground"}
            self.store.verbs.delete(
                self.jobs, job["metadata"]["namespace"], job["metadata"]["name"], options=options
            )
        else:
            self.timed.add(_key(job))


def _key(job: Obj) -> tuple[str, str]:
    return job["metadata"]["namespace"], job["metadata"]["name"]


def _terminating(pod: Obj) -> bool:
    return pod["metadata"].get("deletionTimestamp") is not None and not _ended(pod)


def _ended(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _active(pod: Obj) -> bool:
    return pod["metadata"].get("deletionTimestamp") is None and not _ended(pod)


def _counts(active: list[Obj], pods: list[Obj]) -> dict[str, Any]:
    counts: dict[str, Any] = {
        "ready": sum(1 for p in active if is_ready(p)),
        "terminating": sum(1 for p in pods if _terminating(p)),
        "uncountedTerminatedPods": {},
    }
    if active:
        counts["active"] = len(active)
    return counts


def _index(pod: Obj) -> int | None:
    value = (pod["metadata"].get("annotations") or {}).get(INDEX)
    return int(value) if value is not None and value.isdigit() else None


def _free_indexes(job: Obj, status: Obj, active: list[Obj], *, count: int) -> list[int | None]:
    if job["spec"].get("completionMode") != "Indexed":
        return [None] * count
    taken = _parse_ranges(status.get("completedIndexes")) | {
        i for p in active if (i := _index(p)) is not None
    }
    free = [i for i in range(int(job["spec"].get("completions") or 0)) if i not in taken]
    return list(free[:count])


def _parse_ranges(text: str | None) -> set[int]:
    out: set[int] = set()
    for part in (text or "").split(","):
        if part:
            first, _, last = part.partition("-")
            out.update(range(int(first), int(last or first) + 1))
    return out


def _ranges(indexes: set[int]) -> str:
    """Indexes as the Job status writes them: "0-2,4"."""
    parts: list[str] = []
    for i in sorted(indexes):
        if parts and parts[-1].rpartition("-")[2] == str(i - 1):
            first = parts[-1].partition("-")[0]
            parts[-1] = f"{first}-{i}"
        else:
            parts.append(str(i))
    return ",".join(parts)


def _condition(conditions: list[Obj], types: tuple[str, ...]) -> Obj | None:
    return next((c for c in conditions if c["type"] in types and c["status"] == "True"), None)


def _set_condition(conditions: list[Obj], kind: str, status: str, *, why: tuple[str, str]) -> None:
    reason, message = why
    now = now_iso()
    for condition in conditions:
        if condition["type"] == kind:
            if condition["status"] != status:
                condition.update(status=status, reason=reason, message=message)
                condition.update(lastProbeTime=now, lastTransitionTime=now)
            return
    conditions.append(
        {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastProbeTime": now,
            "lastTransitionTime": now,
        }
    )


def backoff_left(failures: list[float], base: float, now: float) -> float:
    """Seconds until a pod may replace the failed ones (failed at `failures`): `base`, doubled per failure."""
    if not failures:
        return 0.0
    return failures[-1] + min(base * 2.0 ** (len(failures) - 1), MAX_BACKOFF) - now


def verdict(job: Obj, status: Obj, *, active: list[Obj], now: float) -> tuple[str, str, str] | None:
    """How the Job ends now, as (condition, reason, message), or None while it runs on."""
    spec = job["spec"]
    completions, succeeded = spec.get("completions"), status.get("succeeded", 0)
    deadline = spec.get("activeDeadlineSeconds")
    if status.get("failed", 0) > spec.get("backoffLimit", 6):
        return "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"
    if deadline is not None and "startTime" in status and now - parse_iso(status["startTime"]) >= deadline:
        return "Failed", "DeadlineExceeded", "Job was active longer than specified deadline"
    if (completions is not None and succeeded >= completions) or (
        completions is None and succeeded and not active
    ):
        return "Complete", "CompletionsReached", "Reached expected number of succeeded pods"
    return None


def pod_for(job: Obj, index: int | None) -> Obj:
    """The pod a Job makes (the `index`th of an Indexed Job)."""
    name = job["metadata"]["name"]
    template = copy.deepcopy(job["spec"].get("template") or {})
    meta = template.get("metadata") or {}
    meta["ownerReferences"] = [owner_ref(job)]
    meta["finalizers"] = [*(meta.get("finalizers") or []), TRACKING]
    meta["generateName"] = f"{name}-" if index is None else f"{name}-{index}-"
    meta.pop("name", None)
    pod_spec = template.get("spec") or {}
    if index is not None:
        meta["annotations"] = {**(meta.get("annotations") or {}), INDEX: str(index)}
        meta["labels"] = {**(meta.get("labels") or {}), INDEX: str(index)}
        pod_spec.setdefault("hostname", f"{name}-{index}")
        for container in pod_spec.get("containers") or []:
            env = [e for e in container.get("env") or [] if e.get("name") != "JOB_COMPLETION_INDEX"]
            path = f"metadata.labels['{INDEX}']"
            env.insert(0, {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {"fieldPath": path}}})
            container["env"] = env
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}
