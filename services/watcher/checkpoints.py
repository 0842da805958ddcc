"""resourceVersion checkpoints in NATS KV, fenced by the lease revision.

A checkpoint is written only after every event up to it was acknowledged by JetStream, so resuming from it
loses nothing. Each records the lease revision (term) of its writer; a replica whose term is older than the
stored one has lost its lease and is refused, so a deposed watcher cannot move the checkpoint.
"""

from __future__ import annotations

import json
import time

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError, NoKeysError
from nats.js.kv import KeyValue


class Fenced(Exception):
    """A newer lease holder has written this checkpoint."""


class Checkpoints:
    def __init__(self, kv: KeyValue, scope: str = "") -> None:
        self.kv = kv
        self.scope = scope

    def key(self, kind: str) -> str:
        return f"rv.{kind}{'.' + self.scope if self.scope else ''}"

    async def load(self, kind: str) -> str | None:
        try:
            entry = await self.kv.get(self.key(kind))
        except (KeyNotFoundError, NoKeysError):
            return None
        if not entry.value:
            return None
        return str(json.loads(entry.value)["rv"])

    async def save(self, kind: str, rv: str, term: int) -> None:
        key = self.key(kind)
        value = json.dumps({"rv": rv, "term": term, "at": time.time()}).encode()
        for _ in range(5):
            try:
                entry = await self.kv.get(key)
            except (KeyNotFoundError, NoKeysError):
                try:
                    await self.kv.create(key, value)
                    return
                except KeyWrongLastSequenceError:
                    continue
            stored_term = int(json.loads(entry.value or b"{}").get("term", 0))
            if stored_term > term:
                raise Fenced(f"checkpoint {key} belongs to term {stored_term}, this writer has {term}")
            try:
                await self.kv.update(key, value, last=entry.revision)
                return
            except KeyWrongLastSequenceError:
                continue
        raise Fenced(f"checkpoint {key} kept changing under this writer")

    async def clear(self, kind: str) -> None:
        try:
            await self.kv.delete(self.key(kind))
        except (KeyNotFoundError, NoKeysError):
            return
