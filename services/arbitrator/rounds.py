"""The rounds of an admission pass, each made ready while the one before it is in the ledger.

A round takes the head of the ready queue to the ledger's admission script. Making a round ready is a read
(its jobs' facts, from Redis) and then CPU (the rules applied); the script is Redis's CPU, and Redis does
one thing at a time: a read sent while a script runs waits for it. So the round that follows is read before
the current round's script is sent, and made ready while the script decides, as the round before is told
(its outcomes published): Redis and the arbitrator work side by side instead of in turn. The round that
follows is what stands behind the current one in the queue; should anything come in ahead of it meanwhile
(a job queued or woken, another replica's round), the script refuses it, as the head is no longer what it
was, and the pass reads the head again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from services.arbitrator.candidates import Prepared
from shared.core.waits import cancel_and_wait
from shared.ledger.store import Ledger, Verdict

Admit = Callable[[list[Prepared]], Coroutine[Any, Any, list[Verdict] | None]]
Tell = Callable[[list[Prepared], list[Verdict]], Coroutine[Any, Any, int]]
# A pass that keeps losing races to other replicas yields to the next wake-up.
ATTEMPTS = 32
R = TypeVar("R")  # a round's facts as read


async def run_rounds(
    ledger: Ledger,
    depth: int,
    *,
    read: Callable[[list[str]], Coroutine[Any, Any, R]],
    make: Callable[[R], list[Prepared]],
    admit: Admit,
    tell: Tell,
) -> int:
    """Rounds of up to `depth` jobs until the ready queue is drained; returns how many were admitted.

    `read` gathers a round's facts (I/O only, the less CPU the better), `make` turns them into the round
    (CPU only, no I/O)."""
    admitted, retries = 0, 0
    telling: asyncio.Task[int] | None = None
    admitting: asyncio.Task[list[Verdict] | None] | None = None
    decided: tuple[list[Prepared], list[Verdict]] | None = None  # the last round, not yet told
    try:
        current, upcoming = await _head(ledger, depth)
        batch = make(await read(current)) if current else []
        while current and retries < ATTEMPTS:
            ahead, following = None, []
            if upcoming:
                ahead, following = await asyncio.gather(read(upcoming), _behind(ledger, depth, upcoming))
            admitting = asyncio.create_task(admit(batch))
            await asyncio.sleep(0)  # the script is on its way before the CPU below
            if decided is not None:
                # Told (published) while this round's script runs, not while the next round is read.
                admitted += await telling if telling is not None else 0
                telling, decided = asyncio.create_task(tell(*decided)), None
            prepared = make(ahead) if ahead is not None else []
            verdicts = await admitting
            admitting = None
            if verdicts is None:  # another replica moved the head first
                retries += 1
                current, upcoming = await _head(ledger, depth)
                batch = make(await read(current)) if current else []
                continue
            decided = (batch, verdicts)
            if not upcoming:
                break  # the queue is drained; whatever arrives now wakes the next pass
            # The current round's jobs have left the ready queue: `upcoming` leads it now.
            batch, current, upcoming = prepared, upcoming, following
        if telling is not None:
            admitted += await telling
            telling = None
        if decided is not None:
            admitted += await tell(*decided)
    except BaseException:
        # Cancelled or failed: what the pass started must not outlive it. An outcome taken off the queue
        # and not told is told later by whichever replica finds it unannounced.
        await cancel_and_wait(admitting, telling)
        raise
    return admitted


async def _head(ledger: Ledger, depth: int) -> tuple[list[str], list[str]]:
    """The current round and the one behind it."""
    head = await ledger.queue.head(2 * depth)
    return head[:depth], head[depth:]


async def _behind(ledger: Ledger, depth: int, upcoming: list[str]) -> list[str]:
    """The round behind `upcoming`, read while the current round is still in the queue ahead of both."""
    return await ledger.queue.head(depth, start=2 * depth) if len(upcoming) == depth else []
