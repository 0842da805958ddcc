"""`podherd plan` for a pending pod (`--policy defrag`, the default): the node to empty and where its pods
go, shown, and with `--apply` sent as intents."""

from __future__ import annotations

import argparse
import asyncio

import yaml

from podherd import arguments, client


def run(args: argparse.Namespace) -> int:
    config = arguments.loaded(args)
    chosen = client.plan_cluster(config, args.pod)
    if args.output == "json":
        print(client.plan_json(chosen))
    elif args.output == "yaml":
        print(yaml.safe_dump(client.plan_data(chosen), sort_keys=False), end="")
    else:
        print(f"to schedule {chosen.pending.key}, empty {chosen.node}:")
        rows = [(m.pod.key, m.pod.node or "", m.target_node) for m in chosen.moves]
        print(client.table(("POD", "FROM", "TO"), rows))
    if not args.apply:
        return 0
    intents = client.plan_intents(chosen, "podherd-plan", f"make room for {chosen.pending.key}")
    sender = client.Sender.of(config, args.token_file)

    async def publish() -> int:
        async with client.nats_client(config) as nc:
            replies = await client.gather_replies(nc, sender, intents, within=args.timeout)
        for intent, reply in zip(intents, replies, strict=True):
            print(f"{intent.pod.namespace}/{intent.pod.name} -> job {reply.job}")
        return 0

    return asyncio.run(publish())
