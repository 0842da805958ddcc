"""The chaos run: Podherd's promises under faults, checked from the cluster and the ledger.

    python -m bench.chaos                      # the full run: 1,100 intents and PMJs, 3 replicas each
    python -m bench.chaos --jobs 120 --replicas 2   # the size `make test` runs (tests/chaos)

On kubesim, with real NATS and Redis started for the run (so they can be restarted) and the four services as
separate processes, jobs arrive from intents (request/reply and the stream) and as PMJs created directly,
while workloads roll out new templates and scale down and up, nodes go NotReady, and half the workloads have
a PodDisruptionBudget of maxUnavailable 1. A fault injector SIGKILLs a random service replica every few
seconds and starts it again, restarts NATS once, restarts Redis once and flushes it once.

Invariants, from the cluster (kubesim's record of evictions, the PMJs, Reservations, pods, workloads, PDBs)
and the ledger, never from Podherd's logs:
- every job reaches a terminal phase, and its reason matches what happened to its pod (Succeeded: evicted
  exactly once; a refusal before eviction: never evicted; MissingPod: the pod went away by other hands);
- no intent is lost: each became a job or was refused with a reason on the audit stream;
- no pod is evicted twice; no Reservation outlives its job (20 s of grace for a crashed cleanup; room no
  pod took stays while a job of its workload is in flight, for that job's replacement; no cleanup can be
  made while a server fault holds it back, so the grace counts from when the services have taken in what
  queued up meanwhile, bench.backlog), none at the end;
- at no sample does a node, namespace or the cluster hold more migrations than its limit (ledger), or a
  workload or PDB fall below what it allows while Podherd alone is disturbing it (workloads rolling out,
  scaling, or with pods on a NotReady node are excused while that lasts, and 10 s after);
- no replacement of a ReservationFirst job is ever Pending.
And the comparison that justifies the design: the same tight cluster (a few hungry pending pods waiting for
any room) migrated with EvictDirectly, then with ReservationFirst, counting the replacements left Pending.
Results: JSON on stdout and in bench/results/chaos.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import random
import re
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import nats
import nats.errors

from bench.backlog import until_caught_up
from bench.results_io import emit
from bench.stack import Parts, deployment, nodes, stack
from bench.topology import Servers, nats_options, redis_of, start_servers
from kubesim.sim import SimHandle
from podherd.client import audit_records, signed
from podherd.harness.processes import ServiceProcesses
from podherd.watchdog.history import room_checks
from podherd.watchdog.invariants import Watchdog
from podherd.watchdog.timeouts import UNKNOWN, timed_out, why_timed_out
from services.tracker.intake.intents import CONSUMER as INTENTS_CONSUMER
from shared.api import codec
from shared.api.messages import IntentReply, MigrationIntent, PodKey
from shared.api.names import LABEL_CONTROLLER, LABEL_JOB
from shared.api.pmj import GROUP, PLURAL, TERMINAL_PHASES
from shared.api.reservation import is_untaken_room
from shared.config.model import nats_servers
from shared.core.waits import cancel_and_wait, wait_event
from shared.intake.intent_jobs import job_name
from shared.kube.client import KubeClient, KubeError
from shared.nats import bus

JOBS = f"/apis/{GROUP}/v1alpha1/{PLURAL}"
RESERVATIONS = f"/apis/{GROUP}/v1alpha1/reservations"
# Reasons a job can only end with before its pod was evicted (Timeout can come either side).
AFTER_EVICTION = frozenset({"Timeout", "ReservationExpired", "MissingReservation", "WaitForBoundPodReady"})
EXCUSE_TAIL = 10.0
ORPHAN_GRACE = 20.0


@dataclass
class ChaosOptions:
    jobs: int = 1100
    replicas: int = 3
    nodes: int = 40
    workloads: int = 16
    pods_per_workload: int = 40
    rate: float = 25.0  # jobs submitted per second
    ttl: str = "2m"
    seed: int = 7
    workdir: Path | None = None
    stranding_jobs: int = 8  # 0: no stranding comparison
    stranding_ttl: str = "10s"  # blind evictions stranded, the rest wait for budget until this ttl
    fault_seconds: float = 30.0  # faults stop when the jobs have ended, or after this long (or 2x submitting)
    min_kills: int = 3  # replicas SIGKILLed at least, however short the run
    topology: str = "single"  # or "ha" (bench.topology)


@dataclass
class Submitted:
    job: str
    source: str
    namespace: str
    pod: str
    uid: str
    key: str = ""
    app: str = ""  # its workload (the Deployment of the same name)


@dataclass
class Orphan:
    """A Reservation seen past its grace: what the harness knew then, and when it went (if it did)."""

    job: str
    outcome: str
    untaken: bool
    ended: str  # UTC time the harness first saw its job ended
    late_by: float  # seconds past the later of the job's end and its workload going idle
    gone_after: float | None = None  # seconds from being flagged until it was gone
    flagged: float = field(default_factory=time.monotonic)

    def story(self, name: str, logs: Path) -> str:
        went = f"gone {self.gone_after:.0f}s later" if self.gone_after is not None else "never deleted"
        room = "untaken room" if self.untaken else "taken"
        said = "; ".join(_said_of(self.job, logs)) or "nothing"
        return (
            f"{name} ({room}) of {self.job} ({self.outcome}, ended {self.ended}) still there"
            f" {self.late_by:.0f}s past its grace, {went}; the executors said: {said}"
        )


def _said_of(job: str, logs: Path) -> list[str]:
    """The executors' log lines about a job, in time order (a flagged orphan's cleanup, or its absence)."""
    named = re.compile(rf"\b{re.escape(job)}(-\d+)?\b")  # the job, or a Reservation of it (another's cleanup)
    lines = []
    for log in sorted(logs.glob("executor-*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if job not in line:
                continue
            with contextlib.suppress(msgspec.DecodeError):
                said = msgspec.json.decode(line)
                if said.get("job") == job or named.search(said.get("msg", "")):
                    lines.append(f"{said.get('ts', '')} {said.get('replica', '')}: {said.get('msg', '')}")
    return sorted(lines)


@dataclass
class Run:
    opts: ChaosOptions
    handle: SimHandle
    kube: KubeClient
    processes: ServiceProcesses
    prefix: str
    servers: Servers
    rng: random.Random
    headers: dict[str, str] = field(default_factory=dict)  # a request's: the requester's token
    submitted: list[Submitted] = field(default_factory=list)
    refused: Counter[str] = field(default_factory=Counter)
    excused_until: dict[str, float] = field(default_factory=dict)
    faults: Counter[str] = field(default_factory=Counter)
    disturbances: Counter[str] = field(default_factory=Counter)
    orphans: dict[str, Orphan] = field(default_factory=dict)  # by Reservation name
    ended_at: dict[str, float] = field(default_factory=dict)
    disturbed: dict[str, set[str]] = field(default_factory=dict)  # namespace/workload: what befell it
    idle_since: dict[str | None, float] = field(default_factory=dict)  # controller: no job in flight since
    timeline: list[str] = field(default_factory=list)  # "<UTC time> <what the harness did>"
    # Since when the services have been past the last server fault (bench.backlog): no cleanup before.
    caught_up_at: float = 0.0
    catching_up: asyncio.Task[None] | None = None

    def happened(self, what: str) -> None:
        self.timeline.append(f"{datetime.now(UTC).isoformat(timespec='milliseconds')} {what}")

    def excused(self) -> set[str]:
        now = time.monotonic()
        return {key for key, until in self.excused_until.items() if until > now}

    def excuse(self, key: str, seconds: float, why: str) -> None:
        self.excused_until[key] = max(self.excused_until.get(key, 0.0), time.monotonic() + seconds)
        self.disturbed.setdefault(key, set()).add(why)


# ---------------------------------------------------------------------------------------------------------
# The cluster and the stack


def fault_cluster(opts: ChaosOptions) -> dict[str, Any]:
    """Deployments in two namespaces; every other one has a PodDisruptionBudget of maxUnavailable 1."""
    workloads = []
    for i in range(opts.workloads):
        workload = deployment(f"app-{i}", opts.pods_per_workload, "200m", "256Mi", namespace=f"ns-{i % 2}")
        if i % 2 == 0:
            workload["pdb"] = {"maxUnavailable": 1}
        workloads.append(workload)
    return {
        "name": "chaos",
        "namespaces": ["ns-0", "ns-1"],
        "nodes": nodes(opts.nodes, 16, "64Gi"),
        "workloads": workloads,
    }


def tight_cluster() -> dict[str, Any]:
    """Every CPU taken but by two hungry pending pods: any room a blind eviction frees goes to them first."""
    return {
        "name": "tight",
        "nodes": nodes(5, 4, "16Gi"),
        "workloads": [deployment("app", 18, "1", "1Gi"), deployment("filler", 4, "1", "1Gi")],
    }


# ---------------------------------------------------------------------------------------------------------
# Submitting jobs


async def pods_of(kube: KubeClient, selector: str = "") -> list[dict[str, Any]]:
    query = [("labelSelector", selector)] if selector else []
    body = await kube.arequest("GET", "/api/v1/pods", query)
    items: list[dict[str, Any]] = msgspec.json.decode(body).get("items") or []
    return [
        p
        for p in items
        if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    ]


async def submit_all(run: Run, count: int, mode: str | None = None, selector: str = "") -> None:
    """`count` jobs at `rate`, on distinct running pods, a third each through request/reply, the intent
    stream and a PMJ created directly; a NATS outage is ridden out by retrying (the key makes it safe)."""
    nc = await nats.connect(
        nats_servers(run.servers.nats_url),
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.2,
        error_cb=_quiet,
        **nats_options(run.servers),
    )
    js = nc.jetstream()
    subjects = bus.Subjects(run.prefix)
    taken: set[str] = set()
    candidates: list[dict[str, Any]] = []
    try:
        for i in range(count):
            for _ in range(100):  # every pod has a job: wait for replacements to become candidates
                if candidates:
                    break
                candidates = [
                    p for p in await pods_of(run.kube, selector) if p["metadata"]["uid"] not in taken
                ]
                run.rng.shuffle(candidates)
                if not candidates:
                    await asyncio.sleep(0.5)
            if not candidates:
                break
            pod = candidates.pop()
            meta = pod["metadata"]
            taken.add(meta["uid"])
            source = ("request", "stream", "pmj")[i % 3]
            key = f"{run.prefix}-{i}"
            intent = MigrationIntent(
                idempotency_key=key,
                pod=PodKey(namespace=meta["namespace"], name=meta["name"]),
                requester="chaos",
                mode=mode,  # type: ignore[arg-type]
            )
            name = await _submit(run, nc, js, subjects, source, intent, i)
            if name is not None:
                run.submitted.append(
                    Submitted(
                        name,
                        source,
                        meta["namespace"],
                        meta["name"],
                        meta["uid"],
                        key,
                        app=(meta.get("labels") or {}).get("app") or "",
                    )
                )
            await asyncio.sleep(1.0 / run.opts.rate)
    finally:
        await nc.close()


async def _quiet(_: Exception) -> None:
    """The NATS restart is planned: the harness's connection rides it out without a traceback."""


