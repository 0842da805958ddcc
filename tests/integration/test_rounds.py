"""An admission pass's rounds (services.arbitrator.rounds) against a real ledger: every job decided once, in
queue order, the next round read before the current one goes to the ledger and made ready while it is
there, and a round whose head changed meanwhile refused and read again."""

from __future__ import annotations

import asyncio

import pytest

from services.arbitrator.candidates import Prepared
from services.arbitrator.rounds import run_rounds
from shared.ledger.store import Candidate, Ledger, Verdict
from tests.conftest import RedisScope

pytestmark = [pytest.mark.integration]
DEPTH = 8


def prepared(uid: str) -> Prepared:
    return Prepared(Candidate(uid, f"pod-{uid}", (), ()), uid, 0.0)


async def test_rounds_decide_every_job_in_order_each_made_ready_while_the_one_before_is_decided(
    redis_scope: RedisScope,
) -> None:
    ledger = Ledger(redis_scope.client, redis_scope.prefix, 600.0)
    await ledger.completeness.rebuild([])
    await ledger.queue.enqueue_many((f"j{i:02d}", f"{i:04d}") for i in range(20))
    events: list[str] = []
    told: list[str] = []

    async def read(uids: list[str]) -> list[str]:
        events.append(f"read {uids[0]}")
        await asyncio.sleep(0)
        return uids

    def make(uids: list[str]) -> list[Prepared]:
        events.append(f"make {uids[0]}")
        return [prepared(uid) for uid in uids]

    async def admit(batch: list[Prepared]) -> list[Verdict] | None:
        events.append(f"admit {batch[0].name}")
        verdicts = await ledger.admit_batch([b.candidate for b in batch], from_queue=True)
        events.append(f"admitted {batch[0].name}")
        return verdicts

    async def tell(batch: list[Prepared], verdicts: list[Verdict]) -> int:
        told.extend(b.name for b, v in zip(batch, verdicts, strict=True) if v.admitted)
        return sum(v.admitted for v in verdicts)

    admitted = await run_rounds(ledger, DEPTH, read=read, make=make, admit=admit, tell=tell)
    assert admitted == 20
    assert told == [f"j{i:02d}" for i in range(20)]  # queue order, each once
    assert not await ledger.queue.head(1)
    # Each round is read before the one ahead of it goes to the ledger (a read sent during a script would
    # wait for it), and made ready while that one is in the ledger.
    for ahead, behind in (("j00", "j08"), ("j08", "j16")):
        assert events.index(f"read {behind}") < events.index(f"admit {ahead}")
        assert events.index(f"admit {ahead}") < events.index(f"make {behind}")
        assert events.index(f"make {behind}") < events.index(f"admitted {ahead}")


async def test_a_round_whose_head_changed_is_refused_and_the_head_read_again(redis_scope: RedisScope) -> None:
    ledger = Ledger(redis_scope.client, redis_scope.prefix, 600.0)
    await ledger.completeness.rebuild([])
    await ledger.queue.enqueue_many((f"j{i:02d}", f"{i + 10:04d}") for i in range(12))
    told: list[str] = []
    jumped = False

    async def read(uids: list[str]) -> list[str]:
        return uids

    def make(uids: list[str]) -> list[Prepared]:
        return [prepared(uid) for uid in uids]

    async def admit(batch: list[Prepared]) -> list[Verdict] | None:
        nonlocal jumped
        if batch[0].name == "j08" and not jumped:  # a better job is queued while the second round is ready
            jumped = True
            await ledger.queue.enqueue_many([("urgent", "0001")])
        return await ledger.admit_batch([b.candidate for b in batch], from_queue=True)

    async def tell(batch: list[Prepared], verdicts: list[Verdict]) -> int:
        told.extend(b.name for b, v in zip(batch, verdicts, strict=True) if v.admitted)
        return len(batch)

    await run_rounds(ledger, DEPTH, read=read, make=make, admit=admit, tell=tell)
    assert told == [*(f"j{i:02d}" for i in range(8)), "urgent", *(f"j{i:02d}" for i in range(8, 12))]
