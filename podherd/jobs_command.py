"""`podherd jobs [NAME]`: the PodMigrationJobs as kubectl shows objects: a table (`-o wide` adds each job's
mode and status message, the why of a wait; `--no-headers` leaves the header out), their names (`-o name`),
or whole as JSON or YAML (a `List` with `items`, or the one job asked for, without `managedFields`); `-l`
selects by label, `-w` goes on printing each change as it comes. No job: `No resources found` on standard
error; a job asked for by name that does not exist: kubectl's NotFound line, exit 1."""

from __future__ import annotations

import json
import sys
from typing import Any
from urllib.parse import quote

import kubernetes
import yaml

from podherd.client import job_rows, kube_client, kube_get, now_utc, table
from podherd.errors import CliError
from shared.api import paths
from shared.api.pmj import GROUP, PLURAL, VERSION
from shared.config.model import PodherdConfig

COLUMNS = ("NAME", "PHASE", "REASON", "POD", "NODE", "AGE")
WIDE = (*COLUMNS, "MODE", "MESSAGE")
OUTPUTS = ("table", "wide", "name", "json", "yaml")
RESOURCE = f"{PLURAL}.{GROUP}"


def command(
    config: PodherdConfig,
    name: str | None = None,
    *,
    output: str,
    selector: str | None,
    watch: bool,
    headers: bool = True,
) -> int:
    mode = config.migration_controller.default_job_mode
    with kube_client(config) as kube:
        if name is not None:
            found = kube_get(kube, paths.job(name), missing_ok=True)
            if found is None:
                raise CliError(f'Error from server (NotFound): {RESOURCE} "{name}" not found')
            items, version = [found], found["metadata"].get("resourceVersion")
            print(render([found], output, header=headers, mode=mode, single=True), flush=True)
        else:
            listing = kube_get(kube, paths.JOBS + (f"?labelSelector={quote(selector)}" if selector else ""))
            items, version = (
                listing.get("items") or [],
                (listing.get("metadata") or {}).get("resourceVersion"),
            )
            if not items and output in ("table", "wide", "name"):
                print("No resources found", file=sys.stderr, flush=True)
            else:
                print(render(items, output, header=headers, mode=mode, single=False), flush=True)
        if not watch:
            return 0
        follow = kubernetes.watch.Watch()
        api = kubernetes.client.CustomObjectsApi(kube.api)
        for event in follow.stream(
            api.list_cluster_custom_object,
            GROUP,
            VERSION,
            PLURAL,
            label_selector=selector or "",
            field_selector=f"metadata.name={name}" if name else "",
            resource_version=version,
        ):
            # The header comes with the first row, as kubectl's watch prints it.
            first, items = not items and headers, [event["object"]]
            print(render(items, output, header=first, mode=mode, single=True), flush=True)
    return 0


def render(items: list[dict[str, Any]], output: str, *, header: bool, mode: str, single: bool) -> str:
    """`items` as `output` shows them; `single`: one object asked for (or one change of a watch), shown as
    itself rather than as a List. `mode`: what a job that names none runs as (`defaultJobMode`)."""
    if output in ("json", "yaml"):
        shown = [_bare(i) for i in items]
        document: Any = shown[0] if single else {"apiVersion": "v1", "kind": "List", "items": shown}
        if output == "json":
            return json.dumps(document, indent=4)
        return str(yaml.safe_dump(document, sort_keys=False)).rstrip("\n") + ("\n---" if single else "")
    if output == "name":
        return "\n".join(f"podmigrationjob.{GROUP}/{i['metadata']['name']}" for i in items)
    rows = job_rows(items, now_utc())
    if output == "wide":
        extra = {i["metadata"]["name"]: _wide(i, mode) for i in items}
        rows = [(*row, *extra[row[0]]) for row in rows]
    text = table(WIDE if output == "wide" else COLUMNS, rows)
    return text if header else text.split("\n", 1)[-1]


def _bare(item: dict[str, Any]) -> dict[str, Any]:
    """The object without `metadata.managedFields` (as kubectl prints it by default)."""
    meta = {k: v for k, v in (item.get("metadata") or {}).items() if k != "managedFields"}
    return {**item, "metadata": meta}


def _wide(item: dict[str, Any], mode: str) -> tuple[str, str]:
    spec, status = item.get("spec") or {}, item.get("status") or {}
    return str(spec.get("mode") or mode), str(status.get("message") or "")