async def _submit(
    run: Run, nc: Any, js: Any, subjects: bus.Subjects, source: str, intent: MigrationIntent, i: int
) -> str | None:
    for attempt in range(200):
        try:
            if source == "request":
                data = codec.encode(intent)
                msg = await nc.request(subjects.intent_request, data, timeout=5, headers=run.headers)
                reply = codec.decode(msg.data, IntentReply)
                if reply.error is not None and reply.error.code == "Unavailable":
                    raise TimeoutError(reply.error.message)  # "retry later": a real client does
                if not reply.ok:
                    run.refused[reply.error.code if reply.error else "?"] += 1
                    return None
                return reply.job
            if source == "stream":
                await js.publish(
                    subjects.intent(intent.pod.namespace),
                    codec.encode(intent),
                    headers={"Nats-Msg-Id": intent.idempotency_key},
                    timeout=5,
                )
                return job_name(intent.idempotency_key)
            name = f"{run.prefix}-pmj-{i}"
            body = {
                "apiVersion": f"{GROUP}/v1alpha1",
                "kind": "PodMigrationJob",
                "metadata": {"name": name},
                "spec": {
                    "podRef": {"namespace": intent.pod.namespace, "name": intent.pod.name},
                    **({"mode": intent.mode} if intent.mode else {}),
                },
            }
            await run.kube.arequest("POST", JOBS, body=body)
            return name
        except (nats.errors.Error, TimeoutError, OSError, KubeError):
            await asyncio.sleep(min(2.0, 0.1 * (attempt + 1)))  # NATS restarting: a real client retries
    run.refused["gave up"] += 1
    return None


