"""A watchdog for the promises Podherd makes, observed from the cluster and the ledger, never from Podherd's
own account of itself. The demo prints its findings; the end-to-end tests assert them.

- no replacement pod is ever Pending for lack of room (a pod watch sees every state a new pod passes);
- no ledger slot set (node, namespace, the cluster) holds more migrations than its limit;
- no workload has more unavailable replicas than `maxUnavailablePerWorkload` allows;
- no PodDisruptionBudget has fewer healthy pods than it requires;
- no Deployment surging for a job has fewer Ready pods than before its surge (`surge_floor`, from every
  pod, ReplicaSet and Deployment event).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from podherd.watchdog.history import (
    JOB,
    POD,
    RESERVATION,
    History,
    HistoryFindings,
    RoomCheck,
    replay,
    room_checks,
)
from podherd.watchdog.surge_floor import DEPLOYMENT, REPLICASET, surge_floor_breaches
from shared.api import paths
from shared.api.intstr import max_unavailable
from shared.config.model import MigrationControllerArgs, PodherdConfig
from shared.core.waits import cancel_and_wait, wait_event
from shared.kube.client import KubeClient, KubeError
from shared.ledger.slots import limit_of
from shared.ledger.store import Ledger

log = logging.getLogger(__name__)


@dataclass
class Findings:
    samples: int = 0
    peak_slots: dict[str, int] = field(default_factory=dict)
    pending_replacements: set[str] = field(default_factory=set)
    slot_breaches: list[str] = field(default_factory=list)
    workload_breaches: list[str] = field(default_factory=list)
    pdb_breaches: list[str] = field(default_factory=list)
    surge_breaches: list[str] = field(default_factory=list)
    surges_watched: int = 0
    ledger_unavailable: int = 0
    history: HistoryFindings | None = None  # None: no room checks to hold the evictions against

    @property
    def limits_exceeded(self) -> int:
        return (
            len(self.slot_breaches)
            + len(self.workload_breaches)
            + len(self.pdb_breaches)
            + len(self.surge_breaches)
        )

    @property
    def evictions_without_room(self) -> list[str]:
        return self.history.evictions_without_room if self.history is not None else []

    @property
    def succeeded_before_gone(self) -> list[str]:
        return self.history.succeeded_before_gone if self.history is not None else []

    def as_dict(self) -> dict[str, Any]:
        return {
            "samples": self.samples,
            "ledger_unavailable_samples": self.ledger_unavailable,
            "replacement_pods_ever_pending": len(self.pending_replacements),
            "limits_exceeded": self.limits_exceeded,
            "slot_breaches": self.slot_breaches[:20],
            "workload_breaches": self.workload_breaches[:20],
            "pdb_breaches": self.pdb_breaches[:20],
            "surge_floor_breaches": self.surge_breaches[:20],
            "surges_watched": self.surges_watched,
            "peak_slots_in_use": self.peak_slots,
            "history_events": self.history.events if self.history is not None else None,
            "evictions_checked_against_room": self.history.evictions_checked if self.history else None,
            "evictions_without_room": self.evictions_without_room[:20],
            "succeeded_before_old_pod_gone": self.succeeded_before_gone[:20],
        }


def slot_limit(key: str, args: MigrationControllerArgs) -> int | None:
    """The limit on a ledger set, None where none applies (unset, or its gate skipped)."""
    kind, skip = limit_of(key), args.skipped_gates
    limit = {
        "node": 0 if "MaxMigratingPerNode" in skip else args.max_migrating_per_node,
        "namespace": 0 if "MaxMigratingPerNamespace" in skip else args.max_migrating_per_namespace,
        "global": 0 if "MaxMigratingGlobally" in skip else args.max_migrating_globally,
    }.get(kind, 0)
    return limit or None


def workload_breach(obj: dict[str, Any], args: MigrationControllerArgs) -> str | None:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    replicas = int(spec.get("replicas") or 0)
    if not replicas or status.get("observedGeneration", 0) < obj["metadata"].get("generation", 0):
        return None  # scaling or rolling out: its controller, not Podherd, owns the gap
    if "MaxUnavailablePerWorkload" in args.skipped_gates:
        return None
    available = int(status.get("availableReplicas") or 0)
    allowed = max_unavailable(replicas, args.max_unavailable_per_workload)
    if replicas - available > allowed:
        meta = obj["metadata"]
        return f"{meta['namespace']}/{meta['name']}: {replicas - available} unavailable, {allowed} allowed"
    return None


def settled(obj: dict[str, Any]) -> bool:
    """The controller has caught up: the current template everywhere, as many pods as wanted."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    replicas = int(spec.get("replicas") or 0)
    return (
        status.get("observedGeneration", 0) >= obj["metadata"].get("generation", 0)
        and int(status.get("replicas") or 0) == replicas
        and int(status.get("updatedReplicas", replicas) or 0) == replicas
    )


