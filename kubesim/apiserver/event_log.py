"""The store's change history and who listens to it: open watches (fed encoded events) and the control
loops' observers. The history is bounded; a watch resuming from before it gets 410 Gone.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from kubesim.apiserver.errors import bad_request, gone
from kubesim.apiserver.records import Event, Obj, Watch, encode_event, translate


class EventLog:
    def __init__(self, history: int) -> None:
        self.history: deque[Event] = deque(maxlen=history)
        self.compacted_rv = 1  # a watch may resume from any rv >= this
        self.watches: set[Watch] = set()
        self.observers: list[Callable[[Event], None]] = []

    def emit(self, event: Event) -> None:
        if len(self.history) == self.history.maxlen:
            self.compacted_rv = self.history[0].rv
        self.history.append(event)
        for watch in list(self.watches):
            if watch.rt.key != event.rt.key or watch.queue is None:
                continue
            translated = translate(watch, event)
            if translated:
                watch.queue.put_nowait(encode_event(translated, event.raw))
        for observer in self.observers:
            observer(event)

    def replay(self, watch: Watch, resource_version: str) -> list[tuple[str, Obj, bytes]]:
        """The events after `resource_version` that `watch` sees, as it sees them."""
        try:
            start = int(resource_version)
        except ValueError:
            raise bad_request(f"invalid resourceVersion {resource_version!r}") from None
        if start < self.compacted_rv:
            raise gone(f"too old resource version: {start} ({self.compacted_rv})")
        replayed: list[tuple[str, Obj, bytes]] = []
        for event in self.history:
            if event.rv > start and event.rt.key == watch.rt.key:
                translated = translate(watch, event)
                if translated:
                    replayed.append((translated, event.obj, event.raw))
        return replayed

    def compact(self, rv: int) -> None:
        """Forget all history: every watch or continue token from before `rv` gets 410 Gone."""
        self.history.clear()
        self.compacted_rv = rv