# ---------------------------------------------------------------------------------------------------------
# Faults and disturbances


async def inject_faults(run: Run, stop: asyncio.Event, span: float) -> None:
    """SIGKILL a random replica every 2-5 s and start it again; the servers' faults (bench.topology) at a
    third, a half and seven tenths of the span. A short run still gets `min_kills` kills (one after the
    other once `stop` is set) and each server fault."""
    started = time.monotonic()
    planned = dict(zip(run.servers.faults, (0.3, 0.5, 0.7), strict=False))
    kills = 0
    while not stop.is_set() or kills < run.opts.min_kills:
        await _wait(stop, run.rng.uniform(2.0, 5.0))
        if stop.is_set() and kills >= run.opts.min_kills:
            break
        kills += 1
        victim = run.rng.choice(run.processes.running)
        run.processes.kill(victim)
        run.faults[f"kill_{victim.service}"] += 1
        run.happened(f"SIGKILL {victim.replica}")
        await asyncio.sleep(run.rng.uniform(0.3, 1.5))
        run.processes.start(victim.service, victim.replica + "b")
        run.happened(f"started {victim.replica}b")
        elapsed = (time.monotonic() - started) / span
        for fault, at in list(planned.items()):
            if elapsed >= at:
                del planned[fault]
                await _server_fault(run, fault)
    for fault in planned:  # a short run still gets each server fault once
        await _server_fault(run, fault)


