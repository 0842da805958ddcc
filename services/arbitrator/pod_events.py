"""A fetch's pod events applied together, in two Redis round trips however many there are: each pod's fact
and its workload's Ready pods (maxUnavailablePerWorkload counts from them) first, then, for the pods whose
facts changed, the background-eviction sets (KEP-1397: such pods count as migrating) beside the queued
jobs made for them (their facts changed: they are ranked again)."""

from __future__ import annotations

from collections.abc import Sequence

import redis.asyncio as aioredis

from services.arbitrator.fact_store import FactStore
from services.arbitrator.keys import ArbitratorKeys
from shared.api import annotations as known
from shared.api.messages import EventHead, PodInfo
from shared.api.names import GATE_EVACUATION
from shared.ledger.scripts import as_text, lua_script
from shared.ledger.slots import GLOBAL, namespace_slot, node_slot, workload_slot
from shared.ledger.store import EVICTING_SCRIPT, POD_READY_SCRIPT, evicting_args, ready_args
from shared.rules.facts import available, workload_key

# A pod whose fact changed, and whether its event was a deletion.
Changed = tuple[PodInfo, bool]


class PodEvents:
    def __init__(self, client: aioredis.Redis, facts: FactStore, *, ledger_prefix: str, keys: ArbitratorKeys):
        self.client, self.facts, self.prefix, self.keys = client, facts, ledger_prefix, keys
        self._ready = client.register_script(lua_script(*POD_READY_SCRIPT))
        self._evicting = client.register_script(lua_script(*EVICTING_SCRIPT))

    async def apply(self, events: Sequence[tuple[EventHead, PodInfo]]) -> list[Changed]:
        """Each event's fact and Ready set, in order; the pods whose facts changed."""
        async with self.client.pipeline(transaction=False) as pipe:
            for head, pod in events:
                deleted = head.type == "DELETED"
                fact = None if deleted else pod
                await self.facts.put_pod(head.ident, head.resource_version, pod=fact, pipe=pipe)
                if pod.workload is not None:
                    slot = workload_slot(workload_key(pod.workload))
                    ready = ready_args(
                        head.ident,
                        head.resource_version,
                        pod.uid,
                        ready=available(pod),
                        workload_key=slot,
                        deleted=deleted,
                    )
                    await self._ready(keys=[self.prefix], args=ready, client=pipe)
            replies = iter(await pipe.execute())
        changed = []
        for head, pod in events:
            newer = next(replies)
            if pod.workload is not None:
                next(replies)  # the Ready set's answer: nothing follows from it here
            if newer:
                changed.append((pod, head.type == "DELETED"))
        return changed

    async def evicting(self, pods: Sequence[Changed]) -> list[str]:
        """Each changed pod's background eviction counted in its slots, or no longer; the uids of the jobs
        queued for these pods."""
        async with self.client.pipeline(transaction=False) as pipe:
            for pod, deleted in pods:
                pipe.hget(self.keys.pod_jobs, f"{pod.namespace}/{pod.name}")
                mark = pod.annotations.get(known.EVICTION_IN_PROGRESS)
                in_progress = (
                    mark is not None
                    and not mark.startswith(GATE_EVACUATION)
                    and (pod.deletion_timestamp is None and not deleted)
                )
                args = evicting_args(pod.uid, in_progress, _slot_keys(pod))
                await self._evicting(keys=[self.prefix], args=args, client=pipe)
            replies = await pipe.execute() if pods else []
        return [as_text(uid) for uid in replies[::2] if uid is not None]


def _slot_keys(pod: PodInfo) -> list[str]:
    keys = [GLOBAL, namespace_slot(pod.namespace)]
    if pod.node_name:
        keys.append(node_slot(pod.node_name))
    if pod.workload is not None:
        keys.append(workload_slot(workload_key(pod.workload)))
    return keys
