"""Which pods of a node a drain moves, and how (pure).

kubectl drain's filters, in its order and words (k8s.io/kubectl/pkg/drain): a pod already going is left to
go; a DaemonSet's pod stays (refused without `--ignore-daemonsets`); a mirror pod stays; a running pod with
an emptyDir needs `--delete-emptydir-data`; a running pod without a controller needs `--force`. A finished
pod (Succeeded, Failed) holds nothing and is not moved. (`--pod-selector` is the API server's to apply
when the pods are listed.)

Each pod that moves gets a job, and its strategy: ReservationFirst, unless nothing would take a Reservation
made for it: a bare pod (nothing recreates it) and a pod whose scheduler is not one of `schedulerNames`
(only those honour Reservations) are evicted directly, with the reason in the job's annotations and
status. The drain's flags lift the arbitrator's matching filters for its own jobs only.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from shared.api import annotations as known
from shared.api.drain import LIFT_BARE_POD, LIFT_LOCAL_STORAGE, MOVING, RESERVING, ROLLED_BACK, DrainOptions
from shared.api.pmj import MODE_EVICT_DIRECTLY, MODE_RESERVATION_FIRST

DAEMONSET_FATAL = "DaemonSet-managed Pods (use --ignore-daemonsets to ignore)"
DAEMONSET_WARNING = "ignoring DaemonSet-managed Pods"
LOCAL_STORAGE_FATAL = "Pods with local storage (use --delete-emptydir-data to override)"
LOCAL_STORAGE_WARNING = "deleting Pods with local storage"
UNMANAGED_FATAL = "Pods that declare no controller (use --force to override)"
UNMANAGED_WARNING = "deleting Pods that declare no controller"
FINISHED = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Move:
    namespace: str
    name: str
    uid: str
    mode: str
    lifts: frozenset[str] = frozenset()
    why: str = ""  # why this strategy, when it is not ReservationFirst

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class DrainPlan:
    moves: list[Move] = field(default_factory=list)
    stays: dict[str, str] = field(default_factory=dict)  # pod -> why it stays on the node
    refused: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))  # message -> pods
    warned: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))  # message -> pods
    going: dict[str, str] = field(default_factory=dict)  # pod -> uid, of those already terminating

    def let(self, pod: str, flag: bool, *, fatal: str, warning: str) -> bool:
        """Whether the flag that lets `pod` go (or stay, for a DaemonSet's) was given: with it, a warning;
        without it, the drain is refused naming the pod."""
        (self.warned[warning] if flag else self.refused[fatal]).append(pod)
        return flag

    def errors(self) -> list[str]:
        """Why the drain cannot go ahead, one line per reason naming its pods (as kubectl says it)."""
        return [f"cannot delete {message}: {', '.join(pods)}" for message, pods in self.refused.items()]

    def warnings(self) -> list[str]:
        return [f"{message}: {', '.join(pods)}" for message, pods in self.warned.items()]


def plan_drain(pods: list[dict[str, Any]], options: DrainOptions, *, scheduler_names: list[str]) -> DrainPlan:
    """The plan for the pods on a node (the API's JSON), in the order given."""
    plan = DrainPlan()
    for pod in pods:
        meta = pod.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        _plan_pod(plan, pod, key=key, options=options, scheduler_names=scheduler_names)
    return plan


def _plan_pod(
    plan: DrainPlan, pod: dict[str, Any], *, key: str, options: DrainOptions, scheduler_names: list[str]
) -> None:
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    phase = (pod.get("status") or {}).get("phase")
    if meta.get("deletionTimestamp"):
        plan.stays[key] = "already terminating"
        plan.going[key] = meta.get("uid", "")  # perhaps by this drain's job, run before
        return
    controller = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
    if controller is not None and controller.get("kind") == "DaemonSet" and phase not in FINISHED:
        if plan.let(key, options.ignore_daemonsets, fatal=DAEMONSET_FATAL, warning=DAEMONSET_WARNING):
            plan.stays[key] = "DaemonSet-managed"
        return
    if known.CONFIG_MIRROR in (meta.get("annotations") or {}):
        plan.stays[key] = "a mirror pod"
        return
    if phase in FINISHED:
        plan.stays[key] = f"{phase}: holds nothing"
        return
    lifts: set[str] = set()
    if any("emptyDir" in volume for volume in spec.get("volumes") or []):
        if not plan.let(
            key, options.delete_emptydir_data, fatal=LOCAL_STORAGE_FATAL, warning=LOCAL_STORAGE_WARNING
        ):
            return
        lifts.add(LIFT_LOCAL_STORAGE)
    mode, why = MODE_RESERVATION_FIRST, ""
    if controller is None:
        if not plan.let(key, options.force, fatal=UNMANAGED_FATAL, warning=UNMANAGED_WARNING):
            return
        lifts.add(LIFT_BARE_POD)
        mode, why = MODE_EVICT_DIRECTLY, "a bare pod: nothing would recreate it to take a Reservation"
    elif (scheduler := spec.get("schedulerName") or "default-scheduler") not in scheduler_names:
        mode = MODE_EVICT_DIRECTLY
        why = f"its scheduler {scheduler} is not one of schedulerNames ({', '.join(scheduler_names)})"
    plan.moves.append(
        Move(
            meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", ""), mode, frozenset(lifts), why
        )
    )


@dataclass(frozen=True)
class Room:
    """What an atomic drain knows of one of its jobs' room."""

    pod: str
    placed: bool  # its Reservation is placed on a node (or it needs none: evicted directly, or ended)
    why: str = ""  # while not placed: the scheduler's word, or what the job is waiting for


def atomic_step(rooms: list[Room], *, now: float, deadline: float) -> tuple[str, list[str]]:
    """An atomic drain's next phase: Moving once every pod has room; RolledBack, naming each pod without
    room and why, once the deadline passed first; Reserving meanwhile."""
    if all(room.placed for room in rooms):
        return MOVING, []
    if now < deadline:
        return RESERVING, []
    return ROLLED_BACK, [f"{r.pod}: {r.why or 'no room found'}" for r in rooms if not r.placed]
