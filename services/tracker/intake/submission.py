"""An intent's job created, or found: the same intent (by its idempotency key) is one job, whichever replica
takes it and however often it comes, and a job collected within `collector.dedupWindow` is not made again.
`Refused` says why an intent cannot become a job."""

from __future__ import annotations

import json
from collections.abc import Awaitable
from typing import Any, TypeVar

import msgspec
from nats.js import JetStreamContext
from nats.js.errors import KeyNotFoundError, NotFoundError
from nats.js.kv import KeyValue

from services.tracker.intake.node_fit import NodeFit
from shared.access.permissions import Identity
from shared.api import paths
from shared.api.messages import IntentError, IntentErrorCode, MigrationIntent
from shared.api.pmj_read import read_pmj
from shared.intake.intent_jobs import conflict, job_for
from shared.kube.client import KubeClient, KubeError
from shared.nats import bus

T = TypeVar("T")


class Refused(Exception):
    """An intent that cannot become a job; retrying it as is will not help (unless `code` is Unavailable)."""

    def __init__(self, code: IntentErrorCode, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.error = IntentError(code=code, message=message, field=field)


async def api_answer(call: Awaitable[T]) -> T:
    """The API server's answer; Refused when it has none to give (Unavailable) or an error (Internal)."""
    try:
        return await call
    except KubeError as exc:
        raise outage(exc) from exc
    except Exception as exc:  # connection refused, timeouts
        raise Refused("Unavailable", f"the Kubernetes API server is unreachable: {exc}") from exc


def outage(exc: KubeError) -> Refused:
    code: IntentErrorCode = "Unavailable" if exc.retryable else "Internal"
    return Refused(code, f"the Kubernetes API server answered {exc}")


class JobSubmitter:
    def __init__(self, kube: KubeClient, subjects: bus.Subjects, *, fit: NodeFit | None = None) -> None:
        self.kube, self.subjects = kube, subjects
        self.fit = fit  # with nodeFit on: an intent's pod must fit another node
        # Set when serving: collected jobs are looked up in JetStream's KV.
        self.js: JetStreamContext | None = None
        self._names: KeyValue | None = None

    async def submit(self, intent: MigrationIntent, who: Identity) -> tuple[str, bool]:
        """Create the intent's job (or find it), `who` its requester. Returns (job name, created); raises
        Refused."""
        job = job_for(intent, who.username)
        name = job.metadata.name or ""
        existing = await self._get(paths.job(name))
        if existing is not None:
            return name, self._same(existing, intent)
        collected = await self._collected(name)
        if collected is not None:  # this intent's job ran and was collected: the same pod is not moved again
            if collected.get("pod") != f"{intent.pod.namespace}/{intent.pod.name}":
                raise Refused("Conflict", f"job {name} (collected) was for pod {collected.get('pod')}", "pod")
            return name, False
        pod = await self._get(paths.pod(intent.pod.namespace, intent.pod.name))
        if pod is None:
            raise Refused("MissingPod", f"pod {intent.pod.namespace}/{intent.pod.name} not found", "pod")
        uid = pod.get("metadata", {}).get("uid")
        if intent.pod.uid and intent.pod.uid != uid:
            raise Refused(
                "MissingPod",
                f"pod {intent.pod.namespace}/{intent.pod.name} is now {uid}, not {intent.pod.uid}",
                "pod.uid",
            )
        await self._fits(pod, intent)
        job = job_for(intent, who.username, found=pod)
        try:
            await self.kube.arequest("POST", paths.JOBS, body=msgspec.to_builtins(job))
        except KubeError as exc:
            if exc.status != 409:
                raise outage(exc) from exc
            # Another replica created it a moment ago: the same job, if it is this intent's.
            found = await self._get(paths.job(name))
            if found is None:
                raise Refused("Unavailable", f"job {name} was created and deleted meanwhile; retry") from exc
            return name, self._same(found, intent)
        return name, True

    async def _collected(self, name: str) -> dict[str, Any] | None:
        """What the collector remembered of job `name`, if it collected it within `collector.dedupWindow`."""
        if self._names is None:
            if self.js is None:
                return None
            try:
                self._names = await self.js.key_value(self.subjects.collected_bucket)
            except NotFoundError:
                return None  # nothing collected yet
        try:
            entry = await self._names.get(name)
        except KeyNotFoundError:
            return None
        except Exception as exc:  # NATS unreachable: the answer would be a guess
            raise Refused("Unavailable", f"cannot tell whether job {name} was collected: {exc}") from exc
        found: dict[str, Any] = json.loads(entry.value or b"{}")
        return found

    def _same(self, found: dict[str, Any], intent: MigrationIntent) -> bool:
        why = conflict(read_pmj(found)[0], intent)
        if why is not None:
            raise Refused("Conflict", why, "idempotencyKey")
        return False

    async def _get(self, path: str) -> dict[str, Any] | None:
        return await api_answer(self.kube.get_json(path))

    async def _fits(self, pod: dict[str, Any], intent: MigrationIntent) -> None:
        """Refused when nodeFit is on and the pod fits no other node (the pods of no node are not checked)."""
        if self.fit is None or not (pod.get("spec") or {}).get("nodeName"):
            return
        why = await api_answer(self.fit.why_not(pod))
        if why is not None:
            where = f"{intent.pod.namespace}/{intent.pod.name}"
            raise Refused("Refused", f"pod {where} fits no other node (nodeFit): {why}", "pod")
