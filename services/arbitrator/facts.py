"""The facts the rules read, kept in Redis by the arbitrator replicas from the watcher's events.

Each fact is stored only if its resourceVersion is newer than the stored one (a small script), so any
replica may apply any event, in any order, any number of times, and all converge. Deletions leave a
short-lived tombstone so a late, older event cannot resurrect an object.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
import redis.asyncio as aioredis

from shared.api import codec
from shared.api.messages import PdbInfo, PodInfo, WorkloadInfo
from shared.ledger import as_text, lua_script

T = TypeVar("T")


class FactStore:
    def __init__(self, client: aioredis.Redis, key_prefix: str) -> None:
        self.client = client
        self.prefix = f"{key_prefix}:facts"
        self._put = client.register_script(lua_script("put_if_newer.lua"))

    def _key(self, kind: str, ident: str) -> str:
        return f"{self.prefix}:{kind}:{ident}"

    async def put(self, kind: str, ident: str, resource_version: str, fact: Any | None) -> bool:
        data = b"" if fact is None else codec.encode(fact)
        changed = bool(await self._put(keys=[self._key(kind, ident)], args=[resource_version, data]))
        if changed and kind == "pdb":
            namespace = ident.split("/", 1)[0]
            index = f"{self.prefix}:pdbs:{namespace}"
            if fact is None:
                await self.client.srem(index, ident)
            else:
                await self.client.sadd(index, ident)
        return changed

    async def get(self, kind: str, ident: str, type_: type[T]) -> T | None:
        data = await self.client.hget(self._key(kind, ident), "data")
        if not data:
            return None
        return msgspec.json.decode(data, type=type_)

    async def pod(self, namespace: str, name: str) -> PodInfo | None:
        return await self.get("pod", f"{namespace}/{name}", PodInfo)

    async def workload(self, kind: str, namespace: str, name: str) -> WorkloadInfo | None:
        return await self.get("workload", f"{kind}/{namespace}/{name}", WorkloadInfo)

    async def pdbs(self, namespace: str) -> list[PdbInfo]:
        names = await self.client.smembers(f"{self.prefix}:pdbs:{namespace}")
        found = []
        for ident in sorted(as_text(n) for n in names):
            pdb = await self.get("pdb", ident, PdbInfo)
            if pdb is not None:
                found.append(pdb)
        return found
