"""`podherd rebalance` through the four services on a skewed cluster (kubesim's `rebalance` scenario), with
the watchdog on; and the same policy run as the descheduler runs it, on a second copy of the cluster.

Podherd: LowNodeUtilization brings every node under its targetThresholds, the spread violation is repaired,
HighNodeUtilization empties the nodes it names; no replacement is ever Pending, no limit is exceeded, every
eviction goes into room held for it. The descheduler's way (evict, reserve nothing, nodeFit off) leaves pods
where it meant to move them from: the `db` pods can only live in the hot zone, so their replacements land
back on the overutilized nodes, and HighNodeUtilization's replacements go to the emptiest nodes, which
are the ones it meant to empty.

`make test` runs a 10-node copy through the services; the 50-node run, beside the descheduler's way, is left
to `make chaos` (`pytest -m full`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
import redis.asyncio as aioredis
import yaml

from kubesim.scenarios import skewed
from kubesim.sim import SimHandle
from podherd.harness import descheduler_style
from podherd.harness.servers import Server
from podherd.watchdog.invariants import Findings, deployment_watchdog
from shared.kube.client import KubeClient
from tests.e2e.pipeline import pipeline, pipeline_config, podherd
from tests.e2e.test_lifecycle import until_no_reservations
from tests.kube import Kube, client_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
THRESHOLDS = {"cpu": 20.0, "memory": 20.0, "pods": 20.0}
TARGETS = {"cpu": 50.0, "memory": 50.0, "pods": 50.0}
CONSOLIDATE = {"cpu": 10.0, "memory": 10.0, "pods": 10.0}
ZONE = "topology.kubernetes.io/zone"


def objects(kube: Kube) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return descheduler_style.objects(kube.core)


def fill(kube: Kube) -> dict[str, dict[str, float]]:
    nodes, pods = objects(kube)
    usage = descheduler_style.Usage.of(nodes, pods)
    return {n: usage.percent(n) for n in usage.allocatable}


def spread_skew(kube: Kube) -> int:
    nodes, pods = objects(kube)
    zone = {n["metadata"]["name"]: n["metadata"]["labels"][ZONE] for n in nodes}
    counts = dict.fromkeys(set(zone.values()), 0)
    for pod in pods:
        if pod["metadata"].get("labels", {}).get("app") == "front" and pod["spec"].get("nodeName"):
            counts[zone[pod["spec"]["nodeName"]]] += 1
    return max(counts.values()) - min(counts.values())


def rebalance(config: Path, policy: str, *extra: str) -> dict[str, Any]:
    plan = podherd(config, "plan", "--policy", policy, "-o", "json", *extra)
    assert plan.returncode == 0, plan.stderr
    done = podherd(config, "rebalance", "--policy", policy, *extra, timeout=300)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    planned: dict[str, Any] = json.loads(plan.stdout)
    return planned


async def podherd_way(
    handle: SimHandle, nats_srv: Server, redis_srv: Server, test_id: str, tmp_path: Path
) -> dict[str, Any]:
    kube = client_for(handle)
    config = pipeline_config(handle, nats_srv, redis_srv, test_id)
    path = tmp_path / "podherd.yaml"
    path.write_text(yaml.safe_dump(msgspec.to_builtins(config)))
    watched = KubeClient.from_config(config.kubernetes)
    redis = aioredis.from_url(config.redis.url)
    watchdog = deployment_watchdog(watched, redis, config)
    stop = asyncio.Event()
    watching = asyncio.create_task(watchdog.run(stop))
    report: dict[str, Any] = {}
    try:
        async with pipeline(config):
            low = await asyncio.to_thread(rebalance, path, "LowNodeUtilization")
            await asyncio.to_thread(until_no_reservations, kube)
            report["LowNodeUtilization"] = {"planned": low, "fill": fill(kube)}
            spread = await asyncio.to_thread(rebalance, path, "RemovePodsViolatingTopologySpreadConstraint")
            await asyncio.to_thread(until_no_reservations, kube)
            report["spread"] = {"planned": spread, "skew": spread_skew(kube)}
            thresholds = ",".join(f"{k}={v:g}" for k, v in CONSOLIDATE.items())
            # Minutes after those moves, a plan leaves them be; told to look back no time, it consolidates.
            held = await asyncio.to_thread(
                podherd,
                path,
                "plan",
                "--policy",
                "HighNodeUtilization",
                "--thresholds",
                thresholds,
                "-o",
                "json",
            )
            report["held back"] = json.loads(held.stdout)
            high = await asyncio.to_thread(
                rebalance, path, "HighNodeUtilization", "--thresholds", thresholds, "--recent", "0s"
            )
            await asyncio.to_thread(until_no_reservations, kube)
            report["HighNodeUtilization"] = {"planned": high, "pods": objects(kube)[1]}
    finally:
        stop.set()
        findings: Findings = await watching
        await watched.aclose()
        await redis.aclose()
    report["findings"] = findings
    return report


def descheduler_way(handle: SimHandle) -> dict[str, Any]:
    """LowNodeUtilization, then HighNodeUtilization, each as the descheduler runs it, each to rest."""
    return descheduler_style.run(
        str(handle.kubeconfig), thresholds=THRESHOLDS, targets=TARGETS, consolidate=CONSOLIDATE, settle=120
    )


@pytest.mark.parametrize("nodes", [pytest.param(10), pytest.param(50, marks=pytest.mark.full)])
async def test_rebalancing_holds_room_for_every_move_where_evicting_and_hoping_does_not(
    kubesim_factory: Callable[..., SimHandle],
    nats_srv: Server,
    redis_srv: Server,
    test_id: str,
    tmp_path: Path,
    nodes: int,
) -> None:
    scenario = skewed(nodes)
    ours = await podherd_way(kubesim_factory(scenario), nats_srv, redis_srv, test_id, tmp_path)

    findings: Findings = ours["findings"]
    assert findings.pending_replacements == set(), findings.pending_replacements
    assert findings.limits_exceeded == 0, (
        findings.slot_breaches,
        findings.workload_breaches,
        findings.pdb_breaches,
    )
    assert findings.evictions_without_room == []
    # LowNodeUtilization: every node under its targets; db (only zone a can take it) stayed.
    low = ours["LowNodeUtilization"]
    assert low["planned"]["measure"]["after"] == 0 and low["planned"]["moves"]
    over = {n: f for n, f in low["fill"].items() if any(f.get(r, 0) > v for r, v in TARGETS.items())}
    assert over == {}
    assert not any(m["pod"].startswith("shop/db-") for m in low["planned"]["moves"])
    # Spread repaired: front's zones within maxSkew 1, one move per wave (the order of landings counts).
    # HighNodeUtilization's moves of front pods, too, go one wave each; the cache pods' (if any) share one.
    assert [m["wave"] for m in ours["spread"]["planned"]["moves"]] == [1, 2, 3, 4]
    assert ours["spread"]["planned"]["measure"]["before"] > 0 and ours["spread"]["skew"] <= 1
    # Within the window, no plan moves a web pod: every one on an underutilized node got there by a move of
    # the last minutes (LowNodeUtilization's).
    held = ours["held back"]
    assert not any(m["pod"].startswith("shop/web-") for m in held["moves"]), held["moves"]
    if nodes < 50:  # on this copy, consolidating would take front pods back where a spread move came from
        assert held["moves"] == [] and any(
            "where a recent move of ReplicaSet/front-" in why for why in held["stays"].values()
        ), held["stays"]
    # HighNodeUtilization: the nodes it names end empty (but for pods that never move).
    high_moves = ours["HighNodeUtilization"]["planned"]["moves"]
    fronts = [m["wave"] for m in high_moves if m["pod"].startswith("shop/front-")]
    assert len(set(fronts)) == len(fronts)
    assert len({m["wave"] for m in high_moves if m["pod"].startswith("shop/cache-")}) <= 1
    emptied = set(ours["HighNodeUtilization"]["planned"]["emptied"])
    assert emptied
    left = [p for p in ours["HighNodeUtilization"]["pods"] if p["spec"].get("nodeName") in emptied]
    assert left == []

    if nodes < 50:
        return  # the side-by-side runs at full size (`make chaos`) and in the demo
    # The descheduler's way, on the same cluster: moves undone (db back on the hot nodes, cache back on the
    # nodes being emptied), or pods stranded.
    theirs = await asyncio.to_thread(descheduler_way, kubesim_factory(skewed(nodes)))
    low_d, high_d = theirs["LowNodeUtilization"], theirs["HighNodeUtilization"]
    assert low_d["moves"] > 0 and high_d["moves"] > 0
    assert len(low_d["undone"]) + len(low_d["stranded"]) >= 1, low_d
    assert len(high_d["undone"]) + len(high_d["stranded"]) >= 1, high_d
    print(
        json.dumps(
            {
                "nodes": nodes,
                "podherd": {
                    "moves": {
                        k: len(ours[k]["planned"]["moves"])
                        for k in ("LowNodeUtilization", "spread", "HighNodeUtilization")
                    },
                    "replacements_pending": len(findings.pending_replacements),
                    "limits_exceeded": findings.limits_exceeded,
                    "evictions_without_room": len(findings.evictions_without_room),
                },
                "descheduler_style": {
                    name: {
                        "evicted": a["moves"],
                        "stranded": len(a["stranded"]),
                        "undone": len(a["undone"]),
                        "over_targets": a["over_targets"],
                    }
                    for name, a in theirs.items()
                },
            }
        )
    )
