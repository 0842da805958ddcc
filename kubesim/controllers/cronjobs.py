"""The CronJob controller of kube-controller-manager 1.32: at each time its schedule names (in its
`timeZone`), a CronJob makes a Job from its `jobTemplate`, named from the scheduled minute, unless it is
suspended, too late (`startingDeadlineSeconds`) or `concurrencyPolicy` says otherwise (Forbid: skip while
one runs; Replace: delete the running one first). Finished Jobs beyond the history limits are deleted."""

from __future__ import annotations

import copy
import time
from collections import defaultdict
from datetime import UTC, datetime

from kubesim.apiserver import cron
from kubesim.apiserver.errors import ApiError
from kubesim.apiserver.records import Event, Obj, controller_ref, parse_iso
from kubesim.apiserver.store import Store
from kubesim.controllers.base import Controller
from kubesim.controllers.owned import owner_ref
from kubesim.controllers.recorder import record_event
from kubesim.options import SimOptions

SCHEDULED = "batch.kubernetes.io/cronjob-scheduled-timestamp"
BACKGROUND = {"propagationPolicy": "Background"}


class CronJobs(Controller[tuple[str, str]]):
    tick = 1.0

    def __init__(self, store: Store, options: SimOptions) -> None:
        super().__init__(store, options)
        self.cronjobs = self.rt("batch", "v1", "cronjobs")
        self.jobs = self.rt("batch", "v1", "jobs")
        self.jobs_of: dict[str, set[tuple[str, str]]] = defaultdict(set)  # cronjob uid -> its Jobs
        self.missed: dict[str, datetime] = {}  # cronjob uid -> the last time it was too late for

    def on_event(self, event: Event) -> bool:
        meta = event.obj["metadata"]
        namespace = meta.get("namespace", "")
        if event.rt is self.cronjobs:
            if event.type == "DELETED":
                self.missed.pop(meta["uid"], None)
            self.dirty.add((namespace, meta["name"]))
            return True
        owner = controller_ref(meta)
        if event.rt is not self.jobs or owner is None or owner.get("kind") != "CronJob":
            return False
        if event.type == "DELETED":
            self.jobs_of[owner["uid"]].discard((namespace, meta["name"]))
        else:
            self.jobs_of[owner["uid"]].add((namespace, meta["name"]))
        self.dirty.add((namespace, owner["name"]))
        return True

    def periodic(self) -> None:
        for cronjob in self.store.objects(self.cronjobs):
            self.reconcile((cronjob["metadata"]["namespace"], cronjob["metadata"]["name"]))

    def reconcile(self, key: tuple[str, str]) -> None:
        cronjob = self.store.find(self.cronjobs, *key)
        if cronjob is None or cronjob["metadata"].get("deletionTimestamp"):
            return
        spec = cronjob["spec"]
        jobs = [
            j
            for k in self.jobs_of.get(cronjob["metadata"]["uid"], ())
            if (j := self.store.find(self.jobs, *k))
        ]
        running = [j for j in jobs if _finished(j) is None]
        status = copy.deepcopy(cronjob.get("status") or {})
        ends = [j["status"]["completionTime"] for j in jobs if _finished(j) == "Complete"]
        if ends:
            status["lastSuccessfulTime"] = max(ends)
        self._trim(jobs, spec)
        due = None if spec.get("suspend") else self._due(cronjob, status)
        if due is not None and self._may_start(spec, running):
            made = self._make_job(cronjob, due)
            if made is not None:
                running.append(made)
            status["lastScheduleTime"] = due.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        known = {r["uid"]: r for r in status.get("active") or []}
        live = [j for j in running if not j["metadata"].get("deletionTimestamp")]
        status["active"] = [known.get(j["metadata"]["uid"]) or _ref(j) for j in live]
        if not status["active"]:
            del status["active"]
        if status != (cronjob.get("status") or {}):
            new = copy.deepcopy(cronjob)
            new["status"] = status
            self.store.put(self.cronjobs, new, "MODIFIED", old=cronjob)

    def _due(self, cronjob: Obj, status: Obj) -> datetime | None:
        """The latest scheduled time that has come and not been acted on, if it is not too late."""
        spec = cronjob["spec"]
        since = status.get("lastScheduleTime") or cronjob["metadata"]["creationTimestamp"]
        now = time.time()
        latest = None
        for moment in cron.times(
            spec["schedule"], spec.get("timeZone"), datetime.fromtimestamp(parse_iso(since), UTC)
        ):
            if moment.timestamp() > now:
                break
            latest = moment
        deadline = spec.get("startingDeadlineSeconds")
        if latest is None:
            return None
        if deadline is not None and now - latest.timestamp() > deadline:
            self._missed(cronjob, latest)
            return None
        return latest

    def _missed(self, cronjob: Obj, moment: datetime) -> None:
        """The controller's warning for a time passed beyond `startingDeadlineSeconds` (once a time)."""
        uid = cronjob["metadata"]["uid"]
        if self.missed.get(uid) == moment or not self.options.record_events:
            return
        self.missed[uid] = moment
        stamp = moment.astimezone(UTC).strftime("%a, %d %b %Y %H:%M:%S +0000")  # Go's RFC1123Z
        message = f"Missed scheduled time to start a job: {stamp}"
        record_event(
            self.store,
            self.rt("", "v1", "events"),
            cronjob,
            kind="Warning",
            reason="MissSchedule",
            message=message,
            component="cronjob-controller",
        )

    def _may_start(self, spec: Obj, running: list[Obj]) -> bool:
        live = [j for j in running if not j["metadata"].get("deletionTimestamp")]
        if not live or spec.get("concurrencyPolicy") == "Allow":
            return True
        if spec.get("concurrencyPolicy") == "Forbid":
            return False
        for job in live:  # Replace
            self._delete(job)
        running.clear()
        return True

    def _make_job(self, cronjob: Obj, due: datetime) -> Obj | None:
        template = copy.deepcopy(cronjob["spec"].get("jobTemplate") or {})
        meta = template.get("metadata") or {}
        meta["name"] = f"{cronjob['metadata']['name']}-{int(due.timestamp()) // 60}"
        meta["annotations"] = {
            **(meta.get("annotations") or {}),
            SCHEDULED: due.isoformat(timespec="seconds"),
        }
        meta["ownerReferences"] = [owner_ref(cronjob)]
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": template.get("spec") or {}}
        try:
            return self.store.verbs.create(self.jobs, cronjob["metadata"]["namespace"], job)
        except ApiError as exc:
            if exc.code == 409:  # made at this time already
                return None
            raise

    def _trim(self, jobs: list[Obj], spec: Obj) -> None:
        for kind, limit in (("Complete", "successfulJobsHistoryLimit"), ("Failed", "failedJobsHistoryLimit")):
            ended = sorted(
                (j for j in jobs if _finished(j) == kind and not j["metadata"].get("deletionTimestamp")),
                key=lambda j: ((j.get("status") or {}).get("startTime") or "", j["metadata"]["name"]),
            )
            keep = len(ended) if spec.get(limit) is None else int(spec[limit])
            for job in ended[: max(0, len(ended) - keep)]:
                self._delete(job)

    def _delete(self, job: Obj) -> None:
        try:
            self.store.verbs.delete(
                self.jobs, job["metadata"]["namespace"], job["metadata"]["name"], options=BACKGROUND
            )
        except ApiError as exc:
            if exc.code != 404:
                raise


def _finished(job: Obj) -> str | None:
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition["type"] in ("Complete", "Failed") and condition["status"] == "True":
            return str(condition["type"])
    return None


def _ref(job: Obj) -> Obj:
    meta = job["metadata"]
    return {
        "kind": "Job",
        "namespace": meta["namespace"],
        "name": meta["name"],
        "uid": meta["uid"],
        "apiVersion": "batch/v1",
        "resourceVersion": meta["resourceVersion"],
    }