async def _server_fault(run: Run, fault: str) -> None:
    run.happened(f"{fault} begins")
    run.caught_up_at = math.inf
    await cancel_and_wait(run.catching_up)  # the catch-up after an earlier fault: this one supersedes it
    try:
        if await run.servers.inflict(fault, run.prefix, run.rng):
            run.faults[fault] += 1
            run.happened(fault)
    finally:
        run.catching_up = asyncio.create_task(_catch_up(run, fault))


async def _catch_up(run: Run, fault: str) -> None:
    took = await until_caught_up(run.servers.nats_url, run.prefix, **nats_options(run.servers))
    run.caught_up_at = time.monotonic()
    run.happened(f"past {fault}: the services took in what it held back in {took:.1f}s")


async def disturb(run: Run, stop: asyncio.Event) -> None:
    """Rollouts, scale down and back up, a node NotReady for a few seconds."""
    revision = 0
    while not stop.is_set():
        await _wait(stop, run.rng.uniform(2.0, 4.0))
        if stop.is_set():
            break
        action = run.rng.choice(("rollout", "scale", "notready"))
        i = run.rng.randrange(run.opts.workloads)
        namespace, name = f"ns-{i % 2}", f"app-{i}"
        path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
        merge = "application/merge-patch+json"
        with contextlib.suppress(KubeError, OSError):
            if action == "rollout":
                revision += 1
                patch = {
                    "spec": {"template": {"metadata": {"annotations": {"chaos/revision": str(revision)}}}}
                }
                run.excuse(f"{namespace}/{name}", 30, "rolled out")
                await run.kube.arequest("PATCH", path, body=patch, content_type=merge)
            elif action == "scale":
                run.excuse(f"{namespace}/{name}", 20, "scaled down and up")
                down = {"spec": {"replicas": run.opts.pods_per_workload - 3}}
                await run.kube.arequest("PATCH", path, body=down, content_type=merge)
                await _wait(stop, 3.0)
                up = {"spec": {"replicas": run.opts.pods_per_workload}}
                await run.kube.arequest("PATCH", path, body=up, content_type=merge)
            else:
                await _node_not_ready(run, stop)
            run.disturbances[action] += 1
            if action != "notready":
                run.happened(f"{action} {namespace}/{name}")


async def _node_not_ready(run: Run, stop: asyncio.Event) -> None:
    node = f"node-{run.rng.randrange(run.opts.nodes) + 1}"
    on_node = [p for p in await pods_of(run.kube) if p["spec"].get("nodeName") == node]
    for pod in on_node:  # its workloads lose replicas through no doing of Podherd's
        owner = (pod["metadata"].get("labels") or {}).get("app")
        if owner:
            run.excuse(
                f"{pod['metadata']['namespace']}/{owner}", 6.0 + EXCUSE_TAIL, "on a node made NotReady"
            )
    await _set_ready(run.kube, node, False)
    run.happened(f"{node} NotReady")
    await _wait(stop, 4.0)
    await _set_ready(run.kube, node, True)


async def _set_ready(kube: KubeClient, node: str, ready: bool) -> None:
    status = "True" if ready else "False"
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    condition = {"type": "Ready", "status": status, "reason": "Chaos", "lastTransitionTime": now}
    body = {"status": {"conditions": [condition]}}
    await kube.arequest(
        "PATCH", f"/api/v1/nodes/{node}/status", body=body, content_type="application/merge-patch+json"
    )


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    await wait_event(stop, seconds)


# ---------------------------------------------------------------------------------------------------------
# Watching


async def jobs_state(kube: KubeClient) -> dict[str, dict[str, Any]]:
    items = msgspec.json.decode(await kube.arequest("GET", JOBS)).get("items") or []
    return {i["metadata"]["name"]: i for i in items}


