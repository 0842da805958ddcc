"""What the kubelet reports of a pod it runs: each container's state, the pod's phase and conditions."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubesim.apiserver.records import Obj, now_iso
from kubesim.kubelet import sandbox

HOST_IP = "127.0.0.1"
# The kubelet's crash back-off: a container that crashed `streak` times in a row (counting again once one
# start ran BACKOFF_RESET seconds) is started again at once the first time, then after 10 s, 20 s, ... 300 s.
BACKOFF_START, BACKOFF_MAX, BACKOFF_RESET = 10.0, 300.0, 600.0


@dataclass
class Container:
    """One container of a pod kubesim runs: its spec, and what the kubelet knows of its current start."""

    spec: dict[str, Any]
    restarts: int = 0
    state: dict[str, Any] = field(default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}})
    last_state: dict[str, Any] = field(default_factory=dict)
    ready: bool = False
    started: bool = False
    process: asyncio.subprocess.Process | None = None

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    def entry(self) -> dict[str, Any]:
        """Its `containerStatuses` entry."""
        entry: dict[str, Any] = {
            "name": self.name,
            "image": self.spec.get("image", ""),
            "imageID": "",
            "ready": self.ready,
            "started": self.started and "running" in self.state,
            "restartCount": self.restarts,
            "state": self.state,
        }
        if self.last_state:
            entry["lastState"] = self.last_state
        return entry


def pod_conditions(status: Obj, ready: bool, gates: Iterable[str] = ()) -> None:
    """The conditions the kubelet owns, `ready` being whether every container is: the pod is Ready when they
    are and every readiness gate's condition (written by whoever owns it) is True. Conditions the kubelet
    does not own (a readiness gate's, DisruptionTarget) are kept."""
    stamp = now_iso()
    current = status.get("conditions") or []
    previous = {c["type"]: c for c in current}
    unready = [_unready_gate(previous.get(gate), gate) for gate in gates]
    unready = [message for message in unready if message]
    value = "True" if ready else "False"
    wanted: dict[str, dict[str, str]] = {
        "PodScheduled": {"status": "True"},
        "Initialized": {"status": "True"},
        "ContainersReady": {"status": value},
        "Ready": {"status": value},
    }
    if ready and unready:
        reason = {"reason": "ReadinessGatesNotReady", "message": ", ".join(unready)}
        wanted["Ready"] = {"status": "False", **reason}
    conditions = []
    for kind, state in wanted.items():
        old = previous.get(kind)
        changed = old is None or old.get("status") != state["status"]
        stamp_kept = stamp if changed else old.get("lastTransitionTime", stamp)  # type: ignore[union-attr]
        conditions.append({"type": kind, **state, "lastTransitionTime": stamp_kept})
    status["conditions"] = conditions + [c for c in current if c.get("type") not in wanted]


def gates_hold(pod: Obj) -> bool:
    """Whether every readiness gate of the pod has its condition True."""
    conditions = {c.get("type"): c for c in (pod.get("status") or {}).get("conditions") or []}
    return not any(_unready_gate(conditions.get(gate), gate) for gate in readiness_gates(pod))


def readiness_gates(pod: Obj) -> list[str]:
    return [str(g.get("conditionType")) for g in (pod.get("spec") or {}).get("readinessGates") or []]


def _unready_gate(condition: Obj | None, gate: str) -> str:
    if condition is None:
        return f'corresponding condition of pod readiness gate "{gate}" does not exist.'
    if condition.get("status") != "True":
        return f'the status of pod readiness gate "{gate}" is not "True", but {condition.get("status")}'
    return ""


def with_status(pod: Obj, ip: str, containers: list[Container]) -> Obj:
    """`pod` (a copy) with the status the kubelet reports for `containers` running at `ip`."""
    new = copy.deepcopy(pod)
    status = new.setdefault("status", {})
    status.update(podIP=ip, podIPs=[{"ip": ip}], hostIP=HOST_IP, hostIPs=[{"ip": HOST_IP}])
    status.setdefault("startTime", now_iso())
    status["containerStatuses"] = [c.entry() for c in containers]
    states = [c.state for c in containers]
    if all("terminated" in s for s in states) and restart_policy(pod) != "Always":
        status["phase"] = "Failed" if any(s["terminated"]["exitCode"] != 0 for s in states) else "Succeeded"
    elif any("running" in s for s in states) or any(c.restarts for c in containers):
        status["phase"] = "Running"
    else:
        status["phase"] = "Pending"
    pod_conditions(status, all(c.ready for c in containers), readiness_gates(pod))
    return new


def restart_delay(streak: int) -> float:
    return 0.0 if streak <= 1 else min(BACKOFF_START * 2 ** (streak - 2), BACKOFF_MAX)


def restart_policy(pod: Obj) -> str:
    return str(pod["spec"].get("restartPolicy") or "Always")


def restarts(pod: Obj, exit_code: int) -> bool:
    policy = restart_policy(pod)
    return policy == "Always" or (policy == "OnFailure" and exit_code != 0)


# What the kubelet takes of a failed container's log for its termination message (FallbackToLogsOnError):
# kubecontainer.MaxContainerTerminationMessageLogLines and ...LogLength.
MESSAGE_LOG_LINES, MESSAGE_LOG_BYTES = 80, 2048


def terminated(
    code: int, started_at: str, log_file: Path, *, spec: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A container's `terminated` state for exit status `code` (negative: killed by that signal); with
    `terminationMessagePolicy: FallbackToLogsOnError` in its `spec`, a failed container's message is the
    tail of its log, as the kubelet makes it."""
    exit_code = code if code >= 0 else 128 - code
    state: dict[str, Any] = {
        "exitCode": exit_code,
        "reason": "Completed" if code == 0 else "Error",
        "startedAt": started_at,
        "finishedAt": now_iso(),
    }
    if code == sandbox.START_ERROR:  # the runtime's StartError: the sandbox's last word says why
        with contextlib.suppress(OSError, IndexError):
            last = log_file.read_text(errors="replace").rstrip().splitlines()[-1]
            if last.startswith("kubesim: "):
                state.update(reason="StartError", message=last.removeprefix("kubesim: "))
    elif exit_code != 0 and (spec or {}).get("terminationMessagePolicy") == "FallbackToLogsOnError":
        with contextlib.suppress(OSError):
            lines = log_file.read_bytes().splitlines(keepends=True)[-MESSAGE_LOG_LINES:]
            tail = b"".join(lines)[-MESSAGE_LOG_BYTES:]
            if tail:
                state["message"] = tail.decode(errors="replace")
    return state
