"""A lease in NATS KV: one active replica per role, handed over within the TTL when it dies.

The holder writes `{holder, expires}` under a key with compare-and-set on the key's revision, and renews well
inside the TTL (every third of it). A replica takes the lease only when the key is absent or the recorded
expiry has passed, again by compare-and-set, so two replicas can never both win the same revision. The
revision is the fencing token: a holder whose renewal finds a different revision has lost the lease and
must stop at once. Releasing deletes the key, so a standby watching it takes over immediately on a graceful
shutdown; on a crash it takes over once the TTL has run out.

Wall-clock expiry assumes replicas' clocks agree to well within the TTL (NTP), as Kubernetes' own leases do.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import dataclass

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError, NoKeysError
from nats.js.kv import KeyValue

from shared.core.waits import wait_event

log = logging.getLogger(__name__)


@dataclass
class LeaseState:
    holder: str
    expires: float
    revision: int


class Lease:
    def __init__(self, kv: KeyValue, key: str, holder: str, *, ttl: float) -> None:
        self.kv = kv
        self.key = key
        self.holder = holder
        self.ttl = ttl
        self.revision: int | None = None  # the fencing token while held
        self.lost = asyncio.Event()

    @property
    def held(self) -> bool:
        return self.revision is not None

    def _value(self) -> bytes:
        return json.dumps({"holder": self.holder, "expires": time.time() + self.ttl}).encode()

    async def current(self) -> LeaseState | None:
        try:
            entry = await self.kv.get(self.key)
        except (KeyNotFoundError, NoKeysError):
            return None
        if entry.value is None or entry.revision is None:
            return None
        data = json.loads(entry.value)
        return LeaseState(holder=data["holder"], expires=float(data["expires"]), revision=entry.revision)

    async def try_acquire(self) -> bool:
        state = await self.current()
        try:
            if state is None:
                self.revision = await self.kv.create(self.key, self._value())
            elif state.holder == self.holder or state.expires < time.time():
                self.revision = await self.kv.update(self.key, self._value(), last=state.revision)
            else:
                return False
        except KeyWrongLastSequenceError:
            return False  # someone else got there first
        self.lost.clear()
        log.info("lease %s acquired by %s (revision %s)", self.key, self.holder, self.revision)
        return True

    async def renew(self) -> bool:
        if self.revision is None:
            return False
        try:
            self.revision = await self.kv.update(self.key, self._value(), last=self.revision)
            return True
        except KeyWrongLastSequenceError:
            self._lose("another replica holds it now")
            return False

    def _lose(self, why: str) -> None:
        if self.revision is not None:
            log.warning("lease %s lost by %s: %s", self.key, self.holder, why)
        self.revision = None
        self.lost.set()

    async def release(self) -> None:
        if self.revision is None:
            return
        with contextlib.suppress(Exception):
            await self.kv.delete(self.key, last=self.revision)
        self.revision = None
        self.lost.set()

    async def hold(self, stop: asyncio.Event) -> None:
        """Renew every third of the TTL until `stop`, a lost renewal, or no successful renewal in time."""
        last_ok = time.monotonic()
        while not stop.is_set() and self.revision is not None:
            await wait_event(stop, self.ttl / 3)
            if stop.is_set():
                return
            try:
                if not await self.renew():
                    return
                last_ok = time.monotonic()
            except Exception as exc:  # NATS unreachable: we cannot prove we still hold it
                log.warning("lease %s renewal failed: %s", self.key, exc)
                if time.monotonic() - last_ok > self.ttl * 2 / 3:
                    self._lose("could not renew within the TTL")
                    return

    async def wait_for_turn(self, stop: asyncio.Event, poll: float = 1.0) -> bool:
        """Block until this replica holds the lease (True) or `stop` is set (False).

        Watches the key so a released lease is taken at once; polls so an expired one is taken within
        `poll` seconds of its expiry.
        """
        watcher = await self.kv.watch(self.key, include_history=False, ignore_deletes=False)
        try:
            while not stop.is_set():
                if await self.try_acquire():
                    return True
                state = await self.current()
                wait = poll if state is None else max(0.05, min(poll, state.expires - time.time() + 0.05))
                with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
                    await watcher.updates(timeout=wait)  # type: ignore[no-untyped-call]
            return False
        finally:
            with contextlib.suppress(Exception):
                await watcher.stop()  # type: ignore[no-untyped-call]
