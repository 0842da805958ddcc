"""A control loop: a dirty set filled by store events, drained by one task, plus an optional periodic tick."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable
from typing import Generic, TypeVar

from kubesim.apiserver.errors import ApiError
from kubesim.apiserver.records import Event, Obj
from kubesim.apiserver.resources import ResourceType
from kubesim.apiserver.store import Store
from kubesim.options import SimOptions
from shared.core.waits import cancel_and_wait, wait_event

log = logging.getLogger("kubesim.controllers")
K = TypeVar("K", bound=Hashable)


class Controller(Generic[K]):
    tick: float | None = None  # seconds between periodic passes, None for purely event-driven

    def __init__(self, store: Store, options: SimOptions) -> None:
        self.store = store
        self.options = options
        self.dirty: set[K] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        store.log.observers.append(self._observe)

    def rt(self, group: str, version: str, plural: str) -> ResourceType:
        rt = self.store.registry.get(group, version, plural)
        assert rt is not None, plural
        return rt

    def drop_finalizer(self, rt: ResourceType, obj: Obj, finalizer: str) -> None:
        """Take `finalizer` off the stored object `obj` names, if it still carries it: an update through the
        API's verbs, so an object being deleted goes once its last finalizer does."""
        meta = obj["metadata"]
        namespace = meta.get("namespace", "") if rt.namespaced else ""
        current = self.store.find(rt, namespace, meta["name"])
        if current is None or finalizer not in (current["metadata"].get("finalizers") or []):
            return
        new = self.store.copy_of(rt, namespace, meta["name"])
        new["metadata"]["finalizers"] = [f for f in new["metadata"]["finalizers"] if f != finalizer]
        self.store.verbs.update(rt, namespace, meta["name"], obj=new)

    def _observe(self, event: Event) -> None:
        if self.on_event(event):
            self._wake.set()

    def on_event(self, event: Event) -> bool:
        """Note what `event` makes dirty; return True to wake the loop. Must not write to the store."""
        return False

    def mark(self, key: K) -> None:
        self.dirty.add(key)
        self._wake.set()

    def reconcile(self, key: K) -> None:
        """Bring one dirty key to its desired state."""

    def periodic(self) -> None:
        """Work done every `tick` seconds (timers, expiry, retries)."""

    def start(self) -> None:
        # Objects that existed before this loop started (a loaded scenario) are seen as ADDED, once.
        for rt in self.store.registry.all():
            for key, stored in list(self.store.bucket(rt).objects.items()):
                self._observe(Event(self.store.rv, "ADDED", rt, key[0], stored.obj, stored.raw))
        self._task = asyncio.get_running_loop().create_task(self._run(), name=type(self).__name__)

    async def stop(self) -> None:
        await cancel_and_wait(self._task)

    async def _run(self) -> None:
        while True:
            if self.tick is None:
                await self._wake.wait()
            else:
                await wait_event(self._wake, self.tick)
            self._wake.clear()
            await asyncio.sleep(0)  # let a burst of events settle into one pass
            self._pass()

    def _pass(self) -> None:
        keys, self.dirty = self.dirty, set()
        for key in keys:
            try:
                self.reconcile(key)
            except ApiError as exc:
                if exc.code not in (404, 409):
                    log.warning("%s: %s: %s", type(self).__name__, key, exc.message)
                if exc.code == 409:
                    self.dirty.add(key)
            except Exception:
                log.exception("%s failed on %s", type(self).__name__, key)
        try:
            self.periodic()
        except Exception:
            log.exception("%s periodic pass failed", type(self).__name__)
        if self.dirty:
            self._wake.set()
