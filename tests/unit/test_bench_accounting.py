"""The end-to-end benchmark's accounting: CPU and API requests per job, and the profile's split by service."""

from __future__ import annotations

from bench.e2e_bench import cpu_per_job, requests_per_job
from bench.profile_summary import summarize

TRACKER = "system:serviceaccount:podherd:podherd-tracker"
EXECUTOR = "system:serviceaccount:podherd:podherd-executor"


def test_cpu_per_job_counts_what_each_service_spent_while_the_jobs_ran() -> None:
    start = {"tracker-0": {"cpu_seconds": 1.5}, "tracker-1": {"cpu_seconds": 1.0}}
    end = {
        "tracker-0": {"cpu_seconds": 3.5},
        "tracker-1": {"cpu_seconds": 2.0},
        "executor-0": {"cpu_seconds": 0.5},  # no reading at the start: all of it counts
    }
    assert cpu_per_job(start, end, 100) == {"total": 35.0, "executor": 5.0, "tracker": 30.0}


def test_requests_per_job_by_service_verb_and_resource() -> None:
    before = {(TRACKER, "get", "pods"): 10}
    after = {
        (TRACKER, "get", "pods"): 50,
        (TRACKER, "create", "events"): 20,
        (EXECUTOR, "create", "pods/eviction"): 10,
        ("kubernetes-admin", "list", "pods"): 99,  # not a service
        (EXECUTOR, "get", "pods"): 0,
    }
    assert requests_per_job(before, after, 10) == {
        "executor": {"total": 1.0, "create pods/eviction": 1.0},
        "tracker": {"total": 6.0, "get pods": 4.0, "create events": 2.0},
    }


def test_profile_samples_go_to_the_service_whose_process_took_them() -> None:
    tracker = 'process 2:"python -m podherd run tracker --config c.yaml"'
    lines = [
        f'process 1:"";{tracker};main (podherd/cli.py:1);reconcile (services/tracker/service.py:9) 30',
        f'process 1:"";{tracker};main (podherd/cli.py:1);read (ssl.py:1) 10',
        'process 1:"";run (kubesim/sim.py:1);list_page (kubesim/apiserver/listing.py:4) 60',
    ]
    summary = summarize(lines, top=5)
    assert summary["kubesim"]["share_of_all_samples_pct"] == 60.0
    assert summary["tracker"]["self_pct"] == {
        "reconcile (services/tracker/service.py:9)": 75.0,
        "read (ssl.py:1)": 25.0,
    }
    assert summary["tracker"]["inclusive_pct"]["main (podherd/cli.py:1)"] == 100.0
