"""Evictions in background (KEP-1397): the component behind the "Eviction triggered evacuation" answer.

A pod annotated both `request-evict-only` and `eviction-in-progress` is deleted (gracefully) once
`evacuation_delay` has passed since the annotation was set, as an external evacuator would do.
"""

from __future__ import annotations

import time

from kubesim.apiserver.eviction import EVICTION_IN_PROGRESS, REQUEST_EVICT_ONLY
from kubesim.apiserver.records import Event, parse_iso
from kubesim.apiserver.store import Store
from kubesim.controllers.base import Controller
from kubesim.options import SimOptions


class Evacuator(Controller[tuple[str, str]]):
    tick = 0.1

    def __init__(self, store: Store, options: SimOptions) -> None:
        super().__init__(store, options)
        self.pods = self.rt("", "v1", "pods")
        self.waiting: set[tuple[str, str]] = set()

    def on_event(self, event: Event) -> bool:
        if event.rt is not self.pods:
            return False
        meta = event.obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        annotations = meta.get("annotations") or {}
        if (
            event.type != "DELETED"
            and REQUEST_EVICT_ONLY in annotations
            and EVICTION_IN_PROGRESS in annotations
            and (not meta.get("deletionTimestamp"))
        ):
            self.waiting.add(key)
        else:
            self.waiting.discard(key)
        return False

    def periodic(self) -> None:
        now = time.time()
        for key in list(self.waiting):
            pod = self.store.find(self.pods, *key)
            if pod is None:
                self.waiting.discard(key)
                continue
            stamp = (pod["metadata"].get("annotations") or {}).get(EVICTION_IN_PROGRESS, "")
            try:
                since = parse_iso(stamp)
            except ValueError:
                since = 0.0
            if now - since >= self.options.evacuation_delay:
                self.waiting.discard(key)
                self.store.verbs.delete(self.pods, *key)
