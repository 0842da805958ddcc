"""`batch/v1` Jobs and CronJobs as a real cluster runs them: the selector the API server generates, the
defaults, the refusals, and the controllers (pods made and counted, an evicted pod counted failed and
replaced, the backoff limit, a CronJob's Job at its scheduled time)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime
from typing import Any

import kubernetes
import pytest

from kubesim.sim import SimHandle
from tests.kube import Kube, client_for, refusal, watch_until
from tests.kubesim.test_api import error_of

pytestmark = pytest.mark.integration

UID_LABEL = "batch.kubernetes.io/controller-uid"


def job_body(name: str, restart: str | None = "Never", **spec: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox"}]}
    if restart:
        pod["restartPolicy"] = restart
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"template": {"metadata": {"labels": {"app": name}}, "spec": pod}, **spec},
    }


@pytest.fixture
def cluster(kubesim_factory: Callable[..., SimHandle]) -> Kube:
    """Two nodes, and a Job controller that replaces a failed pod after 0.2 s (not 10 s)."""
    return client_for(kubesim_factory("generate:2:0", job_backoff=0.2))


def batch_api(kube: Kube) -> Any:
    return kubernetes.client.BatchV1Api(kube.api)


def job_pods(kube: Kube, job: Any, predicate: Callable[[dict[str, Any]], object] = bool) -> dict[str, Any]:
    """The Job's pods (by the selector the API server generated), once `predicate` holds of them."""
    selector = f"{UID_LABEL}={job.metadata.uid}"
    return watch_until(kube.core.list_namespaced_pod, predicate, namespace="default", label_selector=selector)


def job_state(kube: Kube, name: str, predicate: Callable[[Any], object]) -> Any:
    return watch_until(
        batch_api(kube).list_namespaced_job, lambda s: predicate(s[f"default/{name}"]), namespace="default"
    )[f"default/{name}"]


def conditions_once(kube: Kube, name: str, kind: str) -> dict[str, tuple[str, str]]:
    """The Job's conditions (type: status, reason) once it has one of type `kind`."""
    job = job_state(kube, name, lambda j: any(c.type == kind for c in j.status.conditions or []))
    return {c.type: (c.status, c.reason) for c in job.status.conditions}


def failed_at_least(count: int) -> Callable[[Any], bool]:
    return lambda job: (job.status.failed or 0) >= count


def test_a_job_gets_its_selector_and_defaults_and_completes_when_its_pod_succeeds(cluster: Kube) -> None:
    made = batch_api(cluster).create_namespaced_job("default", job_body("once"))
    spec = made.spec
    assert spec.selector.match_labels == {UID_LABEL: made.metadata.uid}
    assert spec.template.metadata.labels == {
        "app": "once",
        UID_LABEL: made.metadata.uid,
        "batch.kubernetes.io/job-name": "once",
        "controller-uid": made.metadata.uid,
        "job-name": "once",
    }
    assert (spec.completions, spec.parallelism, spec.backoff_limit) == (1, 1, 6)
    assert (spec.completion_mode, spec.suspend, spec.pod_replacement_policy) == (
        "NonIndexed",
        False,
        "TerminatingOrFailed",
    )
    assert made.metadata.labels == {"app": "once"}  # the template's, as the Job had none
    (pod,) = job_pods(cluster, made).values()
    owner = pod.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.controller, owner.block_owner_deletion) == (
        "Job",
        "once",
        True,
        True,
    )
    assert pod.metadata.finalizers == ["batch.kubernetes.io/job-tracking"]
    assert pod.metadata.generate_name == "once-"
    cluster.core.patch_namespaced_pod_status(pod.metadata.name, "default", {"status": {"phase": "Succeeded"}})
    done = job_state(cluster, "once", lambda j: j.status.completion_time)
    assert done.status.succeeded == 1 and not done.status.active
    conditions = {c.type: (c.status, c.reason) for c in done.status.conditions}
    assert conditions == {
        "SuccessCriteriaMet": ("True", "CompletionsReached"),
        "Complete": ("True", "CompletionsReached"),
    }
    # Counted, the pod is let go.
    watch_until(
        cluster.core.list_namespaced_pod,
        lambda s: not s[f"default/{pod.metadata.name}"].metadata.finalizers,
        namespace="default",
    )