def phase_of(job: dict[str, Any]) -> str:
    return str((job.get("status") or {}).get("phase") or "Pending")


def outcome(job: dict[str, Any]) -> str:
    return f"{phase_of(job)}/{(job.get('status') or {}).get('reason') or '-'}"


async def watch_reservations(run: Run, stop: asyncio.Event) -> None:
    """A Reservation whose job has ended more than ORPHAN_GRACE seconds ago has outlived it."""
    while not stop.is_set():
        with contextlib.suppress(KubeError, OSError):
            jobs = await jobs_state(run.kube)
            now = time.monotonic()
            for name, job in jobs.items():
                if phase_of(job) in TERMINAL_PHASES:
                    run.ended_at.setdefault(name, now)
            items = msgspec.json.decode(await run.kube.arequest("GET", RESERVATIONS)).get("items") or []
            labels = [r["metadata"].get("labels") or {} for r in items]
            # Room no pod took stays for a sibling's replacement while a job of its workload is in flight.
            busy = {
                lab.get(LABEL_CONTROLLER)
                for lab in labels
                if lab.get(LABEL_JOB) in jobs and phase_of(jobs[lab[LABEL_JOB]]) not in TERMINAL_PHASES
            }
            for controller in busy:
                run.idle_since.pop(controller, None)
            present = {r["metadata"]["name"] for r in items}
            for name, orphan in run.orphans.items():
                if orphan.gone_after is None and name not in present:
                    orphan.gone_after = now - orphan.flagged
            for r, lab in zip(items, labels, strict=True):
                owner, controller = lab.get(LABEL_JOB), lab.get(LABEL_CONTROLLER)
                if is_untaken_room(r) and controller in busy:
                    continue
                # Kept room goes when its workload has no job in flight: the grace counts from then.
                # Nor could it go while a server fault held its cleanup back: the grace counts from past it.
                since = max(
                    run.ended_at.get(owner or "", now),
                    run.idle_since.setdefault(controller, now),
                    run.caught_up_at,
                )
                name = r["metadata"]["name"]
                if owner and now - since > ORPHAN_GRACE and name not in run.orphans:
                    run.orphans[name] = Orphan(
                        job=owner,
                        outcome=outcome(jobs[owner]) if owner in jobs else "deleted",
                        untaken=is_untaken_room(r),
                        ended=_utc_ago(now - run.ended_at.get(owner, now)),
                        late_by=now - since - ORPHAN_GRACE,
                    )
        await _wait(stop, 1.0)


def _utc_ago(seconds: float) -> str:
    return (datetime.now(UTC) - timedelta(seconds=seconds)).isoformat(timespec="milliseconds")


async def until_ended(run: Run, within: float) -> dict[str, dict[str, Any]]:
    """Until every job submitted has ended and every intent in the stream has been handled (one being
    redelivered after a fault has no job yet, and is not lost)."""
    deadline = time.monotonic() + within
    wanted = {s.job for s in run.submitted}
    while True:
        jobs = await jobs_state(run.kube)
        open_jobs = {n for n in wanted if n in jobs and phase_of(jobs[n]) not in TERMINAL_PHASES}
        if (not open_jobs and await intents_handled(run)) or time.monotonic() > deadline:
            return jobs
        await asyncio.sleep(1.0)


async def intents_handled(run: Run) -> bool:
    """The tracker's intent consumer has nothing left to deliver and nothing delivered unacknowledged."""
    try:
        nc = await nats.connect(
            nats_servers(run.servers.nats_url),
            connect_timeout=2,
            max_reconnect_attempts=0,
            **nats_options(run.servers),
        )
    except Exception:
        return False  # NATS restarting: not settled yet
    try:
        info = await nc.jetstream().consumer_info(bus.Subjects(run.prefix).intents_stream, INTENTS_CONSUMER)
        return bool(info.num_pending == 0 and info.num_ack_pending == 0)
    except Exception:
        return False
    finally:
        await nc.close()


async def settle_reservations(run: Run, jobs: dict[str, dict[str, Any]]) -> None:
    """Give a cleanup that a crash delayed its grace, but only while Reservations of ended jobs remain."""
    deadline = time.monotonic() + ORPHAN_GRACE + 2
    while time.monotonic() < deadline:
        items = msgspec.json.decode(await run.kube.arequest("GET", RESERVATIONS)).get("items") or []
        owners = [(r["metadata"].get("labels") or {}).get("podherd.io/job") for r in items]
        if not any(o not in jobs or phase_of(jobs[o]) in TERMINAL_PHASES for o in owners):
            return
        await asyncio.sleep(1.0)


