"""`podherd plan` for a pending pod (`--policy defrag`, the default): the node to empty and where its pods
go, each move checked as the scheduler would place its replacement; shown, and with `--apply` sent as
intents."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

import yaml

from podherd import arguments, client, cluster_read
from podherd.errors import CliError
from shared.config.model import PodherdConfig
from shared.rebalance.defrag import Defrag, NoPlan, defragment, pending_pods
from shared.rebalance.intents import move_intents
from shared.rebalance.planning import Planning
from shared.rebalance.snapshot import reserving_schedulers


def plan_cluster(config: PodherdConfig, pending: str | None) -> Defrag:
    """The plan for `pending` (NAMESPACE/POD; default: the largest pod the scheduler could not place)."""
    snapshot = cluster_read.read(config)
    for lacking in snapshot.unread:
        print(f"warning: {lacking}", file=sys.stderr)
    waiting = pending_pods(snapshot.pods)
    if pending:
        found = [p for p in waiting if p.key == pending]
        if not found:
            known = any(
                f"{(p.get('metadata') or {}).get('namespace')}/{p['metadata']['name']}" == pending
                for p in snapshot.pods
            )
            raise CliError(f"{pending} is not waiting for room" if known else f"no pod {pending}")
        waiting = found
    if not waiting:
        raise CliError("no pod is pending for lack of room: nothing to defragment")
    schedulers = reserving_schedulers(config.migration_controller)
    planning = Planning.of(snapshot.cluster, snapshot.candidates, schedulers=schedulers)
    try:
        return defragment(planning, waiting[0])
    except NoPlan as exc:
        raise CliError(str(exc)) from exc


def plan_data(chosen: Defrag) -> dict[str, Any]:
    return {
        "pending": chosen.pending.key,
        "empty": chosen.node,
        "moves": [{"pod": m.pod, "from": m.source, "to": m.target} for m in chosen.moves],
    }


def intents(chosen: Defrag, requester: str) -> list[Any]:
    return move_intents(
        chosen.moves, requester=requester, kind="defrag", reason=f"make room for {chosen.pending.key}"
    )


def run(args: argparse.Namespace) -> int:
    config = arguments.loaded(args)
    chosen = plan_cluster(config, args.pod)
    if args.output == "json":
        print(json.dumps(plan_data(chosen)))
    elif args.output == "yaml":
        print(yaml.safe_dump(plan_data(chosen), sort_keys=False), end="")
    else:
        print(f"to schedule {chosen.pending.key}, empty {chosen.node}:")
        print(client.table(("POD", "FROM", "TO"), [(m.pod, m.source, m.target) for m in chosen.moves]))
    if not args.apply:
        return 0
    sent = intents(chosen, "podherd-plan")
    sender = client.Sender.of(config, args.token_file)

    async def publish() -> int:
        async with client.nats_client(config) as nc:
            replies = await client.gather_replies(nc, sender, sent, within=args.timeout)
        for intent, reply in zip(sent, replies, strict=True):
            print(f"{intent.pod.namespace}/{intent.pod.name} -> job {reply.job}")
        return 0

    return asyncio.run(publish())