def _replicas(obj: dict[str, Any]) -> int:
    return int((obj.get("spec") or {}).get("replicas") or 0)


def transitioning(obj: dict[str, Any], *, was: bool) -> bool:
    """Its controller still owns the workload's gap: rolling it out or scaling it (not `settled`), or, since
    it was, not every replica has been available yet (the last new pods of a rollout still starting, which
    the Deployment controller does not hold to any PDB). Once all were available, any gap is a disruption."""
    if not settled(obj):
        return True
    replicas = int((obj.get("spec") or {}).get("replicas") or 0)
    return was and int((obj.get("status") or {}).get("availableReplicas") or 0) < replicas


def pdb_breach(obj: dict[str, Any]) -> str | None:
    status = obj.get("status") or {}
    if not status.get("expectedPods"):
        return None
    healthy, desired = int(status.get("currentHealthy") or 0), int(status.get("desiredHealthy") or 0)
    if healthy < desired:
        meta = obj["metadata"]
        return f"{meta['namespace']}/{meta['name']}: {healthy} healthy, {desired} required"
    return None


WATCHED = {
    POD: paths.PODS,
    RESERVATION: paths.RESERVATIONS,
    JOB: paths.JOBS,
    DEPLOYMENT: "/apis/apps/v1/deployments",
    REPLICASET: "/apis/apps/v1/replicasets",
}


def _now() -> str:
    return datetime.now(UTC).strftime("%H:%M:%S.%f")[:-3]


def _ready(pod: dict[str, Any]) -> dict[str, Any]:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "Ready"), {})


def _healthy(pod: dict[str, Any]) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and _ready(pod).get("status") == "True"


def _why_unhealthy(pod: dict[str, Any]) -> str:
    meta, ready = pod["metadata"], _ready(pod)
    going = f" deleted {meta['deletionTimestamp']}" if meta.get("deletionTimestamp") else ""
    since = f" not Ready since {ready.get('lastTransitionTime')}" if ready.get("status") != "True" else ""
    return f"{meta['name']} on {(pod.get('spec') or {}).get('nodeName')}{going}{since}"


def _key(obj: dict[str, Any]) -> str:
    return f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}"


