"""The facts the rules read, kept in Redis by the arbitrator replicas from the watcher's events.

Each fact is stored only if its resourceVersion is newer than the stored one (a small script), so any
replica may apply any event, in any order, any number of times, and all converge. Deletions leave a
short-lived tombstone so a late, older event cannot resurrect an object. A fact is one string key
(`<resourceVersion>|<JSON>`), so a batch of them is read with one MGET.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline

from shared.api import codec
from shared.ledger.scripts import lua_script

T = TypeVar("T")


class FactStore:
    def __init__(self, client: aioredis.Redis, key_prefix: str) -> None:
        self.client = client
        self.prefix = f"{key_prefix}:facts"
        self._put = client.register_script(
            lua_script("put_if_newer.lua", "versions.lua", home="services.arbitrator")
        )

    def key(self, kind: str, ident: str) -> str:
        return f"{self.prefix}:{kind}:{ident}"

    def pdb_index(self, namespace: str) -> str:
        return f"{self.prefix}:pdbs:{namespace}"

    async def put_pod(self, ident: str, resource_version: str, *, pod: Any | None, pipe: Pipeline) -> None:
        """A pod's fact, as a command of `pipe` (its reply: whether it was newer than the stored one)."""
        data = b"" if pod is None else codec.encode(pod)
        await self._put(keys=[self.key("pod", ident)], args=[resource_version, data], client=pipe)

    async def put(self, kind: str, ident: str, resource_version: str, *, fact: Any | None) -> bool:
        data = b"" if fact is None else codec.encode(fact)
        changed = bool(await self._put(keys=[self.key(kind, ident)], args=[resource_version, data]))
        if changed and kind == "pdb":
            index = self.pdb_index(ident.split("/", 1)[0])
            if fact is None:
                await self.client.srem(index, ident)
            else:
                await self.client.sadd(index, ident)
        return changed

    def encoded(self, resource_version: str, fact: Any) -> bytes:
        """A fact as stored (for writing many at once)."""
        return resource_version.encode() + b"|" + codec.encode(fact)

    @staticmethod
    def decode_many(raw: Sequence[bytes | str | None], type_: type[T]) -> list[T | None]:
        """Facts as read with MGET: None for missing ones and tombstones."""
        out: list[T | None] = []
        for value in raw:
            data = (value.encode() if isinstance(value, str) else value) or b""
            body = data[data.find(b"|") + 1 :] if b"|" in data else b""
            out.append(codec.decode(body, type_) if body else None)
        return out

    async def get_many(self, kind: str, idents: Sequence[str], type_: type[T]) -> list[T | None]:
        if not idents:
            return []
        return self.decode_many(await self.client.mget([self.key(kind, i) for i in idents]), type_)
