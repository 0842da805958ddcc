"""A job that waits for admission says why in its status, in its author's terms: the limit holding it and
its numbers (a PodDisruptionBudget by name, an object limiter by its rate), written once per change of the
wait, and shown by `podherd jobs -o wide`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kubesim.sim import SimHandle
from podherd import cli
from podherd.harness.servers import Server
from tests.e2e.pipeline import create_job, ended, pipeline, pipeline_config, until_job
from tests.e2e.test_lifecycle import cluster, loosen_budget, start, tight_budget, web_pods

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


def saying(words: str) -> Callable[[dict[str, Any]], bool]:
    return lambda job: words in ((job.get("status") or {}).get("message") or "")


async def test_a_waiting_job_names_the_budget_then_the_limiter_holding_it(
    kubesim_factory: Callable[..., SimHandle],
    nats_srv: Server,
    redis_srv: Server,
    test_id: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    kube = start(kubesim_factory, cluster())
    tight_budget(kube, 3)  # three replicas, all must stay: 0 disruptions allowed
    first, second, _ = sorted(web_pods(kube))
    # One migration of the workload per 10 minutes: the second job waits for the limiter's next token.
    limiter = {"workload": {"duration": "10m", "maxMigrating": 1}}
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id, objectLimiters=limiter)
    async with pipeline(config):
        create_job(kube, "held", first)
        job = await until_job(kube, "held", saying("PodDisruptionBudget default/web"))
        assert job["status"]["phase"] == "Pending"
        assert job["status"]["message"].startswith(
            "waiting for admission: PodDisruptionBudget 0/0 on PodDisruptionBudget default/web"
        ), job["status"]
        assert first in web_pods(kube)

        loosen_budget(kube, 2)
        job = await until_job(kube, "held", ended)
        assert job["status"]["phase"] == "Succeeded", job["status"]

        create_job(kube, "limited", second)
        words = (
            "waiting for admission: objectLimiters.workload: no migration left for workload"
            " Deployment/default/web"
            " for now (refills 1 every 10m0s, burst 1)"
        )
        job = await until_job(kube, "limited", saying(words))
        assert job["status"]["phase"] == "Pending" and second in web_pods(kube)

    assert cli.main(["jobs", "--kubeconfig", str(kube.handle.kubeconfig), "-o", "wide"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("limited"))
    assert words in row


async def test_a_young_pod_waits_for_min_pod_age_and_one_that_asks_to_stay_is_not_moved(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    kube = start(kubesim_factory, cluster())
    young, staying, _ = sorted(web_pods(kube))
    # Annotated before the services start: the watcher's first listing already carries it.
    kube.core.patch_namespaced_pod(
        staying, "default", {"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}
    )
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id, minPodAge="1h")
    async with pipeline(config):
        create_job(kube, "too-soon", young)
        create_job(kube, "asked-not-to", staying)
        waiting = await until_job(
            kube, "too-soon", saying("waiting for the pod to be 1h old (minPodAge; started")
        )
        refused = await until_job(kube, "asked-not-to", ended)
    assert waiting["status"]["phase"] == "Pending" and young in web_pods(kube)
    assert (refused["status"]["phase"], refused["status"]["reason"]) == ("Failed", "ForbiddenMigratePod")
    assert refused["status"]["message"].startswith(
        "podherd.io/DoNotDisrupt: the pod is annotated karpenter.sh/do-not-disrupt=true"
    ), refused["status"]
    assert staying in web_pods(kube)