class Watchdog:
    def __init__(
        self,
        kube: KubeClient,
        redis_client: aioredis.Redis,
        key_prefix: str,
        *,
        args: MigrationControllerArgs,
        interval: float = 0.1,
        ignore_pods: frozenset[str] = frozenset(),
        excused: Callable[[], set[str]] = set,
        checks: Callable[[], Awaitable[list[RoomCheck]]] | None = None,
    ) -> None:
        self.kube = kube
        self.ledger = Ledger(redis_client, key_prefix, slot_ttl=0)
        self.args = args
        self.interval = interval
        self.ignore_pods = ignore_pods  # pods pending before the run (the pod a defragmentation is for)
        # Workloads and PDBs (`namespace/name`) someone else is disturbing now: their gaps are not Podherd's.
        self.excused = excused
        self.findings = Findings()
        self._known: set[str] = set()
        self._transitions: set[str] = set()  # workloads their controllers rolled out or scaled, not done yet
        self._replicas: dict[str, int] = {}  # each workload's replicas at the last sample
        self.checks = checks  # the executor's room checks (audit stream), read when the run ends
        self.history = History()

    async def run(self, stop: asyncio.Event) -> Findings:
        watches = []
        for kind, path in WATCHED.items():
            listing = msgspec.json.decode(await self.kube.arequest("GET", path))
            items = listing.get("items") or []
            if kind == POD:
                self._known = {p["metadata"]["uid"] for p in items}
            self.history.listed(kind, items)
            version = listing["metadata"]["resourceVersion"]
            watches.append(asyncio.create_task(self._watch(kind, path, version)))
        try:
            while not stop.is_set():
                await self.sample()
                await wait_event(stop, self.interval)
            await self.sample()
        finally:
            await cancel_and_wait(*watches)
        self.findings.surge_breaches, self.findings.surges_watched = surge_floor_breaches(self.history.events)
        if self.checks is not None:
            mode = self.args.default_job_mode
            self.findings.history = replay(self.history, await self.checks(), mode)
        return self.findings

    async def sample(self) -> None:
        f = self.findings
        try:
            await self._sample_ledger()
        except (RedisError, OSError):
            f.ledger_unavailable += 1  # Redis restarting: nothing to read, nothing admitted either
        workloads = [
            obj
            for path in ("/apis/apps/v1/deployments", "/apis/apps/v1/statefulsets")
            for obj in await self._items(path)
        ]
        pdbs = await self._items("/apis/policy/v1/poddisruptionbudgets")
        # Read after the objects: a disturbance is excused before it is made, so one these objects show is
        # excused here (read before, an excuse set while they were listed would be missed).
        excused = self.excused()
        # A workload its controller is still rolling out or scaling owns its gap (and its PDB's), not Podherd.
        # A workload scaled up since the last sample is in transition too, however settled it looks now
        # (its new pods starting: a surge's among them), until they are available.
        before, self._replicas = self._replicas, {_key(obj): _replicas(obj) for obj in workloads}
        self._transitions = {
            _key(obj)
            for obj in workloads
            if transitioning(
                obj,
                was=_key(obj) in self._transitions or _replicas(obj) > before.get(_key(obj), _replicas(obj)),
            )
        }
        excused |= self._transitions
        for obj in workloads:
            breach = workload_breach(obj, self.args)
            if breach and _key(obj) not in excused:
                f.workload_breaches.append(breach)
        wanted = {_key(obj): int((obj.get("spec") or {}).get("replicas") or 0) for obj in workloads}
        for obj in pdbs:
            breach = pdb_breach(obj)
            expected = int((obj.get("status") or {}).get("expectedPods") or 0)
            # A PDB still counting another set of pods than its workload wants (old and new ReplicaSets
            # during a rollout) describes the controller's transition, not a disruption.
            in_transition = _key(obj) in wanted and expected != wanted[_key(obj)]
            if breach and _key(obj) not in excused and not in_transition:
                f.pdb_breaches.append(f"{breach} at {_now()}; {await self._unhealthy(obj)}")
        f.samples += 1

    async def _unhealthy(self, pdb: dict[str, Any]) -> str:
        """Which of a breached PDB's pods are not Ready, or going, and since when: whose gap it is."""
        selector = ((pdb.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        labels = ",".join(f"{k}={v}" for k, v in selector.items())
        pods = await self._items(
            f"/api/v1/namespaces/{pdb['metadata']['namespace']}/pods?labelSelector={labels}"
        )
        unhealthy = [_why_unhealthy(p) for p in pods if not _healthy(p)]
        return "unhealthy: " + (", ".join(unhealthy) or "none listed")

    async def _items(self, path: str) -> list[dict[str, Any]]:
        try:
            body = await self.kube.arequest("GET", path)
        except KubeError:
            return []
        items: list[dict[str, Any]] = msgspec.json.decode(body).get("items") or []
        return items

    async def _sample_ledger(self) -> None:
        used, _ = await self.ledger.usage()
        for key, members in used.items():
            kind = limit_of(key)
            self.findings.peak_slots[kind] = max(self.findings.peak_slots.get(kind, 0), len(members))
            limit = slot_limit(key, self.args)
            if limit is not None and len(members) > limit:
                self.findings.slot_breaches.append(f"{key}: {len(members)} > {limit}")

    async def _watch(self, kind: str, path: str, version: str) -> None:
        while True:  # a watch the server ends is resumed where it stopped
            query = [("watch", "true"), ("resourceVersion", version), ("allowWatchBookmarks", "true")]
            async for line in self.kube.stream(path, query, read_timeout=600):
                event = msgspec.json.decode(line)
                obj = event.get("object") or {}
                version = (obj.get("metadata") or {}).get("resourceVersion") or version
                self.history.add(kind, event.get("type") or "", obj)
                if kind == POD:
                    self._seen(event.get("type"), obj)

    def _seen(self, kind: str | None, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if kind in ("BOOKMARK", "ERROR") or meta.get("uid") in self._known:
            return
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        if key in self.ignore_pods:
            return
        for c in (obj.get("status") or {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable":
                self.findings.pending_replacements.add(key)


def deployment_watchdog(
    kube: KubeClient,
    store: aioredis.Redis,
    config: PodherdConfig,
    *,
    ignore_pods: frozenset[str] = frozenset(),
) -> Watchdog:
    """The watchdog of a running deployment of Podherd (`config`'s), its evictions held against the room
    checks on its audit stream (read as the deployment's own client reads it)."""
    return Watchdog(
        kube,
        store,
        config.redis.key_prefix,
        args=config.migration_controller,
        ignore_pods=ignore_pods,
        checks=lambda: room_checks(config.nats.url, config.nats.subject_prefix, tls=config.nats.tls),
    )
