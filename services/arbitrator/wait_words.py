"""What a deferred job waits for, as its PodMigrationJob's status says it: the limit and its numbers, in
words that stay true while the job waits (no countdown: the status is written when the wait changes)."""

from __future__ import annotations

from collections.abc import Iterable

from shared.core.durations import format_duration
from shared.ledger.slots import Bucket
from shared.ledger.store import Verdict

_DEFERRED = "deferred: "


def pace(rate: float) -> str:
    """A token bucket's refill rate as people say it: "2 per second", "1 every 5m0s"."""
    if rate <= 0:
        return "never"
    if rate >= 1:
        return f"{rate:g} per second"
    return f"1 every {format_duration(round(1 / rate, 3))}"


def wait_words(verdict: Verdict, buckets: Iterable[Bucket]) -> str:
    """The deferral in the status's words. A slot's own message already has its numbers (used/limit and
    the object, e.g. a PodDisruptionBudget's name); a bucket's carries a countdown that would go stale, so
    it is said as the bucket's rate and burst instead."""
    if verdict.gate.startswith("bucket:"):
        key = verdict.gate.removeprefix("bucket:")
        bucket = next((b for b in buckets if b.key == key and b.rule == verdict.rule), None)
        if bucket is not None:
            return (
                f"{bucket.rule}: no migration left for {bucket.what} for now"
                f" (refills {pace(bucket.rate)}, burst {bucket.burst})"
            )
    return verdict.message.removeprefix(_DEFERRED)
