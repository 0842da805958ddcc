"""The rounds of an admission pass, each made ready while the one before it is in the ledger.

A round takes the head of the ready queue to the ledger's admission script. Making a round ready (its jobs'
facts read, the rules applied) is the arbitrator's CPU; the script is Redis's. So the round that follows
is read and made ready while the script decides the current one, and the current one is told (published)
while the one after it goes to the ledger: none of the three waits for another. The round that follows is
what stands behind the current one in the queue; should anything come in ahead of it meanwhile (a job
queued or woken, another replica's round), the script refuses it, as the head is no longer what it was, and
the pass reads the head again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from services.arbitrator.candidates import Prepared
from shared.ledger import Ledger, Verdict
from shared.waits import cancel_and_wait

Prepare = Callable[[list[str]], Coroutine[Any, Any, list[Prepared]]]
Admit = Callable[[list[Prepared]], Coroutine[Any, Any, list[Verdict] | None]]
Tell = Callable[[list[Prepared], list[Verdict]], Coroutine[Any, Any, int]]
# A pass that keeps losing races to other replicas yields to the next wake-up.
ATTEMPTS = 32


async def run_rounds(ledger: Ledger, depth: int, *, prepare: Prepare, admit: Admit, tell: Tell) -> int:
    """Rounds of up to `depth` jobs until the ready queue is drained; returns how many were admitted."""
    admitted, retries = 0, 0
    telling: asyncio.Task[int] | None = None
    preparing: asyncio.Task[list[Prepared]] | None = None
    try:
        current, upcoming = await _head(ledger, depth)
        batch = await prepare(current) if current else []
        while current and retries < ATTEMPTS:
            if upcoming:
                preparing = asyncio.create_task(prepare(upcoming))
            verdicts = await admit(batch)
            if verdicts is None:  # another replica moved the head first
                retries += 1
                await cancel_and_wait(preparing)
                preparing = None
                current, upcoming = await _head(ledger, depth)
                batch = await prepare(current) if current else []
                continue
            if telling is not None:
                admitted += await telling
            telling = asyncio.create_task(tell(batch, verdicts))
            if preparing is None:
                break  # the queue is drained; whatever arrives now wakes the next pass
            # The current round's jobs have left the ready queue: `upcoming` leads it now.
            following = await ledger.head(depth, start=depth) if len(upcoming) == depth else []
            batch = await preparing
            preparing = None
            current, upcoming = upcoming, following
    except BaseException:
        # Cancelled or failed: what the pass started must not outlive it.
        await cancel_and_wait(preparing, telling)
        raise
    if telling is not None:
        admitted += await telling
    return admitted


async def _head(ledger: Ledger, depth: int) -> tuple[list[str], list[str]]:
    """The current round and the one behind it."""
    head = await ledger.head(2 * depth)
    return head[:depth], head[depth:]
