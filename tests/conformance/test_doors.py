"""Who may move what, asked of the engine itself: an intent is carried out only for a requester its
TokenReview proves and its SubjectAccessReview allows; on the real engine that is kube-apiserver's own
authenticator and RBAC authorizer, not Podherd's reading of them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import nats
import pytest

from podherd.harness.servers import Server
from shared.api.messages import MigrationIntent, PodKey
from shared.nats import bus
from tests.conformance.conftest import Scoped
from tests.conformance.engines import cluster
from tests.conformance.watched import watched
from tests.e2e.pipeline import GROUP, VERSION, ended, pipeline_config, until_job
from tests.e2e.test_pipeline import until_answered
from tests.kube import EVICT, bearer, requester

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

Start = Callable[[dict[str, Any]], Scoped]


async def test_an_intent_moves_a_pod_only_for_a_requester_the_cluster_proves_and_allows(
    engine_cluster: Start, nats_srv: Server, redis_srv: Server, test_id: str
) -> None:
    c = engine_cluster(cluster())
    name = sorted(p.metadata.name for p in c.kube.core.list_namespaced_pod(c.namespace).items)[0]
    allowed = requester(c.kube, "mover", [EVICT], namespace=c.namespace, granted_in=c.namespace)
    idle = requester(c.kube, "idle", [], namespace=c.namespace, granted_in=c.namespace)
    config = pipeline_config(c.kube.handle, nats_srv, redis_srv, test_id)
    subjects = bus.Subjects(test_id)
    nc = await nats.connect(nats_srv.url)

    def intent(key: str) -> MigrationIntent:
        return MigrationIntent(
            idempotency_key=f"{test_id}-{key}", pod=PodKey(namespace=c.namespace, name=name), requester="x"
        )

    async with watched(config):
        forged = await until_answered(nc, subjects, intent("forged"), bearer("not-a-token"))
        refused = await until_answered(nc, subjects, intent("idle"), bearer(idle))
        granted = await until_answered(nc, subjects, intent("mover"), bearer(allowed))
        assert granted.ok and granted.job is not None, granted
        job = await until_job(c.kube, granted.job, ended, within=60)
    await nc.close()
    assert forged.error is not None and forged.error.code in ("Unauthorized", "Forbidden"), forged
    assert refused.error is not None and refused.error.code == "Forbidden", refused
    assert f"may not create pods/eviction {name} in namespace {c.namespace}" in refused.error.message
    assert job["status"]["phase"] == "Succeeded", job["status"]
    who = f"system:serviceaccount:{c.namespace}:mover"
    assert job["metadata"]["annotations"]["podherd.io/requester"] == who
    jobs = c.kube.custom.list_cluster_custom_object(GROUP, VERSION, "podmigrationjobs")["items"]
    assert [j["metadata"]["name"] for j in jobs if j["spec"]["podRef"]["namespace"] == c.namespace] == [
        granted.job
    ]
