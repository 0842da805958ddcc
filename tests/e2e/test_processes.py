"""Podherd as it is deployed: the four services as separate processes (`podherd run <service>`, two replicas
each), each with only its own ClusterRole (kubesim enforces RBAC for their ServiceAccount tokens), and a storm
of 100 intents. Every limit is sampled from the ledger and the cluster throughout; the CLI is checked
against kubectl."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import urllib.request
from collections.abc import Callable
from pathlib import Path

import msgspec
import nats
import pytest
import redis.asyncio as aioredis
import yaml
from prometheus_client.parser import text_string_to_metric_families

from kubesim.sim import SimHandle
from podherd.client import signed
from podherd.harness.processes import SERVICES, ServiceProcess, ServiceProcesses
from podherd.harness.servers import Server
from podherd.install import install, manifests, service_token
from podherd.watchdog.history import room_checks
from podherd.watchdog.invariants import Watchdog
from shared.api import codec
from shared.api.messages import MigrationIntent, PodKey
from shared.kube.client import KubeClient
from shared.nats import bus
from tests import polling
from tests.e2e.pipeline import pipeline_config, podherd
from tests.e2e.test_lifecycle import cluster, start, until_no_reservations, web_pods
from tests.e2e.test_pipeline import until_all_ended
from tests.e2e.test_surge import SURGE_GRANTS
from tests.kube import watch_until

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow]

KUBECTL = shutil.which("kubectl")
STORM = 24


# Grants this run cannot exercise: the Delete and SoftEviction policies. (The drain in it cordons a node and
# lists the pods on it: the tracker's node patch and pod list are used.)
NEEDED_OFF_THIS_PATH = {
    ("executor", "delete", "", "pods"),
    ("executor", "patch", "", "pods"),
    *SURGE_GRANTS,  # Surge (tests/e2e/test_surge.py asserts they are used)
    # A surge taken back without its Deployment's name or pod (tests/integration/test_surger.py uses it)
    ("executor", "list", "apps", "deployments"),
    # A ReplicationController's replicas (tests/e2e/test_workload_kinds.py has one)
    ("watcher", "get", "", "replicationcontrollers/scale"),
    # The nodes nodeFit tries (tests/e2e/test_pipeline.py turns it on)
    ("tracker", "list", "", "nodes"),
}

# The tracker's resync (every 30 s) lists the jobs, its room sweep (every 10 s) lists the Reservations, and
# its collector deletes finished jobs 30 min after they end: a short run may end before any comes round (a
# job lists its workload's Reservations itself only when no replacement its events showed can be claimed).
PERIODIC = {
    ("tracker", "list", "scheduling.koordinator.sh", "podmigrationjobs"),
    ("tracker", "delete", "scheduling.koordinator.sh", "podmigrationjobs"),
    ("tracker", "list", "scheduling.koordinator.sh", "reservations"),
}

# The tracker reads a pod's node only while that pod is terminating when it looks: used or not, by timing.
BY_TIMING = {("tracker", "get", "", "nodes")}


def granted() -> set[tuple[str, str, str, str]]:
    """(service, verb, group, resource) for every rule of every service's ClusterRole in deploy/rbac."""
    out = set()
    for service in SERVICES:
        for doc in manifests("rbac"):
            if doc["kind"] == "ClusterRole" and doc["metadata"]["name"] == f"podherd-{service}":
                for rule in doc["rules"]:
                    for group in rule["apiGroups"]:
                        out |= {(service, v, group, r) for v in rule["verbs"] for r in rule["resources"]}
    return out


def by(processes: ServiceProcesses, service: str) -> list[ServiceProcess]:
    return [p for p in processes.running if p.service == service]