def test_an_evicted_job_pod_counts_as_failed_and_is_replaced_until_the_backoff_limit(cluster: Kube) -> None:
    made = batch_api(cluster).create_namespaced_job("default", job_body("retry", backoffLimit=1))
    for failures in (1, 2):
        (pod,) = [p for p in job_pods(cluster, made).values() if p.metadata.deletion_timestamp is None]
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod.metadata.name}}
        cluster.core.create_namespaced_pod_eviction(pod.metadata.name, "default", eviction)
        job = job_state(cluster, "retry", failed_at_least(failures))
        assert job.status.failed == failures
        if failures == 1:  # a replacement after the backoff
            job_pods(cluster, made, lambda s: any(p.metadata.deletion_timestamp is None for p in s.values()))
    conditions = conditions_once(cluster, "retry", "Failed")
    assert conditions == {
        "FailureTarget": ("True", "BackoffLimitExceeded"),
        "Failed": ("True", "BackoffLimitExceeded"),
    }
    # No pod is left running, and none is held by the Job's finalizer.
    job_pods(cluster, made, lambda s: not s)


def test_deleting_a_job_deletes_its_pods_and_lets_them_go(cluster: Kube) -> None:
    made = batch_api(cluster).create_namespaced_job("default", job_body("gone", parallelism=2, completions=4))
    job_pods(cluster, made, lambda s: len(s) == 2)
    batch_api(cluster).delete_namespaced_job("gone", "default", propagation_policy="Background")
    job_pods(cluster, made, lambda s: not s)


def test_a_suspended_job_removes_its_pods_and_makes_them_again_when_resumed(cluster: Kube) -> None:
    batch = batch_api(cluster)
    made = batch.create_namespaced_job("default", job_body("paused", parallelism=2, completions=2))
    job_pods(cluster, made, lambda s: len(s) == 2)
    batch.patch_namespaced_job("paused", "default", {"spec": {"suspend": True}})
    job_pods(cluster, made, lambda s: not s)
    suspended = job_state(
        cluster, "paused", lambda j: any(c.type == "Suspended" for c in j.status.conditions or [])
    )
    assert not suspended.status.active and suspended.status.start_time is None
    batch.patch_namespaced_job("paused", "default", {"spec": {"suspend": False}})
    job_pods(cluster, made, lambda s: len(s) == 2)
    resumed = job_state(cluster, "paused", lambda j: j.status.active == 2)
    conditions = {c.type: (c.status, c.reason) for c in resumed.status.conditions}
    assert conditions == {"Suspended": ("False", "JobResumed")}


def test_jobs_and_cronjobs_refused_as_the_api_server_words_it(cluster: Kube) -> None:
    batch = batch_api(cluster)
    refused = refusal(
        error_of(lambda: batch.create_namespaced_job("default", job_body("always", restart=None)))
    )
    assert refused["message"] == (
        'Job.batch "always" is invalid: spec.template.spec.restartPolicy: Unsupported value: "Always": '
        'supported values: "OnFailure", "Never"'
    )
    template = {"spec": job_body("x")["spec"]}
    cronjob = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"}}
    for schedule, why in (
        ("* * *", "expected exactly 5 fields, found 3: * * *"),
        ("TZ=UTC * * * * *", "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"),
    ):
        body = {**cronjob, "spec": {"schedule": schedule, "jobTemplate": template}}
        refused = refusal(error_of(functools.partial(batch.create_namespaced_cron_job, "default", body)))
        assert (
            refused["message"]
            == f'CronJob.batch "c" is invalid: spec.schedule: Invalid value: "{schedule}": {why}'
        )


def test_a_cronjob_makes_its_job_at_the_scheduled_time(cluster: Kube) -> None:
    batch = batch_api(cluster)
    template = {"metadata": {"labels": {"made-by": "cron"}}, "spec": job_body("x")["spec"]}
    body = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "tick"},
        "spec": {"schedule": "@every 1s", "jobTemplate": template, "concurrencyPolicy": "Forbid"},
    }
    made = batch.create_namespaced_cron_job("default", body)
    assert (
        made.spec.suspend,
        made.spec.successful_jobs_history_limit,
        made.spec.failed_jobs_history_limit,
    ) == (
        False,
        3,
        1,
    )
    jobs = watch_until(batch.list_namespaced_job, lambda s: s, namespace="default")
    (job,) = jobs.values()
    scheduled = job.metadata.annotations["batch.kubernetes.io/cronjob-scheduled-timestamp"]
    assert job.metadata.name == f"tick-{_minute(scheduled)}"
    assert job.metadata.labels == {"made-by": "cron"}
    assert job.metadata.owner_references[0].kind == "CronJob"
    cron = watch_until(
        batch.list_namespaced_cron_job, lambda s: s["default/tick"].status.active, namespace="default"
    )["default/tick"]
    assert [a.name for a in cron.status.active] == [job.metadata.name]
    assert cron.status.last_schedule_time is not None


