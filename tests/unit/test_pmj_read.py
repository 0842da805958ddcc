"""A PodMigrationJob as Podherd reads it: whatever its author wrote, reading never fails, and a job that
cannot run says which field and what is allowed, in the author's terms (no type names, no patterns)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from services.tracker.jobs.invalid import end_invalid
from services.tracker.jobs.machine import RELEASE
from shared.api.pmj import PodMigrationJobSpec
from shared.api.pmj_read import read_pmj
from shared.api.validation import Invalid

POD = {"namespace": "shop", "name": "web-0"}


def raw(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {"name": "j", "uid": "j-uid"},
        "spec": {"podRef": POD, **spec},
        "status": {"phase": "Pending"},
    }


@pytest.mark.parametrize(
    ("spec", "reason", "message"),
    [
        (
            {"mode": "Teleport"},
            "InvalidSpec",
            'spec.mode: "Teleport" is not allowed; use ReservationFirst or EvictDirectly',
        ),
        (
            {"mode": "evictdirectly"},
            "InvalidSpec",
            'spec.mode: "evictdirectly" is not allowed; use ReservationFirst',
        ),
        (
            {"ttl": "5 minutes"},
            "InvalidSpec",
            'spec.ttl: "5 minutes" is not allowed; use a duration such as 30s',
        ),
        (
            {"ttl": 300},
            "InvalidSpec",
            "spec.ttl: 300 is not allowed; use a duration such as 30s, 5m or 1h30m",
        ),
        ({"ttl": "-5m"}, "InvalidSpec", "spec.ttl must not be negative"),
        ({"paused": "yes"}, "InvalidSpec", 'spec.paused: "yes" is not allowed; use true or false'),
        ({"podRef": "web-0"}, "InvalidSpec", 'spec.podRef: "web-0" is not allowed; use an object'),
        ({"podRef": {}}, "InvalidPodRef", "spec.podRef.name is required"),
        ({"podRef": {"name": "web-0"}}, "InvalidPodRef", "spec.podRef.namespace is required"),
        ({"podRef": {**POD, "kind": "Deployment"}}, "InvalidPodRef", "spec.podRef.kind must be Pod"),
        ({"podRef": {**POD, "name": 7}}, "InvalidSpec", "spec.podRef.name: 7 is not allowed; use a string"),
        (
            {"deleteOptions": {"gracePeriodSeconds": -1}},
            "InvalidSpec",
            "spec.deleteOptions.gracePeriodSeconds: -1 is not allowed; use a whole number of seconds",
        ),
        (
            {"deleteOptions": {"propagationPolicy": "Eventually"}},
            "InvalidSpec",
            'spec.deleteOptions.propagationPolicy: "Eventually" is not allowed; use Orphan, Background or',
        ),
        ({"reservationOptions": {"template": []}}, "InvalidSpec", "spec.reservationOptions.template: [] is"),
        (
            {"reservationOptions": {"reservationRef": {"namespace": "x"}}},
            "InvalidReservation",
            "spec.reservationOptions.reservationRef.name is required",
        ),
    ],
)
def test_a_job_that_cannot_run_says_which_field_and_what_is_allowed(
    spec: dict[str, Any], reason: str, message: str
) -> None:
    job, invalid = read_pmj(raw(**spec))
    assert invalid is not None and invalid.reason == reason
    assert invalid.message.startswith(message), invalid.message
    assert "`" not in invalid.message and "regex" not in invalid.message and "Expected" not in invalid.message
    assert (job.metadata.name, job.metadata.uid, job.phase) == ("j", "j-uid", "Pending")  # what it can read


@pytest.mark.parametrize("spec", [{}, {"ttl": "0s"}, {"ttl": "0"}, {"mode": "EvictDirectly", "ttl": "1h30m"}])
def test_a_job_that_can_run_reads_whole(spec: dict[str, Any]) -> None:
    job, invalid = read_pmj(raw(**spec))
    assert invalid is None and job.spec.pod_ref is not None and job.spec.pod_ref.name == "web-0"


def test_a_ttl_of_zero_is_none_at_all_as_koordinator_reads_it() -> None:
    assert PodMigrationJobSpec(ttl="0s").ttl_seconds("5m") == math.inf
    assert PodMigrationJobSpec(ttl="90s").ttl_seconds("5m") == 90
    assert PodMigrationJobSpec().ttl_seconds("5m") == 300


def test_a_job_that_cannot_run_ends_failed_once() -> None:
    job, invalid = read_pmj(raw(mode="Teleport"))
    assert invalid is not None
    step = end_invalid(job, invalid)
    assert (step.status.phase, step.status.reason, step.status.message) == (
        "Failed",
        "InvalidSpec",
        invalid.message,
    )
    assert step.actions == (RELEASE,) and [e[0] for e in step.events] == ["Warning"]
    ended = job.__class__(metadata=job.metadata, spec=job.spec, status=step.status)
    again = end_invalid(ended, Invalid("InvalidSpec", "another message"))
    assert again.status == step.status and again.actions == ()  # ended is ended: nothing more is written
