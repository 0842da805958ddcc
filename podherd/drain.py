"""`podherd drain NODE`: the CLI's side of a node drain.

The tracker plans and starts the drain (a drain intent on the request subject: the node cordoned, its drain
recorded on it, a job per pod). Here: the plan is shown, then each job's progress as it happens (from the
audit stream), then a summary. The command succeeds only when the node has no pod left that must move; it
fails naming each pod that was refused or stays, and why. Sent again, it continues the drain: the same pods
have the same jobs. `--status` answers from the node's record and the jobs (or, once they are collected,
their last audit record).
"""

from __future__ import annotations

import asyncio
import functools
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import nats
from nats.js.api import ConsumerConfig, DeliverPolicy

from podherd import via_kubernetes
from podherd.client import Sender, ask_tracker, kube_client, kube_get, nats_client, now_utc, table
from podherd.errors import CliError
from shared.api import codec, paths
from shared.api.drain import ROLLED_BACK, DrainOptions, DrainRecord, drain_record
from shared.api.messages import AuditRecord, DrainIntent, DrainReply
from shared.api.pmj import TERMINAL_PHASES
from shared.config.model import PodherdConfig
from shared.core.durations import parse_duration
from shared.intake.drain_plan import plan_drain
from shared.kube.client import KubeClient
from shared.nats import bus

FOLLOW_GRACE = 15.0


@dataclass
class Outcome:
    """How each job of the drain ended: phase and message, by job name."""

    ended: dict[str, tuple[str, str]] = field(default_factory=dict)

    def failed(self) -> dict[str, str]:
        return {job: message for job, (phase, message) in self.ended.items() if phase != "Succeeded"}


async def request_drain(nc: Any, sender: Sender, intent: DrainIntent, *, within: float) -> DrainReply:
    reply = codec.decode(
        await ask_tracker(nc, sender, codec.encode(intent), within=within, drain=True), DrainReply
    )
    if not reply.ok and not reply.refusals:
        error = reply.error
        raise CliError(f"drain refused: {error.code if error else '?'}: {error.message if error else ''}")
    return reply


def plan_lines(reply: DrainReply) -> list[str]:
    lines = [f"Warning: {w}" for w in reply.warnings]
    lines += [
        f"{move.pod}: {move.mode}{f' ({move.why})' if move.why else ''} by job {move.job}"
        for move in reply.moves
    ]
    lines += [f"{pod}: stays ({why})" for pod, why in reply.stays.items() if "DaemonSet" not in why]
    return lines


async def follow(
    nc: Any,
    subjects: bus.Subjects,
    jobs: dict[str, str],
    *,
    since: datetime,
    within: float | None,
    show: Callable[[str], None],
    drain_began: datetime | None = None,
) -> Outcome:
    """Each job's transitions as they come, from `since`, until every job of `jobs` (name -> pod) ended."""
    outcome = Outcome()
    js = nc.jetstream()
    config = ConsumerConfig(
        deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=since - timedelta(seconds=1)
    )
    sub = await js.subscribe(subjects.all_audit, ordered_consumer=True, config=config)
    deadline = None if within is None else time.monotonic() + within
    try:
        await _already_ended(js, subjects, jobs=jobs, outcome=outcome, drain_began=drain_began)
        while len(outcome.ended) < len(jobs):
            left = 3600.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                waiting = sorted(jobs[j] for j in jobs if j not in outcome.ended)
                raise CliError(
                    f"the drain did not end within its timeout; still moving: {', '.join(waiting)}"
                )
            try:
                msg = await sub.next_msg(timeout=min(left, 5.0))
            except (TimeoutError, nats.errors.TimeoutError):
                continue
            record = codec.decode(msg.data, AuditRecord)
            if record.job not in jobs or record.action != "transition" or record.job in outcome.ended:
                continue
            if drain_began is not None and record.time < drain_began:
                continue  # a job by the same name, of a drain before this one
            show(f"{record.time:%H:%M:%S} {jobs[record.job]} {record.phase}: {record.message or ''}")
            if record.phase in TERMINAL_PHASES:
                outcome.ended[record.job] = (record.phase, record.message or "")
    finally:
        await sub.unsubscribe()
    return outcome


