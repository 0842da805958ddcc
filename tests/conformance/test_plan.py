"""A defragmentation plan carried out on either engine: `podherd plan --apply` for a pod as large as a node,
pending in a cluster whose every node is half used; each move a job whose room koord-scheduler (on the real
engine) placed first, then the emptied node takes the pending pod."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from kubesim.scenarios import fragmented
from podherd.harness.servers import Server
from tests.conformance.conftest import Scoped
from tests.conformance.test_migrations import until_no_reservations
from tests.conformance.watched import watched
from tests.e2e.pipeline import GROUP, TERMINAL, VERSION, pipeline_config, podherd
from tests.kube import watch_until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


def jobs_of(c: Scoped, jobs: dict[str, Any]) -> dict[str, Any]:
    return {k: j for k, j in jobs.items() if j["spec"]["podRef"].get("namespace") == c.namespace}


async def test_a_defragmentation_plan_moves_pods_into_room_and_the_pending_pod_lands(
    engine_cluster: Callable[[dict[str, Any]], Scoped],
    nats_srv: Server,
    redis_srv: Server,
    test_id: str,
    tmp_path: Path,
) -> None:
    c = engine_cluster(fragmented(nodes=3))
    big = f"{c.namespace}/big"
    config = pipeline_config(c.kube.handle, nats_srv, redis_srv, test_id)
    path = tmp_path / "podherd.yaml"
    path.write_text(yaml.safe_dump(msgspec.to_builtins(config)))
    dry = await asyncio.to_thread(podherd, path, "plan", "--pod", big, "-o", "json")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["pending"] == big and len(plan["moves"]) == 2, plan
    async with watched(config):
        applied = await asyncio.to_thread(podherd, path, "plan", "--pod", big, "--apply")
        assert applied.returncode == 0, applied.stderr
        jobs = await asyncio.to_thread(
            watch_until,
            c.kube.custom.list_cluster_custom_object,
            lambda seen: (
                len(ended := jobs_of(c, seen)) == 2
                and all((j.get("status") or {}).get("phase") in TERMINAL for j in ended.values())
            ),
            90,
            group=GROUP,
            version=VERSION,
            plural="podmigrationjobs",
        )
        placed = await asyncio.to_thread(
            watch_until,
            c.kube.core.list_namespaced_pod,
            lambda pods: bool(pods[big].spec.node_name),
            90,
            namespace=c.namespace,
            field_selector="metadata.name=big",
        )
        await until_no_reservations(c)
    phases = [j["status"]["phase"] for j in jobs_of(c, jobs).values()]
    assert phases == ["Succeeded", "Succeeded"], [j["status"] for j in jobs_of(c, jobs).values()]
    assert placed[big].spec.node_name == plan["empty"]