async def audit_of(run: Run, subject: str) -> list[dict[str, Any]]:
    """The records on one subject of the audit stream (a job's, or a pod's intents'), from its start."""
    nc = await nats.connect(nats_servers(run.servers.nats_url), **nats_options(run.servers))
    try:
        return [
            json.loads(d) async for d in audit_records(nc, bus.Subjects(run.prefix), subject, follow=False)
        ]
    finally:
        await nc.close()


async def refused_on_stream(run: Run, missing: list[Submitted]) -> dict[str, str]:
    """Stream intents that made no job: the tracker's audit record of the refusal says why (it is written
    on the pod's intent subject); an intent with neither a job nor a refusal is lost."""
    out: dict[str, str] = {}
    for s in missing:
        for record in await audit_of(run, f"intent-{s.namespace}-{s.pod}"):
            if (record.get("details") or {}).get("intent") == s.key:
                out[s.job] = record.get("reason") or record.get("action") or "?"
                break
    return out


async def last_deferrals(run: Run, names: list[str]) -> dict[str, str]:
    """The arbitrator's last word on each job it never admitted: its latest deferral on the audit stream."""
    out: dict[str, str] = {}
    for name in names:
        for record in await audit_of(run, name):  # to the end of the job's records: the last one wins
            if (record.get("details") or {}).get("decision") == "deferred":
                out[name] = str(record.get("message") or record.get("rule"))
    return out


async def explain_timeouts(
    run: Run, jobs: dict[str, dict[str, Any]], default_mode: str, default_ttl: str
) -> dict[str, str]:
    """Each job that timed out, and the cause its status (or the arbitrator's audit) gives."""
    ended = {s.job: jobs[s.job] for s in run.submitted if s.job in jobs and timed_out(jobs[s.job])}
    deferrals = await last_deferrals(run, list(ended))
    causes = {
        name: why_timed_out(job, deferrals.get(name), default_mode, default_ttl=default_ttl)
        for name, job in ended.items()
    }
    for s in run.submitted:  # what the harness did to the job's workload, beside what its status says
        if s.job in causes and (befell := run.disturbed.get(f"{s.namespace}/{s.app}")):
            causes[s.job] += f" (its workload was {', '.join(sorted(befell))})"
    return causes


def check_reasons(
    run: Run, jobs: dict[str, dict[str, Any]], evictions: dict[str, int], alive: set[str]
) -> list[str]:
    mismatches = []
    for s in run.submitted:
        job = jobs.get(s.job)
        if job is None:
            continue
        phase, reason = phase_of(job), (job.get("status") or {}).get("reason") or ""
        evicted = evictions.get(s.uid, 0)
        wrong = None
        if phase == "Succeeded" and evicted != 1:
            wrong = f"Succeeded but evicted {evicted} times"
        elif phase in ("Failed", "Aborted") and not reason:
            wrong = f"{phase} without a reason"
        elif phase == "Failed" and reason == "MissingPod" and (evicted or s.uid in alive):
            wrong = f"MissingPod but the pod was evicted {evicted} times / is alive"
        elif phase == "Failed" and reason not in AFTER_EVICTION and reason != "MissingPod" and evicted:
            wrong = f"Failed {reason} (before eviction) but the pod was evicted"
        if wrong:
            mismatches.append(f"{s.job} ({s.namespace}/{s.pod}): {wrong}")
    return mismatches


# ---------------------------------------------------------------------------------------------------------
# The two runs