async def _already_ended(
    js: Any, subjects: bus.Subjects, *, jobs: dict[str, str], outcome: Outcome, drain_began: datetime | None
) -> None:
    """Jobs of an earlier run of the drain that ended before this one: their last audit record says so (not
    a job by the same name of a drain before this one, rolled back)."""
    for job in jobs:
        last = await last_record(js, subjects, job)
        if drain_began is not None and last is not None and last.time < drain_began:
            continue
        if last is not None and last.phase in TERMINAL_PHASES:
            outcome.ended[job] = (last.phase, last.message or "")


async def last_record(js: Any, subjects: bus.Subjects, job: str) -> AuditRecord | None:
    try:
        msg = await js.get_last_msg(subjects.audit_stream, subjects.audit(job))
    except nats.js.errors.NotFoundError:
        return None
    return codec.decode(msg.data, AuditRecord)


def remaining(config: PodherdConfig, node: str, options: DrainOptions) -> list[str]:
    """The pods still on `node` that the drain must move, each with why it is still there."""
    with kube_client(config) as kube:
        query = f"?fieldSelector=spec.nodeName%3D{node}"
        pods: list[dict[str, Any]] = kube_get(kube, paths.PODS + query).get("items") or []
    plan = plan_drain(pods, options, scheduler_names=config.migration_controller.scheduler_names)
    left = [f"{move.key}: still on the node" for move in plan.moves]
    return left + plan.errors()


def record_of(config: PodherdConfig, node: str) -> DrainRecord | None:
    with kube_client(config) as kube:
        found = kube_get(kube, paths.node(node))
    return drain_record(found)


async def status_rows(
    config: PodherdConfig, nc: Any, *, subjects: bus.Subjects, record: DrainRecord
) -> list[tuple[str, str, str, str]]:
    """(job, pod, phase, message) of each job of the drain: live, else from its last audit record."""
    js = nc.jetstream()
    rows = []
    with kube_client(config) as kube:
        for job in record.jobs:
            try:
                found = kube_get(kube, paths.job(job))
            except CliError:
                found = None
            if found is not None:
                status, ref = found.get("status") or {}, (found.get("spec") or {}).get("podRef") or {}
                pod = f"{ref.get('namespace', '')}/{ref.get('name', '')}"
                rows.append((job, pod, status.get("phase") or "Pending", status.get("message") or ""))
                continue
            last = await last_record(js, subjects, job)
            phase = (last.phase if last else None) or "unknown"
            rows.append((job, "", phase, (last.message or "") if last else "no record"))
    return rows


def rolled_back(node: str, record: DrainRecord) -> int:
    """An atomic drain given up: which pods found no room; nothing was evicted."""
    for pod in record.no_room:
        print(f"error: no room for {pod}", file=sys.stderr)
    again = "left cordoned (it was before the drain)" if record.cordoned_before else "uncordoned"
    print(f"node/{node} {again}; every Reservation released; no pod was evicted", file=sys.stderr)
    return 1


def pacing(config: PodherdConfig) -> str:
    """The budgets every job of the drain goes through, as configured (each PDB of a pod's too)."""
    args = config.migration_controller
    limits = [
        f"evictQPS {args.evict_qps} (burst {args.evict_burst})",
        f"maxMigratingPerNode {args.max_migrating_per_node}",
        f"maxMigratingPerNamespace {args.max_migrating_per_namespace or 'unlimited'}",
        f"maxMigratingGlobally {args.max_migrating_globally or 'unlimited'}",
        f"maxMigratingPerWorkload {args.max_migrating_per_workload or 'unset'}",
        f"maxUnavailablePerWorkload {args.max_unavailable_per_workload or 'unset'}",
    ]
    return "paced by: " + ", ".join(limits) + ", and each pod's PodDisruptionBudget"


