"""`podherd plan --policy NAME` and `podherd rebalance --policy NAME`: a rebalancing plan on the cluster as
it is now, shown (what-if) or carried out as jobs.

The cluster is read once (nodes, pods, the room Reservations hold, bound volumes, namespaces) and planned
by `shared.rebalance`. Carried out, each move is an intent for a job with its target node and
ReservationFirst, admitted under every limit and budget like any job (and its room checked again by the
scheduler when its Reservation is made); then each job is followed, as `drain` follows its jobs.
"""

from __future__ import annotations

import asyncio
import functools
import sys
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from podherd import cluster_read, drain
from podherd.client import Sender, gather_replies, nats_client, now_utc
from podherd.move_intents import move_intents
from shared import bus
from shared.config import PodherdConfig
from shared.durations import parse_duration
from shared.rebalance import policies
from shared.rebalance.planning import Caps, Planning, fill

POLICIES = ("LowNodeUtilization", "HighNodeUtilization", "RemovePodsViolatingTopologySpreadConstraint")


@dataclass
class Outcome:
    policy: str
    planning: Planning
    measure: policies.Measure
    before: dict[str, dict[str, float]]
    after: dict[str, dict[str, float]]


def make_plan(args: Any, config: PodherdConfig) -> Outcome:
    moved_since = (now_utc() - timedelta(seconds=parse_duration(args.recent))).strftime("%Y-%m-%dT%H:%M:%SZ")
    snapshot = cluster_read.read(config, moved_since=moved_since)
    cluster, pods = snapshot.cluster, snapshot.candidates
    controller = config.migration_controller
    reserving = controller.default_job_mode == "ReservationFirst"
    caps = Caps(args.max_pods_per_node, args.max_pods_per_namespace, args.max_pods_total)
    planning = Planning.of(
        cluster, pods, caps=caps, schedulers=frozenset(controller.scheduler_names) if reserving else None
    )
    before = {n: fill(cluster, n) for n in sorted(cluster.nodes)}
    if args.policy == "LowNodeUtilization":
        measure = policies.low_node_utilization(
            planning,
            thresholds=args.thresholds,
            target_thresholds=args.target_thresholds,
            number_of_nodes=args.number_of_nodes,
        )
    elif args.policy == "HighNodeUtilization":
        measure = policies.high_node_utilization(planning, thresholds=args.thresholds)
    else:
        measure = policies.spread_repair(planning)
    after = {n: fill(cluster, n) for n in sorted(cluster.nodes)}
    return Outcome(args.policy, planning, measure, before, after)


def execute(args: Any, config: PodherdConfig, outcome: Outcome) -> int:
    """Send the plan's moves as intents and follow their jobs to their end."""
    sent = move_intents(
        outcome.planning.moves, requester=args.requester, kind="rebalance", reason=outcome.policy
    )
    if not sent:
        print("nothing to move")
        return 0
    sender = Sender.of(config, args.token_file)
    show = functools.partial(print, flush=True)

    async def run() -> int:
        started = now_utc()
        async with nats_client(config) as nc:
            replies = await gather_replies(nc, sender, sent, within=args.timeout)
            refused = [(i, r) for i, r in zip(sent, replies, strict=True) if not r.ok or not r.job]
            jobs = {
                str(r.job): f"{i.pod.namespace}/{i.pod.name}"
                for i, r in zip(sent, replies, strict=True)
                if r.job
            }
            for intent, reply in refused:
                why = reply.error.message if reply.error else "refused"
                print(f"error: {intent.pod.namespace}/{intent.pod.name}: {why}", file=sys.stderr)
            subjects = bus.Subjects(config.nats.subject_prefix)
            within = getattr(args, "follow_timeout", None)
            ended = await drain.follow(nc, subjects, jobs, since=started, within=within, show=show)
        failed = ended.failed()
        print(f"{len(jobs) - len(failed)} of {len(sent)} moves done", flush=True)
        for job, message in sorted(failed.items()):
            print(f"error: {jobs[job]}: {message}", file=sys.stderr)
        return 1 if failed or refused else 0

    return asyncio.run(run())