async def fault_run(opts: ChaosOptions, servers: Servers, work: Path) -> dict[str, Any]:
    prefix = f"chaos{opts.seed}"
    async with stack(fault_cluster(opts), servers, prefix, opts.replicas, opts.ttl, work) as parts:
        handle, kube, processes, config = parts
        run = Run(opts, handle, kube, processes, prefix, servers, random.Random(opts.seed), signed(config))
        client = redis_of(servers, prefix)
        watchdog = Watchdog(
            kube,
            client,
            prefix,
            args=config.migration_controller,
            interval=0.1,
            excused=run.excused,
            checks=lambda: room_checks(servers.nats_url, prefix, tls=config.nats.tls),
        )
        stop, stop_faults = asyncio.Event(), asyncio.Event()
        started = time.monotonic()
        span = max(2 * opts.jobs / opts.rate, opts.fault_seconds)
        watching = asyncio.create_task(watchdog.run(stop))
        orphans = asyncio.create_task(watch_reservations(run, stop))
        chaos = [
            asyncio.create_task(inject_faults(run, stop_faults, span)),
            asyncio.create_task(disturb(run, stop_faults)),
        ]
        try:
            await submit_all(run, opts.jobs)
            # Faults go on while the jobs are in flight, up to the span (server faults and min_kills always).
            await until_ended(run, within=max(0.0, span - (time.monotonic() - started)))
            stop_faults.set()
            await asyncio.gather(*chaos)
            await asyncio.to_thread(processes.wait_ready, 90)
            jobs = await until_ended(run, within=180)
            await settle_reservations(run, jobs)
        finally:
            stop_faults.set()
            stop.set()
            findings = await watching
            await orphans
            await cancel_and_wait(run.catching_up)
            await client.aclose()
        evictions = handle.call(lambda sim: dict(sim.store.evictions))
        late = handle.call(lambda sim: sum(sim.store.evictions_of_going.values()))
        denied = handle.call(
            lambda sim: [
                str(d) for d in sim.authorizer.denials if d.user.startswith("system:serviceaccount:podherd:")
            ]
        )
        alive = {
            p["metadata"]["uid"] for p in msgspec.json.decode(kube.request("GET", "/api/v1/pods"))["items"]
        }
        missing = [s for s in run.submitted if s.job not in jobs]
        reasons = await refused_on_stream(run, missing)
        lost = [s.job for s in missing if s.job not in reasons]
        leftover = [  # Reservations left at the end by a job that has ended (or is gone)
            r
            for r in msgspec.json.decode(kube.request("GET", RESERVATIONS)).get("items") or []
            if (r["metadata"].get("labels") or {}).get("podherd.io/job") not in jobs
            or phase_of(jobs[r["metadata"]["labels"]["podherd.io/job"]]) in TERMINAL_PHASES
        ]
        ours = [s for s in run.submitted if s.job in jobs]
        not_terminal = [s.job for s in ours if phase_of(jobs[s.job]) not in TERMINAL_PHASES]
        mismatches = check_reasons(run, jobs, evictions, alive)
        replacements = {
            f"{s.namespace}/{((jobs[s.job].get('status') or {}).get('podRef') or {}).get('name')}"
            for s in ours
        }
        pending = sorted(findings.pending_replacements & replacements)
        evicted_twice = sorted(uid for uid, n in evictions.items() if n > 1)
        causes = await explain_timeouts(
            run,
            jobs,
            config.migration_controller.default_job_mode,
            config.migration_controller.default_job_ttl,
        )
        invariants = {
            "jobs_not_terminal": len(not_terminal),
            "intents_lost": len(lost),
            "reason_mismatches": len(mismatches),
            "pods_evicted_twice": len(evicted_twice),
            "reservations_outliving_jobs": len(run.orphans) + len(leftover),
            "limit_breaches": findings.limits_exceeded,
            "replacements_pending": len(pending),
            "timeouts_unexplained": sum(cause.startswith(UNKNOWN) for cause in causes.values()),
            "evictions_without_room": len(findings.evictions_without_room),
            "succeeded_before_old_pod_gone": len(findings.succeeded_before_gone),
            "rbac_denials": len(denied),  # each service runs as its own ServiceAccount
            "nats_permissions_refused": len(nats_refusals(run.processes.workdir)),  # and its own NATS user
        }
        logs = run.processes.workdir
        return {
            "invariants": invariants,
            "examples": {
                "not_terminal": not_terminal[:5],
                "lost": lost[:5],
                "mismatches": mismatches[:5],
                "breaches": (findings.slot_breaches + findings.workload_breaches + findings.pdb_breaches)[:5],
                "pending": pending[:5],
                "orphans": [o.story(name, logs) for name, o in sorted(run.orphans.items())][:5],
                "timeouts": dict(sorted(causes.items())[:10]),
                "evictions_without_room": findings.evictions_without_room[:5],
                "succeeded_before_old_pod_gone": findings.succeeded_before_gone[:5],
                "rbac_denials": denied[:5],
            },
            "jobs": {
                "submitted": len(run.submitted),
                "by_source": dict(Counter(s.source for s in run.submitted)),
                "by_phase": dict(Counter(phase_of(jobs[s.job]) for s in ours)),
                "by_reason": dict(Counter(outcome(jobs[s.job]) for s in ours)),
                "intents_refused_on_request": dict(run.refused),
                "intents_refused_on_stream": dict(Counter(reasons.values())),
                "pods_evicted": sum(evictions.values()),
                "evictions_of_pods_already_going": late,  # raced another hand (a rollout's deletion)
                "timeouts_by_cause": dict(Counter(causes.values())),
            },
            "faults": dict(run.faults),
            "disturbances": dict(run.disturbances),
            "timeline": run.timeline,
            "watchdog": {
                "samples": findings.samples,
                "peak_slots_in_use": findings.peak_slots,
                "history_events": findings.history.events if findings.history else 0,
                "evictions_checked_against_room": findings.history.evictions_checked
                if findings.history
                else 0,
            },
            "seconds": round(time.monotonic() - started, 1),
        }