def command(args: Any, config: PodherdConfig) -> int:
    """`podherd drain`: 0 once the node has no pod left to move, 1 naming those refused or left."""
    subjects = bus.Subjects(config.nats.subject_prefix)
    options = DrainOptions(
        ignore_daemonsets=args.ignore_daemonsets,
        delete_emptydir_data=args.delete_emptydir_data,
        force=args.force,
        pod_selector=args.pod_selector,
        timeout=args.timeout,
        atomic=args.atomic,
    )
    intent = DrainIntent(
        kind="Drain", node=args.node, requester=args.requester, options=options, dry_run=args.dry_run
    )
    try:
        codec.decode(codec.encode(intent), DrainIntent)  # the constraints the tracker checks, first here
    except codec.SchemaError as exc:
        raise CliError(str(exc)) from exc

    async def status() -> int:
        record = record_of(config, args.node)
        if record is None:
            print(f"node {args.node} has no drain recorded")
            return 0
        async with nats_client(config) as nc:
            rows = await status_rows(config, nc, subjects=subjects, record=record)
        atomic = f" (atomic: {record.phase})" if record.phase else ""
        print(f"node {args.node}: drain by {record.requester} since {record.started_at}{atomic}")
        for pod in record.no_room:
            print(f"no room for {pod}")
        print(table(("JOB", "POD", "PHASE", "MESSAGE"), rows))
        return 0

    def announce(reply: DrainReply) -> int | None:
        """The plan as the user sees it; an exit code where the drain ends here (refused, a dry run)."""
        for line in plan_lines(reply):
            print(line, flush=True)
        if reply.refusals:
            for refusal in reply.refusals:
                print(f"error: {refusal}", file=sys.stderr)
            return 1
        if args.dry_run:
            print(pacing(config))
            print(f"node/{args.node} would be drained ({len(reply.moves)} pods to move) (dry run)")
            return 0
        print(f"node/{args.node} cordoned; {len(reply.moves)} pods to move", flush=True)
        if args.atomic:
            print("reserving room for every pod before any is evicted (atomic)", flush=True)
        return None

    # The jobs' ttl (and an atomic drain's deadline) is the timeout; their endings come just after.
    within = parse_duration(args.timeout) + FOLLOW_GRACE if args.timeout else None
    show = functools.partial(print, flush=True)

    async def run() -> int:
        started = now_utc()
        sender = Sender.of(config, args.token_file)
        async with nats_client(config) as nc:
            reply = await request_drain(nc, sender, intent, within=args.request_timeout)
            ends = announce(reply)
            if ends is not None:
                return ends
            jobs = {move.job: move.pod for move in reply.moves}
            drain = record_of(config, args.node)
            began = drain.began if drain else None
            outcome = await follow(
                nc, subjects, jobs, since=started, within=within, show=show, drain_began=began
            )
        return summary(jobs, outcome)

    async def run_via_kubernetes(kube: KubeClient) -> int:
        reply = await via_kubernetes.drain(kube, intent, config.migration_controller)
        ends = announce(reply)
        if ends is not None:
            return ends
        jobs = {move.job: move.pod for move in reply.moves}
        ended = await via_kubernetes.follow(kube, list(jobs), within=within, show=show)
        return summary(jobs, Outcome(ended))

    def summary(jobs: dict[str, str], outcome: Outcome) -> int:
        failed = outcome.failed()
        record = record_of(config, args.node)
        if args.atomic and record is not None and record.phase == ROLLED_BACK:
            return rolled_back(args.node, record)
        left = remaining(config, args.node, options)
        print(f"{len(jobs) - len(failed)} of {len(jobs)} pods moved", flush=True)
        for job, message in sorted(failed.items()):
            print(f"error: {jobs[job]}: {message}", file=sys.stderr)
        for line in left:
            print(f"error: {line}", file=sys.stderr)
        if failed or left:
            return 1
        print(f"node/{args.node} drained")
        return 0

    if args.via == "kubernetes" and not args.status:
        return via_kubernetes.run(config, run_via_kubernetes)
    return asyncio.run(status() if args.status else run())
