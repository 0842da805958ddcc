"""`podherd drain`, as an operator runs it, on either engine: every pod on the node moved into room held
first, the node cordoned and said drained; `--atomic` reserves room for all before the first eviction."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from podherd.harness.servers import Server
from tests.conformance.conftest import Scoped
from tests.conformance.test_migrations import app_pods, until_no_reservations
from tests.conformance.watched import watched
from tests.e2e.pipeline import pipeline_config, podherd

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


def spread(*apps: str) -> dict[str, Any]:
    """Three nodes, and one pod of each app on each: a drain moves one pod of each workload."""
    nodes = ["node-1", "node-2", "node-3"]
    workload = {
        "replicas": 3,
        "requests": {"cpu": "500m", "memory": "256Mi"},
        "schedulerName": "koord-scheduler",
    }
    return {
        "nodes": [{"name": "node-{i}", "count": 3, "capacity": {"cpu": "4", "memory": "16Gi"}}],
        "workloads": [{**workload, "kind": "Deployment", "name": app, "placement": nodes} for app in apps],
    }


@pytest.mark.parametrize("atomic", [False, True], ids=["drain", "atomic"])
async def test_podherd_drain_moves_every_pod_off_the_node_into_held_room(
    engine_cluster: Callable[[dict[str, Any]], Scoped],
    nats_srv: Server,
    redis_srv: Server,
    test_id: str,
    tmp_path: Path,
    atomic: bool,
) -> None:
    c = engine_cluster(spread("web", "api"))
    node = f"{c.scope}-node-1"
    on_node = {n for app in ("web", "api") for n, p in app_pods(c, app).items() if p.spec.node_name == node}
    config = pipeline_config(c.kube.handle, nats_srv, redis_srv, test_id)
    path = tmp_path / "podherd.yaml"
    path.write_text(yaml.safe_dump(msgspec.to_builtins(config)))
    argv = ["drain", node, "--timeout", "90s", *(["--atomic"] if atomic else [])]
    async with watched(config):
        done = await asyncio.to_thread(podherd, path, *argv, timeout=150)
        await until_no_reservations(c)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(on_node)} of {len(on_node)} pods moved" in done.stdout, done.stdout
    assert f"node/{node} drained" in done.stdout
    left = {n for app in ("web", "api") for n, p in app_pods(c, app).items() if p.spec.node_name == node}
    assert len(on_node) == 2 and left == set()
    assert c.kube.core.read_node(node).spec.unschedulable
