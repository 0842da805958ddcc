"""A plan's moves as migration intents: one per move, with its target node, keyed by the plan (the same plan
sent twice is the same jobs)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from shared.api.messages import AtomicPlan, MigrationIntent, PodKey
from shared.rebalance.planning import Move


def plan_stamp(moves: Sequence[Move]) -> str:
    """A plan's moves, hashed: the same moves are the same plan (and the same jobs)."""
    return hashlib.sha256("|".join(f"{m.pod}>{m.target}" for m in moves).encode()).hexdigest()[:12]


def move_intents(
    moves: Sequence[Move],
    *,
    requester: str,
    kind: str,
    reason: str,
    atomic_timeout: str | None = None,
    stamp: str | None = None,
) -> list[MigrationIntent]:
    """`kind` names the plan in each key (defrag, rebalance); `reason` goes with every intent, each move's
    own why after it. With `atomic_timeout`, the moves are one atomic plan (`{kind}-{stamp}`): none moves
    until every one has room, and all are rolled back if that does not happen within the timeout. `stamp`:
    the whole plan's, when `moves` are one wave of it."""
    stamp = stamp or plan_stamp(moves)
    atomic = (
        AtomicPlan(name=f"{kind}-{stamp}", size=len(moves), timeout=atomic_timeout)
        if atomic_timeout
        else None
    )
    intents = []
    for move in moves:
        namespace, name = move.pod.split("/", 1)
        intents.append(
            MigrationIntent(
                idempotency_key=f"{kind}-{stamp}-{namespace}-{name}"[:200],
                pod=PodKey(namespace=namespace, name=name),
                requester=requester,
                target_node=move.target,
                mode="ReservationFirst",
                reason=f"{reason}: {move.why}"[:1024] if move.why != reason else reason[:1024],
                atomic_plan=atomic,
            )
        )
    return intents
