"""The demo on the embedded default.

Until kubesim and the services land, it runs the smallest real thing end to end: real NATS (JetStream) and
Redis from the `embedded` extra, one migration intent published twice under the same `Nats-Msg-Id` (stored
once), decoded strictly, and a ledger slot taken twice by a Lua script keyed by job UID (held once).
"""

from __future__ import annotations

import asyncio
import json
import time

import nats
import redis.asyncio as aioredis
from nats.js.api import StreamConfig

from shared.api import codec
from shared.api.messages import MigrationIntent, PodKey
from shared.servers import Server, nats_server, redis_server

TAKE_SLOT = """
-- KEYS[1]: the slot set; ARGV[1]: job uid; ARGV[2]: the limit. All or nothing, idempotent per uid.
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return 1 end
if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('SADD', KEYS[1], ARGV[1])
return 1
"""


async def _run(nats_url: str, redis_url: str) -> dict[str, object]:
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        await js.add_stream(StreamConfig(name="PODHERD_DEMO_INTENTS", subjects=["podherd.demo.intents.>"]))
        intent = MigrationIntent(
            idempotency_key="demo-1",
            pod=PodKey(namespace="default", name="web-0"),
            requester="podherd-demo",
            target_node="node-2",
        )
        data = codec.encode(intent)
        acks = [
            await js.publish(
                "podherd.demo.intents.default", data, headers={"Nats-Msg-Id": intent.idempotency_key}
            )
            for _ in range(2)
        ]
        info = await js.stream_info("PODHERD_DEMO_INTENTS")
        sub = await js.pull_subscribe("podherd.demo.intents.>", durable="demo")
        [msg] = await sub.fetch(1, timeout=5)
        decoded = codec.decode(msg.data, MigrationIntent)
        await msg.ack()
    finally:
        await nc.close()

    client = aioredis.from_url(redis_url)
    try:
        take = client.register_script(TAKE_SLOT)
        key = "podherd:demo:{node-1}:migrating"
        results = [await take(keys=[key], args=["job-uid-1", 2]) for _ in range(2)]
        held = await client.scard(key)
    finally:
        await client.aclose()
    return {
        "intent_published_times": len(acks),
        "intent_duplicate_acks": sum(1 for a in acks if a.duplicate),
        "intents_stored": info.state.messages,
        "intent_decoded": {
            "pod": f"{decoded.pod.namespace}/{decoded.pod.name}",
            "targetNode": decoded.target_node,
        },
        "slot_takes": results,
        "slots_held": held,
    }


def run_demo(keep: bool = False) -> int:
    started = time.monotonic()
    servers: list[Server] = []
    try:
        servers.append(nats_server())
        servers.append(redis_server())
        nats_srv, redis_srv = servers
        print(f"NATS  {nats_srv.url}  ({nats_srv.origin})")
        print(f"Redis {redis_srv.url}  ({redis_srv.origin})")
        summary = asyncio.run(_run(nats_srv.url, redis_srv.url))
        summary["seconds"] = round(time.monotonic() - started, 2)
        print(json.dumps(summary, indent=2))
        ok = summary["intents_stored"] == 1 and summary["slots_held"] == 1
        if keep:
            print("--keep: servers stay up; press Ctrl-C to stop them")
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                pass
        return 0 if ok else 1
    finally:
        for server in servers:
            server.stop()
