"""Faults of a JetStream cluster, for the tests and the chaos run: which server leads a stream or a KV
bucket (each is a Raft group of its own), killing it, and waiting for the group to elect another."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import nats.errors
import nats.js.errors

from podherd.harness.nats_cluster import NatsCluster
from podherd.harness.servers import Server
from shared.nats import bus

NAME_PREFIX = "podherd-n"  # start_nats_cluster names its servers podherd-n1, podherd-n2, ...


def server_named(cluster: NatsCluster, name: str) -> Server:
    index = int(name.removeprefix(NAME_PREFIX)) - 1
    return cluster.servers[index]


def raft_groups(subjects: bus.Subjects) -> list[str]:
    """Every Raft group Podherd's state lives in: its streams, and the streams behind its KV buckets that
    hold the services' progress (checkpoints, leases)."""
    return [
        subjects.events_stream,
        subjects.jobs_stream,
        subjects.intents_stream,
        subjects.audit_stream,
        bus.kv_stream(subjects.watch_bucket),
        bus.kv_stream(subjects.lease_bucket),
    ]


async def leader_of(js: Any, stream: str) -> str | None:
    """The server leading the stream's Raft group now (None while it elects one)."""
    try:
        info = await js.stream_info(stream)
    except (nats.errors.Error, nats.js.errors.Error, OSError):
        return None
    return info.cluster.leader if info.cluster is not None else None


async def kill_every_leader(js: Any, cluster: NatsCluster, groups: list[str], *, within: float = 60.0) -> int:
    """SIGKILL, in turn, the server leading each of `groups` (streams, KV buckets' streams) until each group
    has lost its leader once; each killed server is restarted, and current again, before the next kill (a
    server leading several groups at once takes them all down together). Returns how many were killed."""
    left = list(groups)
    kills = 0
    while left:
        deadline = time.monotonic() + within
        leader = await _elected(js, left[0], deadline=deadline)
        led = [g for g in left if await leader_of(js, g) == leader]
        victim = server_named(cluster, leader)
        victim.kill()
        kills += 1
        for group in led:
            await _elected(js, group, deadline=deadline, other_than=leader)
        await asyncio.to_thread(cluster.restart, victim)
        left = [g for g in left if g not in led]
    return kills


async def _elected(js: Any, group: str, *, deadline: float, other_than: str | None = None) -> str:
    """The group's leader, once it has one (other than `other_than`, the server just killed)."""
    while time.monotonic() < deadline:
        leader = await leader_of(js, group)
        if leader is not None and leader != other_than:
            return leader
        await asyncio.sleep(0.1)
    raise TimeoutError(f"stream {group} elected no leader" + (f" after {other_than}" if other_than else ""))
