"""The demo's mistyped job: a PodMigrationJob with `spec.mode: evictdirectly` (a typo Koordinator's schema
lets through) beside the plan's jobs. Where the admission gate runs (`--in-cluster`, as deploy/ installs
it), it is refused at the door naming the field; elsewhere it must end Failed/InvalidSpec naming the field,
with one status written. Either way it moves nothing."""

from __future__ import annotations

from typing import Any

import msgspec

from podherd.client import audit_records
from shared.api import paths
from shared.api.pmj import API_VERSION, KIND, TERMINAL_PHASES
from shared.kube.client import KubeClient, KubeError
from shared.nats import bus

NAME = "demo-mistyped"


async def create(kube: KubeClient, namespace: str, pod: str) -> str | None:
    """None when it was made; what refused it otherwise (the gate's words, as the API server passes them)."""
    body = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": NAME},
        "spec": {"podRef": {"namespace": namespace, "name": pod}, "mode": "evictdirectly"},
    }
    try:
        await kube.arequest("POST", paths.JOBS, body=body)
    except KubeError as exc:
        if exc.status != 422:
            raise
        return exc.message
    return None


async def outcome(
    kube: KubeClient, nc: Any, subjects: bus.Subjects, *, refused: str | None
) -> dict[str, Any]:
    """How it ended: phase, reason and message, and how many times it was written as ended; or that it was
    refused when it was written."""
    if refused is not None:
        return {"phase": "Refused", "reason": "Invalid", "message": refused, "endings": 0}
    job = await kube.get_json(paths.job(NAME)) or {}
    status = job.get("status") or {}
    endings = 0
    if status.get("phase") in TERMINAL_PHASES:
        async for data in audit_records(nc, subjects, NAME, follow=False):
            record = msgspec.json.decode(data)
            endings += record.get("action") == "transition" and record.get("phase") in TERMINAL_PHASES
    return {
        "phase": status.get("phase") or "Pending",
        "reason": status.get("reason"),
        "message": status.get("message"),
        "endings": endings,
    }


def ended_once(found: dict[str, Any]) -> bool:
    """Ended InvalidSpec once, or refused at the door, naming the field either way."""
    if found["phase"] == "Refused":
        return f"PodMigrationJob {NAME} cannot run: spec.mode" in str(found["message"])
    return (found["phase"], found["reason"], found["endings"]) == ("Failed", "InvalidSpec", 1) and str(
        found["message"]
    ).startswith("spec.mode")
