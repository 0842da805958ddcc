"""The model of Koordinator's controller: requeues every 3 s, one worker, arbitration every 500 ms."""

from __future__ import annotations

from bench.koordinator_model import ClusterTimes, replay


def test_a_job_waits_a_requeue_for_each_thing_the_cluster_does() -> None:
    quick = ClusterTimes(created=0.1, reserve=0.2, evict=0.3, replace=0.4)
    result = replay([quick], requeue=3.0, arbitration=0.5, reconcile=0.01)
    # Admitted at the next pass (0.6); Reservation at 0.61; seen Available at 3.62 (evicts), the pod seen
    # gone at 6.63, the replacement seen Ready at 9.64: Succeeded 9.54 s after creation.
    assert result["latency_s_p50"] == 9.54 and result["makespan_seconds"] == 9.54


def test_one_worker_makes_simultaneous_jobs_wait_their_turn() -> None:
    jobs = [ClusterTimes(created=0.0, reserve=0.0, evict=0.0, replace=0.0) for _ in range(100)]
    alone = replay(jobs[:1], reconcile=0.02)
    crowd = replay(jobs, reconcile=0.02)
    # The last of 100 jobs created together waits for the other 99 reconciles at every step (the requeue
    # hides the rest): it ends 99 x 20 ms after a job alone would.
    assert crowd["makespan_seconds"] >= alone["makespan_seconds"] + 99 * 0.02 - 0.01
    assert crowd["latency_s_p99"] > alone["latency_s_p99"]
