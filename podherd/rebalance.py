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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from podherd import cluster_read, drain
from podherd.client import Sender, gather_replies, nats_client, now_utc
from podherd.errors import CliError
from shared.config.model import PodherdConfig
from shared.nats import bus
from shared.rebalance import policies
from shared.rebalance.intents import move_intents, plan_stamp
from shared.rebalance.planning import Caps, Planning, fill
from shared.rebalance.policy_run import PolicyOptions, lines_of, run_policy
from shared.rebalance.snapshot import reserving_schedulers, window_start


@dataclass
class Outcome:
    policy: str
    planning: Planning
    measure: policies.Measure
    before: dict[str, dict[str, float]]
    after: dict[str, dict[str, float]]
    lines: dict[str, Mapping[str, float]] = field(default_factory=dict)  # the policy's thresholds, by name
    unread: list[str] = field(default_factory=list)  # what the plan could not read, and so did not check


def options_of(args: Any) -> PolicyOptions:
    """The policy and its options, as the command line gives them."""
    caps = Caps(args.max_pods_per_node, args.max_pods_per_namespace, args.max_pods_total)
    given = ("thresholds", "target_thresholds", "number_of_nodes", "recent")  # else PolicyOptions' defaults
    chosen = {key: getattr(args, key) for key in given if getattr(args, key) is not None}
    return PolicyOptions(args.policy, caps=caps, **chosen)


def make_plan(options: PolicyOptions, config: PodherdConfig) -> Outcome:
    snapshot = cluster_read.read(config, moved_since=window_start(options.recent))
    cluster = snapshot.cluster
    planning = Planning.of(
        cluster,
        snapshot.candidates,
        caps=options.caps,
        schedulers=reserving_schedulers(config.migration_controller),
        recent=snapshot.recent,
    )
    before = {n: fill(cluster, n) for n in sorted(cluster.nodes)}
    measure = run_policy(planning, options)
    after = {n: fill(cluster, n) for n in sorted(cluster.nodes)}
    return Outcome(options.policy, planning, measure, before, after, lines_of(options), snapshot.unread)


@dataclass
class Carried:
    jobs: dict[str, str]  # job -> pod
    failed: dict[str, str]  # job -> why it ended otherwise than Succeeded
    refused: dict[str, str]  # pod -> why no job was made
    left: list[str] = field(default_factory=list)  # pods of the waves not sent after a move failed


async def carry_out(
    config: PodherdConfig,
    outcome: Outcome,
    *,
    sender: Sender,
    requester: str,
    answer_within: float,
    follow_within: float | None,
    show: Callable[[str], None],
    atomic_timeout: str | None = None,
) -> Carried:
    """The plan's moves sent as intents, wave after wave (one atomic plan with `atomic_timeout`), and their
    jobs followed to their end; a wave goes once the one before it has ended, and none after a move failed."""
    stamp = plan_stamp(outcome.planning.moves)
    carried = Carried({}, {}, {})
    async with nats_client(config) as nc:
        for number, wave in enumerate(outcome.planning.waves(), start=1):
            if carried.failed or carried.refused:  # a later wave may need what a failed move would free
                carried.left.extend(m.pod for m in wave)
                continue
            if number > 1:
                show(f"wave {number}: {len(wave)} moves, each needing what the waves before it freed")
            sent = move_intents(
                wave,
                requester=requester,
                kind="rebalance",
                reason=outcome.policy,
                atomic_timeout=atomic_timeout,
                stamp=stamp,
            )
            started = now_utc()
            replies = await gather_replies(nc, sender, sent, within=answer_within)
            pairs = list(zip(sent, replies, strict=True))
            jobs = {str(r.job): f"{i.pod.namespace}/{i.pod.name}" for i, r in pairs if r.ok and r.job}
            for intent, reply in pairs:
                if not reply.ok or not reply.job:
                    why = reply.error.message if reply.error else "refused"
                    carried.refused[f"{intent.pod.namespace}/{intent.pod.name}"] = why
            subjects = bus.Subjects(config.nats.subject_prefix)
            ended = await drain.follow(nc, subjects, jobs, since=started, within=follow_within, show=show)
            carried.jobs.update(jobs)
            carried.failed.update(ended.failed())
    return carried


def execute(args: Any, config: PodherdConfig, outcome: Outcome) -> int:
    """Send the plan's moves as intents and follow their jobs to their end: 0 once every move is done."""
    if not outcome.planning.moves:
        print("nothing to move")
        return 0
    waves = len(outcome.planning.waves())
    if getattr(args, "atomic", False) and waves > 1:
        raise CliError(
            f"the plan has {waves} waves: moves of a later wave need room an earlier one frees, or their"
            " pods' spread or affinity terms make the order count; that cannot be held ahead: run it"
            " without --atomic"
        )
    carried = asyncio.run(
        carry_out(
            config,
            outcome,
            sender=Sender.of(config, args.token_file),
            requester=getattr(args, "requester", "podherd-plan"),
            answer_within=args.timeout,
            follow_within=getattr(args, "follow_timeout", None),
            show=functools.partial(print, flush=True),
            atomic_timeout=args.atomic_timeout if getattr(args, "atomic", False) else None,
        )
    )
    done = len(carried.jobs) - len(carried.failed)
    rolled_back = sorted({why for why in carried.failed.values() if "rolled back" in why})
    if rolled_back:  # one reason, on every job of the plan
        print(f"error: {rolled_back[0].removeprefix('aborted: ')}; nothing was evicted", file=sys.stderr)
        return 1
    print(f"{done} of {len(outcome.planning.moves)} moves done", flush=True)
    for pod, why in sorted(carried.refused.items()):
        print(f"error: {pod}: {why}", file=sys.stderr)
    for job, why in sorted(carried.failed.items()):
        print(f"error: {carried.jobs[job]}: {why}", file=sys.stderr)
    if carried.left:
        print(
            f"error: {len(carried.left)} moves of later waves not sent: {', '.join(carried.left)}",
            file=sys.stderr,
        )
    return 1 if carried.failed or carried.refused or carried.left else 0
