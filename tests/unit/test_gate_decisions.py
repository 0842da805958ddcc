"""The gate's decisions (pure): what an eviction of a pod becomes, and which job writes it lets in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from services.gate.evacuation import (
    IN_PROGRESS,
    OPT_IN,
    Allow,
    PodView,
    Start,
    Wait,
    decide,
    job_name,
    made_for,
    opted_in,
    pod_key,
)
from services.gate.job_checks import job_refusal, pod_changed
from services.gate.reviews import Refusal, Request, UserInfo, answer, read_review
from shared.api.names import LABEL_EVACUATED_POD
from shared.api.pmj import PodMigrationJob
from shared.config.model import InterceptorConfig

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
POD = PodView(namespace="shop", name="web", uid="u1", labels={OPT_IN: "true"})
RETRY = InterceptorConfig(on_failure="retry", retry_after="1m")
EVICT = InterceptorConfig(on_failure="evict")


def job(
    phase: str | None, *, ended: datetime | None = None, reason: str = "", message: str = ""
) -> PodMigrationJob:
    status: dict[str, Any] = {"phase": phase, "reason": reason or None, "message": message or None}
    if ended is not None:
        status["conditions"] = [
            {
                "type": "Eviction",
                "status": "False",
                "lastTransitionTime": ended.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        ]
    raw = {"metadata": {"name": "evacuation-u1"}, "spec": {}, "status": status if phase else None}
    return msgspec.convert(raw, PodMigrationJob, str_keys=True, strict=False)


@pytest.mark.parametrize(
    ("labels", "namespace_opted", "expected"),
    [
        ({}, False, False),
        ({OPT_IN: "true"}, False, True),
        ({OPT_IN: "yes"}, False, False),
        ({}, True, True),
        ({OPT_IN: "false"}, True, False),
    ],
)
def test_a_pod_is_opted_in_by_its_label_or_its_namespace_unless_it_opts_out(
    labels: dict[str, str], namespace_opted: bool, expected: bool
) -> None:
    assert opted_in(PodView(namespace="n", name="p", uid="u", labels=labels), namespace_opted) is expected


def test_an_eviction_starts_a_job_once_and_is_then_told_how_it_stands() -> None:
    assert decide(POD, None, policy=RETRY, now=NOW) == Start()
    waiting = decide(
        POD, job("Pending", reason="Pending", message="waiting for admission"), policy=RETRY, now=NOW
    )
    assert waiting == Wait(
        f"{IN_PROGRESS}: PodMigrationJob evacuation-u1 is Pending (Pending: waiting for admission)"
    )
    assert isinstance(decide(POD, job(None), policy=RETRY, now=NOW), Wait)  # new: no status yet
    assert decide(POD, job("Succeeded"), policy=RETRY, now=NOW) == Allow()
    assert decide(None, None, policy=RETRY, now=NOW) == Allow()  # gone
    terminating = msgspec.structs.replace(POD, terminating=True)
    assert decide(terminating, None, policy=RETRY, now=NOW) == Allow()


def test_a_failed_job_is_retried_after_its_backoff_or_lets_the_eviction_through() -> None:
    failed = job("Failed", ended=NOW - timedelta(seconds=20), reason="Unschedulable", message="no node fits")
    refused = decide(POD, failed, policy=RETRY, now=NOW)
    assert isinstance(refused, Wait)
    assert refused.message == (
        "Evacuation failed: PodMigrationJob evacuation-u1 failed (Unschedulable: no node fits); an eviction "
        "from 2026-11-27T12:00:40Z on starts a new one (onFailure: retry)"
    )
    assert decide(POD, failed, policy=RETRY, now=NOW + timedelta(seconds=40)) == Start(replace=True)
    let_through = decide(POD, failed, policy=EVICT, now=NOW)
    assert isinstance(let_through, Allow) and "Unschedulable: no node fits" in let_through.warning
    aborted = job("Aborted", ended=NOW - timedelta(seconds=90), reason="Aborted", message="aborted: by hand")
    assert decide(POD, aborted, policy=RETRY, now=NOW) == Start(replace=True)  # ended: not in progress
    refused_again = decide(POD, job("Aborted", ended=NOW, reason="Aborted"), policy=RETRY, now=NOW)
    assert isinstance(refused_again, Wait) and "evacuation-u1 aborted" in refused_again.message


def request(
    operation: str, spec: dict[str, Any], old: dict[str, Any] | None = None, user: str = "alice"
) -> Request:
    return Request(
        uid="r1",
        operation=operation,
        name="j",
        user_info=UserInfo(username=user),
        object={"metadata": {"name": "j"}, "spec": spec},
        old_object=None if old is None else {"metadata": {"name": "j"}, "spec": old},
    )


REF = {"podRef": {"namespace": "x", "name": "app"}}


def test_a_job_write_is_refused_when_no_job_could_run_or_its_pod_would_change() -> None:
    assert job_refusal(request("CREATE", REF)) is None
    assert job_refusal(request("UPDATE", REF, old=REF)) is None  # the spec unchanged: judged by its effects
    moved = job_refusal(request("UPDATE", {"podRef": {"namespace": "y", "name": "app"}}, old=REF))
    assert moved == Refusal(422, "spec.podRef cannot change after the job is made: it names x/app")
    bad = job_refusal(request("CREATE", {**REF, "mode": "Teleport"}))
    assert isinstance(bad, Refusal) and bad.code == 422 and "spec.mode" in bad.message
    assert job_refusal(request("UPDATE", {**REF, "paused": True}, old=REF)) is None


def test_a_pod_ref_given_its_uid_is_the_same_pod_and_any_other_change_is_another() -> None:
    ref = {"namespace": "x", "name": "app"}
    assert pod_changed(ref, {**ref, "uid": "u"}) is None
    assert pod_changed({**ref, "uid": "u"}, {**ref, "uid": "v"}) is not None
    assert pod_changed(ref, {"namespace": "x", "name": "other"}) is not None


def test_a_review_is_read_strictly_and_answered_in_its_envelope() -> None:
    body = msgspec.json.encode(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u"}}
    )
    assert read_review(body).uid == "u"
    for wrong in (b"{", b'{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}'):
        with pytest.raises(ValueError, match="AdmissionReview"):
            read_review(wrong)
    denied = msgspec.json.decode(answer("u", Refusal(429, "later"), ("look",)))
    assert denied["response"] == {
        "uid": "u",
        "allowed": False,
        "status": {"status": "Failure", "code": 429, "reason": "TooManyRequests", "message": "later"},
        "warnings": ["look"],
    }


def test_a_job_found_under_the_gates_name_is_its_job_only_if_it_names_the_pod_and_carries_its_mark() -> None:
    def found(namespace: str, name: str, uid: str, marked: bool) -> PodMigrationJob:
        labels = {LABEL_EVACUATED_POD: pod_key(namespace, name)} if marked else {}
        raw = {
            "metadata": {"name": job_name(POD.uid), "labels": labels},
            "spec": {"podRef": {"kind": "Pod", "namespace": namespace, "name": name, "uid": uid}},
        }
        return msgspec.convert(raw, PodMigrationJob)

    assert made_for(found("shop", "web", "u1", True), POD)
    assert not made_for(found("shop", "web", "u1", False), POD)  # someone else's, under the name
    assert not made_for(found("shop", "other", "u2", True), POD)  # another pod's
    assert not made_for(found("shop", "web", "u0", True), POD)  # the pod before it, of the same name