async def stranding(opts: ChaosOptions, servers: Servers, work: Path) -> dict[str, Any]:
    """The tight cluster, migrated blind (EvictDirectly) and reserving first, from the same start: two
    clusters side by side, each with its own services and prefix."""
    prefixes = stranding_prefixes(opts)
    async with contextlib.AsyncExitStack() as stacks:
        parts = {
            mode: await stacks.enter_async_context(
                stack(tight_cluster(), servers, prefix, 1, opts.stranding_ttl, work)
            )
            for mode, prefix in prefixes.items()
        }
        results = await asyncio.gather(
            *(_strand(opts, mode, prefixes[mode], parts[mode], servers) for mode in parts)
        )
    return dict(zip(parts, results, strict=True))


async def _strand(
    opts: ChaosOptions, mode: str, prefix: str, parts: Parts, servers: Servers
) -> dict[str, Any]:
    handle, kube, processes, config = parts
    run = Run(opts, handle, kube, processes, prefix, servers, random.Random(opts.seed), signed(config))
    client = redis_of(servers, prefix)
    watchdog = Watchdog(kube, client, prefix, args=config.migration_controller, interval=0.2)
    stop = asyncio.Event()
    watching = asyncio.create_task(watchdog.run(stop))
    try:
        await submit_all(run, opts.stranding_jobs, mode=mode, selector="app=app")
        jobs = await until_ended(run, within=60)
    finally:
        stop.set()
        findings = await watching
        await client.aclose()
    stranded = sorted(p for p in findings.pending_replacements if p.startswith("default/app-"))
    causes = await explain_timeouts(run, jobs, mode, config.migration_controller.default_job_ttl)
    return {
        "jobs": len(run.submitted),
        "by_reason": dict(Counter(outcome(jobs.get(s.job, {})) for s in run.submitted)),
        "replacements_stranded_pending": len(stranded),
        "timeouts_by_cause": dict(Counter(causes.values())),
    }


def nats_refusals(logs: Path) -> list[str]:
    """Every line in which a service said NATS refused its user a permission (it then stopped)."""
    return [
        line
        for log in sorted(logs.glob("*.log"))
        for line in log.read_text(errors="replace").splitlines()
        if "NATS refused" in line
    ]


def stranding_prefixes(opts: ChaosOptions) -> dict[str, str]:
    return {mode: f"strand{opts.seed}{mode[0].lower()}" for mode in ("EvictDirectly", "ReservationFirst")}


async def chaos(opts: ChaosOptions) -> dict[str, Any]:
    work = opts.workdir or Path(tempfile.mkdtemp(prefix="podherd-chaos-"))
    # NATS as deploy/ runs it: TLS, each service its own user, for the run's prefixes (chaos, stranding).
    servers = start_servers(
        opts.topology, work, prefixes=(f"chaos{opts.seed}", *stranding_prefixes(opts).values())
    )
    try:
        result: dict[str, Any] = {
            "options": {
                "jobs": opts.jobs,
                "replicas": opts.replicas,
                "seed": opts.seed,
                "topology": opts.topology,
            }
        }
        result["fault_run"] = await fault_run(opts, servers, work)
        if opts.stranding_jobs:
            result["stranding"] = await stranding(opts, servers, work)
        result["servers"] = servers.origin()
        return result
    finally:
        servers.stop()
        if opts.workdir is None:  # a directory the caller named is left for them to read
            shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=1100)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rate", type=float, default=25.0)
    parser.add_argument(
        "--topology",
        choices=("single", "ha"),
        default="single",
        help="single: one NATS, one Redis; ha: a 3-node JetStream cluster and Redis behind Sentinels",
    )
    args = parser.parse_args()
    opts = ChaosOptions(
        jobs=args.jobs, replicas=args.replicas, seed=args.seed, rate=args.rate, topology=args.topology
    )
    result = asyncio.run(chaos(opts))
    emit("chaos" if opts.topology == "single" else f"chaos-{opts.topology}", result)


if __name__ == "__main__":
    main()