def scrape(proc: ServiceProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(proc.metrics_url, timeout=5) as answer:
        text = answer.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def sample(proc: ServiceProcess, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in scrape(proc).items() if n == name and wanted <= set(ls))


def has(proc: ServiceProcess, name: str, **labels: str) -> bool:
    wanted = set(labels.items())
    return any(n == name and wanted <= set(ls) for n, ls in scrape(proc))


def total(processes: ServiceProcesses, service: str, name: str, **labels: str) -> float:
    return sum(sample(p, name, **labels) for p in by(processes, service))


async def until(condition: Callable[[], bool], within: float) -> None:
    """For values refreshed on a period (gauges), which no event announces: look again until the deadline."""
    await polling.until(lambda: asyncio.to_thread(condition), within=within, what="the gauge", every=0.5)


async def test_four_service_processes_with_their_own_roles_carry_a_storm_of_intents(
    kubesim_factory: Callable[..., SimHandle],
    nats_srv: Server,
    redis_srv: Server,
    test_id: str,
    tmp_path: Path,
) -> None:
    kube = start(
        kubesim_factory,
        # Six pods a node, so maxMigratingPerNode (2) binds throughout the storm rather than by chance.
        cluster(nodes=STORM // 6, web=STORM, node_cpu=16, cpu="100m", pdb={"maxUnavailable": STORM // 2}),
    )
    handle = kube.handle
    config = pipeline_config(
        handle,
        nats_srv,
        redis_srv,
        test_id,
        # Below the replicas (ExpectedReplicas refuses a limit that lets a workload lose them all).
        maxMigratingPerWorkload=STORM * 2 // 3,
        maxUnavailablePerWorkload=STORM * 2 // 3,
    )
    config_path = tmp_path / "podherd.yaml"
    config_path.write_text(yaml.safe_dump(msgspec.to_builtins(config)))
    admin = KubeClient.from_config(config.kubernetes)
    install(admin, rbac=True)
    kubeconfigs = {
        s: handle.kubeconfig_for(tmp_path / f"kubeconfig-{s}", service_token(admin, s)) for s in SERVICES
    }
    processes = ServiceProcesses(config_path, tmp_path / "logs", kubeconfigs)
    redis_client = aioredis.from_url(redis_srv.url)
    watchdog = Watchdog(
        admin,
        redis_client,
        test_id,
        args=config.migration_controller,
        interval=0.05,
        checks=lambda: room_checks(nats_srv.url, test_id),
    )
    stop = asyncio.Event()
    watching: asyncio.Task[object] | None = None
    try:
        processes.start_all(replicas=2)
        await asyncio.to_thread(processes.wait_ready, 90)
        # Each replica is ready on the port it bound itself (ports chosen beforehand once collided).
        assert len({p.port for p in processes.running}) == 8 and all(p.alive() for p in processes.running)
        watching = asyncio.create_task(watchdog.run(stop))
        pods = sorted(web_pods(kube))

        # One pod through the CLI, followed to its end.
        first = await asyncio.to_thread(podherd, config_path, "submit", f"default/{pods[0]}", "--wait")
        assert first.returncode == 0, first.stdout + first.stderr
        assert first.stdout.splitlines()[-1].split()[2] == "Succeeded:", first.stdout
        first_job = first.stdout.split()[1]

        # A node drained through the CLI while the rest go as a storm: half request/reply, half
        # fire-and-forget into the intent stream.
        by_node: dict[str, list[str]] = {}
        for name, live in web_pods(kube).items():
            by_node.setdefault(live.spec.node_name, []).append(name)
        node, drained = max(by_node.items(), key=lambda item: len(item[1]))
        draining = asyncio.create_task(
            asyncio.to_thread(podherd, config_path, "drain", node, "--ignore-daemonsets", "--timeout", "3m")
        )
        # The storm once the node is cordoned: its replacements go elsewhere, the drain moves what it listed.
        await asyncio.to_thread(
            watch_until,
            kube.core.list_node,
            lambda nodes: nodes[f"/{node}"].spec.unschedulable,
            60,
            idle=True,
        )
        nc = await nats.connect(nats_srv.url)
        subjects = bus.Subjects(test_id)
        intents = [
            MigrationIntent(
                idempotency_key=f"storm-{pod}", pod=PodKey(namespace="default", name=pod), requester="t"
            )
            for pod in pods[1:]
            if pod not in drained
        ]
        replies = await asyncio.gather(
            *(
                nc.request(subjects.intent_request, codec.encode(i), timeout=30, headers=signed(config))
                for i in intents
            )
        )
        assert all(json.loads(r.data)["ok"] for r in replies)
        await nc.close()

        jobs = (
            1 + len(drained) + len(intents)
        )  # STORM, or one more when the first one's replacement is drained
        final = await until_all_ended(kube, jobs)
        phases = [j["status"]["phase"] for j in final.values()]
        assert phases.count("Succeeded") == jobs, {p: phases.count(p) for p in set(phases)}
        done = await draining
        assert done.returncode == 0, done.stdout + done.stderr
        assert (
            f"{len(drained)} of {len(drained)} pods moved" in done.stdout
            and f"node/{node} drained" in done.stdout
        )
        assert kube.core.read_node(node).spec.unschedulable
        assert not [p for p in web_pods(kube).values() if p.spec.node_name == node]
        status = await asyncio.to_thread(podherd, config_path, "drain", node, "--status")
        rows = [line.split()[:3] for line in status.stdout.splitlines()[2:]]
        assert len(rows) == len(drained) and {r[2] for r in rows} == {"Succeeded"}, status.stdout
        other = next(n for n in by_node if n != node)
        plan = await asyncio.to_thread(podherd, config_path, "drain", other, "--dry-run")
        assert plan.returncode == 0, plan.stderr
        assert f"node/{other} would be drained" in plan.stdout and "paced by: evictQPS" in plan.stdout
        assert not kube.core.read_node(other).spec.unschedulable
        stop.set()
        findings = await watching
        assert findings.samples > 20
        assert findings.as_dict()["limits_exceeded"] == 0, findings.as_dict()
        assert findings.history is not None and findings.history.evictions_checked == jobs
        assert findings.evictions_without_room == findings.succeeded_before_gone == []
        assert not findings.pending_replacements
        assert findings.peak_slots.get("node", 0) >= 2  # the limits were reached, not just never approached
        assert handle.sim is not None and handle.sim.authorizer is not None
        assert handle.sim.authorizer.denials == []
        unused = granted() - {(u.rpartition("-")[2], v, g, r) for u, v, g, r in handle.sim.authorizer.used}
        # Least privilege: no grant goes unused but those this path cannot exercise or may not reach yet.
        assert NEEDED_OFF_THIS_PATH <= unused <= NEEDED_OFF_THIS_PATH | PERIODIC | BY_TIMING, unused
        running = [p for p in web_pods(kube).values() if p.metadata.deletion_timestamp is None]
        assert len(running) == STORM  # the last moved pod may still be going
        until_no_reservations(kube)

        # The CLI and kubectl see the same jobs in the same phases.
        shown = await asyncio.to_thread(podherd, config_path, "jobs")
        assert shown.returncode == 0, shown.stderr
        rows = [line.split() for line in shown.stdout.splitlines()[1:]]
        ours = {(r[0], r[1]) for r in rows}
        assert ours == {(name, "Succeeded") for name in final}
        if KUBECTL:
            columns = "custom-columns=NAME:.metadata.name,PHASE:.status.phase"
            argv = [
                KUBECTL,
                "--kubeconfig",
                str(handle.kubeconfig),
                "get",
                "pmj",
                "--no-headers",
                "-o",
                columns,
            ]
            got = await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True, check=True)
            assert {tuple(line.split()) for line in got.stdout.splitlines()} == ours

        # Each service's /metrics tells the same story.
        assert (
            total(processes, "executor", "podherd_evictions_total", policy="Eviction", outcome="done") == jobs
        )
        assert total(processes, "arbitrator", "podherd_arbitrator_admission_seconds_count") >= jobs
        assert (
            total(processes, "arbitrator", "podherd_arbitrator_decisions_total", decision="admitted") >= jobs
        )
        assert all(has(p, "podherd_ledger_slots_in_use", limit="node") for p in by(processes, "arbitrator"))
        assert all(has(p, "podherd_pod_evacuations_in_progress") for p in by(processes, "arbitrator"))
        assert total(processes, "watcher", "podherd_watcher_lag_seconds_count") > STORM
        tracker = by(processes, "tracker")[0]
        await until(lambda: sample(tracker, "podherd_jobs", phase="Succeeded") == jobs, within=15)

        # The audit stream tells the first job's story.
        audit = await asyncio.to_thread(podherd, config_path, "audit", "tail", "--job", first_job)
        records = [json.loads(line) for line in audit.stdout.splitlines()]
        moves = [r["phase"] for r in records if r["action"] == "transition"]
        assert moves[0] == "Pending" and moves[-1] == "Succeeded" and "Running" in moves
    finally:
        stop.set()
        if watching is not None and not watching.done():
            await watching
        codes = await asyncio.to_thread(processes.stop_all)
        await redis_client.aclose()
        await admin.aclose()
    assert set(codes.values()) == {0}, codes  # SIGTERM: every replica shut down cleanly