def _minute(stamp: str) -> int:
    return int(datetime.fromisoformat(stamp).timestamp()) // 60


def test_an_indexed_job_gives_each_pod_its_index_and_records_the_completed_ones(cluster: Kube) -> None:
    batch = batch_api(cluster)
    body = job_body(
        "indexed", completions=2, parallelism=2, completionMode="Indexed", ttlSecondsAfterFinished=0
    )
    made = batch.create_namespaced_job("default", body)
    made_pods = job_pods(cluster, made, lambda s: len(s) == 2)
    pods = {p.metadata.annotations["batch.kubernetes.io/job-completion-index"]: p for p in made_pods.values()}
    assert sorted(pods) == ["0", "1"]
    assert pods["1"].spec.hostname == "indexed-1" and pods["1"].metadata.generate_name == "indexed-1-"
    env = pods["1"].spec.containers[0].env[0]
    assert env.name == "JOB_COMPLETION_INDEX"
    assert (
        env.value_from.field_ref.field_path == "metadata.labels['batch.kubernetes.io/job-completion-index']"
    )
    for pod in pods.values():
        cluster.core.patch_namespaced_pod_status(
            pod.metadata.name, "default", {"status": {"phase": "Succeeded"}}
        )
    # Complete with both indexes, then deleted at once by its ttlSecondsAfterFinished of 0.
    watch_until(batch.list_namespaced_job, lambda s: "default/indexed" not in s, namespace="default")


def test_a_job_past_its_active_deadline_fails_and_removes_its_pods(cluster: Kube) -> None:
    made = batch_api(cluster).create_namespaced_job("default", job_body("late", activeDeadlineSeconds=1))
    conditions = conditions_once(cluster, "late", "Failed")
    assert conditions == {
        "FailureTarget": ("True", "DeadlineExceeded"),
        "Failed": ("True", "DeadlineExceeded"),
    }
    job_pods(cluster, made, lambda s: not s)


def cronjob(name: str, **spec: Any) -> dict[str, Any]:
    template = {"metadata": {"labels": {"made-by": name}}, "spec": job_body("x")["spec"]}
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {"schedule": "@every 1s", "jobTemplate": template, **spec},
    }


def cron_jobs(kube: Kube, name: str, predicate: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    return watch_until(
        batch_api(kube).list_namespaced_job, predicate, namespace="default", label_selector=f"made-by={name}"
    )


def test_a_cronjob_replaces_its_running_job_and_keeps_no_more_finished_ones_than_its_limit(
    cluster: Kube,
) -> None:
    batch = batch_api(cluster)
    batch.create_namespaced_cron_job("default", cronjob("swap", concurrencyPolicy="Replace"))
    (first,) = cron_jobs(cluster, "swap", bool).values()
    replaced = cron_jobs(
        cluster, "swap", lambda s: s and all(j.metadata.uid != first.metadata.uid for j in s.values())
    )
    assert len(replaced) == 1  # the running one deleted before the next was made
    batch.patch_namespaced_cron_job("swap", "default", {"spec": {"suspend": True}})

    batch.create_namespaced_cron_job(
        "default", cronjob("kept", successfulJobsHistoryLimit=0, concurrencyPolicy="Forbid")
    )
    (job,) = cron_jobs(cluster, "kept", bool).values()
    batch.patch_namespaced_cron_job("kept", "default", {"spec": {"suspend": True}})
    (pod,) = job_pods(cluster, job).values()
    cluster.core.patch_namespaced_pod_status(pod.metadata.name, "default", {"status": {"phase": "Succeeded"}})
    cron_jobs(cluster, "kept", lambda s: f"default/{job.metadata.name}" not in s)  # complete, and trimmed


def test_a_cronjob_past_its_starting_deadline_makes_no_job_and_says_so(cluster: Kube) -> None:
    batch_api(cluster).create_namespaced_cron_job("default", cronjob("late", startingDeadlineSeconds=0))
    events = watch_until(
        cluster.core.list_namespaced_event,
        lambda s: any(e.reason == "MissSchedule" for e in s.values()),
        namespace="default",
    )
    missed = next(e for e in events.values() if e.reason == "MissSchedule")
    assert (missed.type, missed.involved_object.kind) == ("Warning", "CronJob")
    assert missed.message.startswith("Missed scheduled time to start a job: ")
    assert batch_api(cluster).list_namespaced_job("default", label_selector="made-by=late").items == []
