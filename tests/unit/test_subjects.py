"""Subjects are spelled in one place: what services subscribe to matches what others publish."""

from __future__ import annotations

from shared.nats.bus import Subjects


def test_job_subjects_round_trip_their_step() -> None:
    subjects = Subjects("ph-1")
    subject = subjects.job("evict", "web.1*")
    assert subject == "ph-1.jobs.evict.web_1_"
    assert subjects.step_of(subject) == "evict"
    assert subjects.jobs_at("evict") == "ph-1.jobs.evict.>"
    assert subjects.audit("j") == "ph-1.audit.j" and subjects.all_audit == "ph-1.audit.>"
