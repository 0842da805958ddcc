"""The demo on the embedded default: kubesim, real NATS (JetStream) and Redis from the `embedded` extra.

What it shows today (the migration pipeline itself arrives with the arbitrator, executor and tracker):
1. kubesim serves the `fragmented` scenario (seed 002's picture: every node half full, a node-sized pod
   pending) to the watcher through an ordinary kubeconfig;
2. the watcher lists and watches every kind and publishes them onto JetStream; a pod is deleted, its
   Deployment replaces it, and both changes arrive on the stream;
3. a migration intent published twice under one `Nats-Msg-Id` is stored once and decodes strictly;
4. a ledger slot taken twice by a Lua script keyed by job UID is held once.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import nats
import redis.asyncio as aioredis
import yaml
from nats.js.api import StreamConfig

from kubesim.sim import SimHandle, start_in_thread
from services.watcher.decode import RawList, RawPod
from services.watcher.service import Watcher
from shared.api import codec
from shared.api.messages import MigrationIntent, PodKey
from shared.bus import Subjects
from shared.config import config_from_dict
from shared.kube import KubeClient
from shared.servers import Server, nats_server, redis_server

TAKE_SLOT = """
-- KEYS[1]: the slot set; ARGV[1]: job uid; ARGV[2]: the limit. All or nothing, idempotent per uid.
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return 1 end
if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('SADD', KEYS[1], ARGV[1])
return 1
"""
PREFIX = "podherd"
CRDS = Path(__file__).resolve().parents[1] / "deploy" / "crds"


def _apply_crds(kube: KubeClient) -> None:
    for path in sorted(CRDS.glob("*.yaml")):
        kube.request(
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            body=yaml.safe_load(path.read_text()),
            content_type="application/json",
        )


async def _events(js: Any, subject: str) -> list[dict[str, Any]]:
    sub = await js.subscribe(subject, ordered_consumer=True)
    out = []
    try:
        while True:
            msg = await sub.next_msg(timeout=1.0)
            out.append(json.loads(msg.data))
            if msg.metadata.num_pending == 0:
                break
    except (TimeoutError, nats.errors.TimeoutError):
        pass
    await sub.unsubscribe()
    return out


async def _watch_cluster(nats_url: str, handle: SimHandle) -> dict[str, Any]:
    config = config_from_dict(
        {
            "nats": {"url": nats_url, "subjectPrefix": PREFIX},
            "kubernetes": {"kubeconfig": str(handle.kubeconfig)},
            "replica": "demo-watcher",
            "http": {"port": 0},
            "watcher": {"checkpointInterval": "200ms"},
        }
    )
    nc = await nats.connect(nats_url)
    kube = KubeClient.from_config(config.kubernetes)
    await asyncio.to_thread(_apply_crds, kube)
    watcher = Watcher(config, nc, kube)
    stop = asyncio.Event()
    task = asyncio.create_task(watcher.run(stop))
    js = nc.jetstream()
    subjects = Subjects(PREFIX)
    try:
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in watcher.synced.values())), 30)
        listing = await kube.arequest(
            "GET", "/api/v1/namespaces/default/pods", [("labelSelector", "app=web")]
        )
        web = msgspec.json.decode(listing, type=RawList[RawPod]).items
        before = {p.metadata.uid for p in web}
        victim = web[0].metadata
        await kube.arequest("DELETE", f"/api/v1/namespaces/default/pods/{victim.name}")
        deadline = time.monotonic() + 20
        replacement = None
        gone = False
        while not (replacement and gone) and time.monotonic() < deadline:
            pods = await _events(js, subjects.events_of("pods"))
            replacement = next(
                (
                    e
                    for e in pods
                    if e["name"].startswith("web-") and e["uid"] not in before and e["object"].get("ready")
                ),
                None,
            )
            gone = any(e["uid"] == victim.uid and e["type"] == "DELETED" for e in pods)
        every = await _events(js, subjects.all_events)
        big = msgspec.json.decode(await kube.arequest("GET", "/api/v1/namespaces/default/pods/big"))
        return {
            "events_by_kind": dict(Counter(e["kind"] for e in every)),
            "deleted_pod": victim.name,
            "deleted_pod_events": [e["type"] for e in every if e["uid"] == victim.uid],
            "replacement_pod": replacement["name"] if replacement else None,
            "replacement_node": (replacement or {}).get("object", {}).get("nodeName"),
            "big_pod": {"phase": big["status"]["phase"], "why": big["status"]["conditions"][0]["message"]},
        }
    finally:
        stop.set()
        await task
        await nc.close()
        kube.close()


async def _intents_and_slots(nats_url: str, redis_url: str) -> dict[str, Any]:
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
        stored = (await js.stream_info("PODHERD_DEMO_INTENTS")).state.messages
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
        "intent_published": len(acks),
        "intent_stored": stored,
        "intent_decoded": f"{decoded.pod.namespace}/{decoded.pod.name} -> {decoded.target_node}",
        "slot_takes": results,
        "slots_held": held,
    }


def run_demo(keep: bool = False) -> int:
    started = time.monotonic()
    servers: list[Server] = []
    handle: SimHandle | None = None
    try:
        servers.append(nats_server())
        servers.append(redis_server())
        nats_srv, redis_srv = servers
        handle = start_in_thread(scenario="fragmented")
        print(f"kubesim {handle.url}  (KUBECONFIG={handle.kubeconfig})")
        print(f"NATS    {nats_srv.url}  ({nats_srv.origin})")
        print(f"Redis   {redis_srv.url}  ({redis_srv.origin})")
        summary: dict[str, Any] = {"cluster": asyncio.run(_watch_cluster(nats_srv.url, handle))}
        summary["ledger_and_intents"] = asyncio.run(_intents_and_slots(nats_srv.url, redis_srv.url))
        summary["seconds"] = round(time.monotonic() - started, 2)
        print(json.dumps(summary, indent=2))
        cluster, ledger = summary["cluster"], summary["ledger_and_intents"]
        ok = (
            cluster["deleted_pod_events"][-1:] == ["DELETED"]
            and cluster["replacement_pod"] is not None
            and ledger["intent_stored"] == 1
            and ledger["slots_held"] == 1
        )
        if keep:
            print("--keep: everything stays up; press Ctrl-C to stop")
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                pass
        return 0 if ok else 1
    finally:
        if handle is not None:
            handle.stop()
        for server in servers:
            server.stop()
