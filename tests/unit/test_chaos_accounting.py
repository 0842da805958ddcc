"""The chaos run's accounting: when the services are past a server fault, and what a late Reservation's story
tells from the executors' logs."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from nats.js.api import ConsumerConfig, ConsumerInfo, SequenceInfo

from bench.backlog import past
from bench.chaos import Orphan


def consumer(*, acked: int, delivered: int, pending: int, ack_pending: int) -> ConsumerInfo:
    return ConsumerInfo(
        name="tracker",
        stream_name="P_EVENTS",
        config=ConsumerConfig(),
        created=datetime.now(UTC),
        delivered=SequenceInfo(consumer_seq=delivered, stream_seq=delivered),
        ack_floor=SequenceInfo(consumer_seq=acked, stream_seq=acked),
        num_pending=pending,
        num_ack_pending=ack_pending,
    )


def test_a_consumer_is_past_the_mark_once_everything_up_to_it_is_acknowledged() -> None:
    behind = consumer(acked=90, delivered=140, pending=5, ack_pending=50)
    assert not past(behind, 100, handled=True)
    assert past(consumer(acked=100, delivered=140, pending=5, ack_pending=40), 100, handled=True)


def test_handed_out_is_enough_where_acting_on_a_message_follows_taking_it() -> None:
    # An eviction a budget blocks is retried until its job ends: the ack floor stays behind it.
    held = consumer(acked=90, delivered=140, pending=5, ack_pending=50)
    assert past(held, 100, handled=False)
    assert not past(consumer(acked=90, delivered=95, pending=5, ack_pending=5), 100, handled=False)


def test_a_consumer_whose_filter_took_nothing_after_the_mark_is_past_it_once_idle() -> None:
    # The stream's last messages before the mark were for other consumers' subjects.
    idle = consumer(acked=80, delivered=80, pending=0, ack_pending=0)
    assert past(idle, 100, handled=True)
    assert not past(consumer(acked=70, delivered=80, pending=0, ack_pending=1), 100, handled=True)


def test_a_late_reservations_story_names_what_the_executors_said_of_its_job(tmp_path: Path) -> None:
    def said(ts: str, replica: str, msg: str, job: str) -> str:
        return json.dumps({"ts": ts, "replica": replica, "msg": msg, "job": job})

    (tmp_path / "executor-0.log").write_text(
        "\n".join(
            (
                said("T1", "executor-0", "created Reservation p-pmj-3", "p-pmj-3"),
                said("T3", "executor-0", "created Reservation p-pmj-33", "p-pmj-33"),
                said("T4", "executor-0", "deleted Reservations p-pmj-9, p-pmj-3-2", "p-pmj-9"),
                "not json p-pmj-3",
            )
        )
    )
    (tmp_path / "executor-1.log").write_text(
        said("T2", "executor-1", "deleted Reservations p-pmj-3", "p-pmj-3")
    )
    orphan = Orphan(job="p-pmj-3", outcome="Succeeded/-", untaken=False, ended="T0", late_by=4.0)
    orphan.gone_after = 6.0
    story = orphan.story("p-pmj-3", tmp_path)
    assert story == (
        "p-pmj-3 (taken) of p-pmj-3 (Succeeded/-, ended T0) still there 4s past its grace, gone 6s later;"
        " the executors said: T1 executor-0: created Reservation p-pmj-3; T2 executor-1: deleted Reservations"
        " p-pmj-3; T4 executor-0: deleted Reservations p-pmj-9, p-pmj-3-2"
    )
