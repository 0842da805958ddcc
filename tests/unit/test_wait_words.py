"""What a deferred job's status says it waits for (services.arbitrator.wait_words): a limit's numbers,
never a countdown that goes stale between two writes."""

from __future__ import annotations

import pytest

from services.arbitrator.wait_words import pace, wait_words
from shared.ledger.slots import Bucket
from shared.ledger.store import Verdict

LIMITER = Bucket("objectLimiters.workload", "workload:default/web", 2 / 600, 2, "workload default/web")
QPS = Bucket("evictQPS", "global", 5.0, 10, "the global eviction rate")


@pytest.mark.parametrize(
    ("rate", "said"),
    [
        (5.0, "5 per second"),
        (1.0, "1 per second"),
        (2 / 600, "1 every 5m0s"),
        (0.5, "1 every 2s"),
        (0, "never"),
    ],
)
def test_a_rate_is_said_as_people_count_it(rate: float, said: str) -> None:
    assert pace(rate) == said


def test_a_token_bucket_is_said_by_its_rate_and_burst_not_its_countdown() -> None:
    verdict = Verdict(
        "deferred",
        "objectLimiters.workload",
        "deferred: objectLimiters.workload exhausted for workload default/web (next token in 299.50s)",
        "bucket:workload:default/web",
    )
    words = wait_words(verdict, [QPS, LIMITER])
    assert words == (
        "objectLimiters.workload: no migration left for workload default/web for now"
        " (refills 1 every 5m0s, burst 2)"
    )
    eviction_rate = Verdict("deferred", "evictQPS", "deferred: evictQPS exhausted …", "bucket:global")
    assert "evictQPS: no migration left for the global eviction rate" in wait_words(eviction_rate, [QPS])


@pytest.mark.parametrize(
    "message",
    [
        "PodDisruptionBudget 0/0 on PodDisruptionBudget default/web",
        "maxMigratingPerNode 1/1 on node node-a",
        "waiting for workload default/web",
    ],
)
def test_a_slot_or_a_wait_for_facts_keeps_its_own_words(message: str) -> None:
    verdict = Verdict("deferred", "rule", f"deferred: {message}", "slot:x")
    assert wait_words(verdict, [QPS]) == message
    assert wait_words(Verdict("deferred", "WaitingForFacts", message, "timer"), []) == message
