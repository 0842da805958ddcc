"""The demo's mistyped job: a PodMigrationJob with `spec.mode: evictdirectly` (a typo Koordinator's schema
lets through) beside the plan's jobs. It must end Failed/InvalidSpec naming the field, with one status
written, and move nothing."""

from __future__ import annotations

from typing import Any

import msgspec

from podherd.client import audit_records
from shared import bus
from shared.api import paths
from shared.api.pmj import API_VERSION, KIND, TERMINAL_PHASES
from shared.kube import KubeClient

NAME = "demo-mistyped"


async def create(kube: KubeClient, namespace: str, pod: str) -> str:
    body = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": NAME},
        "spec": {"podRef": {"namespace": namespace, "name": pod}, "mode": "evictdirectly"},
    }
    await kube.arequest("POST", paths.JOBS, body=body)
    return NAME


async def outcome(kube: KubeClient, nc: Any, subjects: bus.Subjects) -> dict[str, Any]:
    """How it ended: phase, reason and message, and how many times it was written as ended."""
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
    return (found["phase"], found["reason"], found["endings"]) == ("Failed", "InvalidSpec", 1) and str(
        found["message"]
    ).startswith("spec.mode")
