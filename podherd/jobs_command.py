"""`podherd jobs`: the PodMigrationJobs as kubectl shows objects: a table (`-o wide` adds each job's mode
and status message, the why of a wait), or whole as JSON or YAML; `-l` selects by label, `-w` goes on
printing each change as it comes."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import kubernetes
import yaml

from podherd.client import job_rows, kube_client, kube_get, now_utc, table
from shared.api import paths
from shared.api.pmj import GROUP, VERSION
from shared.config import PodherdConfig

COLUMNS = ("NAME", "PHASE", "REASON", "POD", "NODE", "AGE")
WIDE = (*COLUMNS, "MODE", "MESSAGE")


def command(config: PodherdConfig, *, output: str, selector: str | None, watch: bool) -> int:
    with kube_client(config) as kube:
        path = paths.JOBS + (f"?labelSelector={quote(selector)}" if selector else "")
        listing = kube_get(kube, path)
        mode = config.migration_controller.default_job_mode
        show(listing.get("items") or [], output, header=True, mode=mode)
        if not watch:
            return 0
        version = (listing.get("metadata") or {}).get("resourceVersion")
        follow = kubernetes.watch.Watch()
        api = kubernetes.client.CustomObjectsApi(kube.api)
        for event in follow.stream(
            api.list_cluster_custom_object,
            GROUP,
            VERSION,
            "podmigrationjobs",
            label_selector=selector or "",
            resource_version=version,
        ):
            show([event["object"]], output, header=False, mode=mode)
    return 0


def show(items: list[dict[str, Any]], output: str, *, header: bool, mode: str) -> None:
    """`mode`: what a job that names none runs as (`defaultJobMode`)."""
    if output == "json":
        print(json.dumps(items if header else items[0]), flush=True)
    elif output == "yaml":
        print(yaml.safe_dump(items if header else items[0], sort_keys=False), end="---\n", flush=True)
    else:
        rows = job_rows(items, now_utc())
        if output == "wide":
            extra = {i["metadata"]["name"]: _wide(i, mode) for i in items}
            rows = [(*row, *extra[row[0]]) for row in rows]
        text = table(WIDE if output == "wide" else COLUMNS, rows)
        print(text if header else text.split("\n", 1)[-1], flush=True)


def _wide(item: dict[str, Any], mode: str) -> tuple[str, str]:
    spec, status = item.get("spec") or {}, item.get("status") or {}
    return str(spec.get("mode") or mode), str(status.get("message") or "")
