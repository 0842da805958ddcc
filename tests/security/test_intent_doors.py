"""Who may move what, door by door: an intent or a drain is carried out only for a requester the cluster
proves (TokenReview) and whose own RBAC allows it (SubjectAccessReview), or, on the stream and in `subject`
mode, only within the namespace its subject is for. Every refusal creates nothing (no job, no cordon) and
is audited with the identity that was verified.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubesim.sim import SimHandle
from podherd.harness.servers import Server
from services.tracker.intake.drains import Drains
from services.tracker.intake.intents import IntentIntake
from services.tracker.intake.requesters import Forbidden, Requesters
from services.watcher.service import Watcher
from shared.api import codec
from shared.api.drain import DrainOptions
from shared.api.messages import DrainIntent, DrainReply, IntentReply, MigrationIntent, PodKey
from shared.api.names import ANNOTATION_NODE_DRAIN
from shared.config.loader import config_from_dict
from shared.config.model import (
    IntentsConfig,
    KubernetesConfig,
    MigrationControllerArgs,
    NatsConfig,
    RateLimit,
)
from shared.kube.client import KubeClient
from shared.nats import bus
from shared.nats.publisher import Publisher
from tests.conftest import NatsScope
from tests.integration.test_intake import next_message
from tests.kube import DRAIN, EVICT, Kube, bearer, client_for, requester, token_for, with_crds

pytestmark = pytest.mark.integration
GROUP, VERSION, PLURAL = "scheduling.koordinator.sh", "v1alpha1", "podmigrationjobs"
USER = "system:serviceaccount:tools:defrag"


@dataclass
class Door:
    """A tracker intake under test, its subjects, and a clock the test may move."""

    subjects: bus.Subjects
    nats_scope: NatsScope
    now: list[float]

    async def ask(self, intent: MigrationIntent | DrainIntent, token: str | None = None, **kw: Any) -> Any:
        subject = kw.pop("subject", self.subjects.intent_request)
        headers = bearer(token) if token else None
        msg = await self.nats_scope.nc.request(subject, codec.encode(intent), timeout=10, headers=headers)
        return codec.decode(msg.data, DrainReply if isinstance(intent, DrainIntent) else IntentReply)

    async def audit(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first record on the audit stream that `predicate` holds for."""
        return await next_message(self.nats_scope, self.subjects.all_audit, predicate)


@contextlib.asynccontextmanager
async def door(kube: Kube, nats_srv: Server, nats_scope: NatsScope, **options: Any) -> AsyncIterator[Door]:
    subjects = bus.Subjects(nats_scope.prefix)
    client = KubeClient.from_config(KubernetesConfig(kubeconfig=str(kube.handle.kubeconfig)))
    publisher = Publisher(nats_scope.nc)
    now = [0.0]
    sim = kube.handle.sim
    assert sim is not None
    clock = sim.api.auth.clock

    def shifted() -> float:
        return float(clock()) + now[0]

    sim.api.auth.clock = shifted  # the API server's and the tracker's clocks move together
    requesters = Requesters(client, IntentsConfig(**options), subjects, clock=shifted)
    args = NatsConfig(url=nats_srv.url, subject_prefix=nats_scope.prefix)
    drains = Drains(client, publisher, subjects, args=MigrationControllerArgs(), replica="t0")
    intake = IntentIntake(client, publisher, subjects, replica="t0", requesters=requesters, drains=drains)
    stop = asyncio.Event()
    task = asyncio.create_task(intake.serve(nats_scope.nc, args, stop))
    async with asyncio.timeout(30):
        await intake.answering.wait()
    try:
        yield Door(subjects, nats_scope, now)
    finally:
        stop.set()
        await task
        await client.aclose()


@pytest.fixture
def cluster(kubesim_factory: Callable[..., SimHandle]) -> Kube:
    """Two teams' namespaces, a pod in each on node-1, nothing moving by itself."""
    kube = with_crds(client_for(kubesim_factory("small", workloads=False, scheduler=False)))
    for team in ("team-x", "team-y"):
        kube.core.create_namespace({"metadata": {"name": team}})
        pod = {
            "metadata": {"name": "app"},
            "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "i"}]},
        }
        kube.core.create_namespaced_pod(team, pod)
    return kube


def move(namespace: str, key: str, **extra: Any) -> MigrationIntent:
    return MigrationIntent(
        idempotency_key=key, pod=PodKey(namespace=namespace, name="app"), requester="claimed-name", **extra
    )


def jobs(kube: Kube) -> list[dict[str, Any]]:
    return list(kube.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"])


def cordoned(kube: Kube, node: str = "node-1") -> bool:
    found = kube.core.read_node(node)
    return bool(found.spec.unschedulable) or ANNOTATION_NODE_DRAIN in (found.metadata.annotations or {})


async def refused(reply: Any, d: Door, kube: Kube, words: str, requester_name: str) -> None:
    """Refused as Forbidden for `words`, nothing made, and audited as `requester_name`."""
    assert not reply.ok and reply.error is not None, reply
    assert reply.error.code == "Forbidden" and words in reply.error.message, reply.error
    assert jobs(kube) == [] and not cordoned(kube)
    record = await d.audit(lambda r: r.get("reason") == "Forbidden" and words in r["message"])
    assert record["requester"] == requester_name


async def test_a_namespace_s_evicter_moves_its_pods_and_no_one_else_s(
    cluster: Kube, nats_srv: Server, nats_scope: NatsScope
) -> None:
    _ns(cluster, "tools")
    token = requester(cluster, "defrag", [EVICT], namespace="tools", granted_in="team-x")
    async with door(cluster, nats_srv, nats_scope) as d:
        other = await d.ask(move("team-y", "y"), token)
        await refused(other, d, cluster, "may not create pods/eviction app in namespace team-y", USER)
        mine = await d.ask(move("team-x", "x"), token)
        assert mine.ok and mine.created, mine
        placed = await d.ask(move("team-x", "x-placed", target_node="node-2"), token)
    assert (
        placed.error is not None
        and "may not create pods/binding app in namespace team-x" in placed.error.message
    )
    [job] = jobs(cluster)
    annotations = job["metadata"]["annotations"]
    # The job says who asked as the cluster proved it, and what the intent claimed beside it.
    assert annotations["podherd.io/requester"] == USER
    assert annotations["podherd.io/claimed-requester"] == "claimed-name"


def _ns(kube: Kube, name: str) -> None:
    kube.core.create_namespace({"metadata": {"name": name}})


async def test_no_token_a_foreign_audience_or_a_forged_one_is_refused(
    cluster: Kube, nats_srv: Server, nats_scope: NatsScope
) -> None:
    _ns(cluster, "tools")
    requester(cluster, "defrag", [EVICT], namespace="tools")
    for_the_api_server = token_for(
        cluster, "defrag", namespace="tools", audience="https://kubernetes.default.svc.cluster.local"
    )
    async with door(cluster, nats_srv, nats_scope) as d:
        await refused(await d.ask(move("team-x", "a")), d, cluster, "no token", "system:anonymous")
        reply = await d.ask(move("team-x", "b"), for_the_api_server)
        await refused(reply, d, cluster, "is invalid for the target audiences", "system:anonymous")
        forged = await d.ask(move("team-x", "c"), "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiJ9.")
        await refused(forged, d, cluster, "the token was refused", "system:anonymous")


async def test_a_token_of_another_cluster_is_refused(
    cluster: Kube, kubesim_factory: Callable[..., SimHandle], nats_srv: Server, nats_scope: NatsScope
) -> None:
    elsewhere = client_for(kubesim_factory())
    _ns(elsewhere, "tools")
    foreign = requester(elsewhere, "defrag", [EVICT], namespace="tools")
    _ns(cluster, "tools")
    requester(cluster, "defrag", [EVICT], namespace="tools")  # the same name here proves nothing
    async with door(cluster, nats_srv, nats_scope) as d:
        await refused(
            await d.ask(move("team-x", "a"), foreign), d, cluster, "the token was refused", "system:anonymous"
        )


async def test_an_expired_token_is_refused_even_after_a_review_was_cached(
    cluster: Kube, nats_srv: Server, nats_scope: NatsScope
) -> None:
    _ns(cluster, "tools")
    token = requester(cluster, "defrag", [EVICT], namespace="tools")
    async with door(cluster, nats_srv, nats_scope, token_cache_ttl="24h") as d:
        assert (await d.ask(move("team-x", "a"), token)).ok
        cluster.custom.delete_cluster_custom_object(
            GROUP, VERSION, PLURAL, jobs(cluster)[0]["metadata"]["name"]
        )
        d.now[0] = 3601  # the token (an hour) has expired while its review sat in the cache
        reply = await d.ask(move("team-y", "b"), token)
        await refused(reply, d, cluster, "service account token has expired", "system:anonymous")


async def test_the_stream_takes_a_namespace_s_intents_only_on_its_subject_and_never_a_token(
    cluster: Kube, nats_srv: Server, nats_scope: NatsScope
) -> None:
    async with door(cluster, nats_srv, nats_scope, authorization="subject") as d:
        # An intent for a pod in team-y sent on team-x's subject: what NATS let the sender publish on is
        # team-x, so team-y's pod is not theirs to move.
        await nats_scope.js.publish(d.subjects.intent("team-x"), codec.encode(move("team-y", "a")))
        record = await d.audit(lambda r: r.get("reason") == "Forbidden")
        assert "is for pods in namespace team-x, not in team-y" in record["message"]
        assert record["requester"] == f"nats:{d.subjects.intent('team-x')}"
        # A token on the stream would be kept there: refused, and the message erased.
        sent = await nats_scope.js.publish(
            d.subjects.intent("team-x"), codec.encode(move("team-x", "b")), headers=bearer("secret-token")
        )
        record = await d.audit(lambda r: r.get("reason") == "Forbidden" and "carried a token" in r["message"])
        with pytest.raises(Exception, match="no message found"):
            await nats_scope.js.get_msg(d.subjects.intents_stream, sent.seq)
        assert jobs(cluster) == []
        # Its own namespace's pod, on its own subject: a job.
        await nats_scope.js.publish(d.subjects.intent("team-x"), codec.encode(move("team-x", "c")))
        created = await d.audit(lambda r: r.get("details", {}).get("outcome") == "created")
    assert created["details"]["pod"] == "team-x/app"
    assert "secret-token" not in json.dumps(record) + json.dumps(created)


async def test_with_kubernetes_authorization_the_stream_proves_no_one_and_moves_nothing(
    cluster: Kube, nats_srv: Server, nats_scope: NatsScope
) -> None:
    """A publisher NATS lets on a namespace's stream subject, with no Kubernetes credentials at all: refused
    once, saying how to send it; nothing made."""
    async with door(cluster, nats_srv, nats_scope) as d:
        await nats_scope.js.publish(d.subjects.intent("team-x"), codec.encode(move("team-x", "a")))
        record = await d.audit(lambda r: r.get("reason") == "Forbidden")
    assert "proves no sender" in record["message"] and d.subjects.intent_request in record["message"]
    assert record["requester"] == "system:anonymous"
    assert jobs(cluster) == []


def drain_of(node: str = "node-1", **options: Any) -> DrainIntent:
    return DrainIntent(kind="Drain", node=node, requester="claimed-name", options=DrainOptions(**options))


async def test_a_drain_needs_the_node_and_every_namespace_it_moves_from(
    cluster: Kube, nats_srv: Server, nats_scope: NatsScope
) -> None:
    _ns(cluster, "tools")
    evicter = requester(cluster, "evicter", [EVICT], namespace="tools")
    half = requester(cluster, "half", [*DRAIN], namespace="tools")
    async with door(cluster, nats_srv, nats_scope) as d:
        reply = await d.ask(drain_of(), evicter)
        await refused(reply, d, cluster, "may not patch nodes node-1", "system:serviceaccount:tools:evicter")
        reply = await d.ask(drain_of(force=True, delete_emptydir_data=True, ignore_daemonsets=True), half)
        await refused(
            reply, d, cluster, "create pods/eviction in namespace team-x", "system:serviceaccount:tools:half"
        )


async def test_subject_mode_takes_migrations_on_namespace_subjects_and_drains_on_their_own(
    cluster: Kube, nats_srv: Server, nats_scope: NatsScope
) -> None:
    async with door(cluster, nats_srv, nats_scope, authorization="subject") as d:
        unscoped = await d.ask(move("team-x", "a"))
        assert unscoped.error is not None and unscoped.error.code == "Forbidden"
        assert f"{d.subjects.intent_request}.team-x" in unscoped.error.message
        foreign = await d.ask(move("team-y", "b"), subject=d.subjects.intent_request_in("team-x"))
        assert foreign.error is not None and "not in team-y" in foreign.error.message
        drain = await d.ask(drain_of(), subject=d.subjects.intent_request_in("team-x"))
        assert drain.error is not None and d.subjects.drain_request in drain.error.message
        assert jobs(cluster) == [] and not cordoned(cluster)
        mine = await d.ask(move("team-x", "c"), subject=d.subjects.intent_request_in("team-x"))
    assert mine.ok
    [job] = jobs(cluster)
    assert (
        job["metadata"]["annotations"]["podherd.io/requester"] == f"nats:{d.subjects.intent_request}.team-x"
    )


async def test_audit_enforcement_records_what_it_would_refuse_and_goes_ahead(
    cluster: Kube, nats_srv: Server, nats_scope: NatsScope
) -> None:
    async with door(cluster, nats_srv, nats_scope, enforcement="audit") as d:
        reply = await d.ask(move("team-x", "a"))
        record = await d.audit(lambda r: r.get("details", {}).get("outcome") == "created")
    assert reply.ok and len(jobs(cluster)) == 1
    assert "no token" in record["details"]["wouldRefuse"]


async def test_a_requester_sending_too_fast_is_told_to_slow_down(
    cluster: Kube, nats_srv: Server, nats_scope: NatsScope
) -> None:
    _ns(cluster, "tools")
    token = requester(cluster, "defrag", [EVICT], namespace="tools")
    async with door(cluster, nats_srv, nats_scope, rate_limit=RateLimit(qps=0.001, burst=2)) as d:
        replies = [await d.ask(move("team-x", f"k{i}"), token) for i in range(3)]
    assert [r.ok for r in replies] == [True, True, False]
    assert replies[2].error.code == "TooManyRequests" and USER in replies[2].error.message


async def test_a_deleted_service_account_s_token_is_refused_while_its_review_is_still_cached(
    cluster: Kube, nats_srv: Server, nats_scope: NatsScope
) -> None:
    _ns(cluster, "tools")
    token = requester(cluster, "defrag", [EVICT], namespace="tools")
    config = config_from_dict(
        {
            "nats": {"url": nats_srv.url, "subjectPrefix": nats_scope.prefix},
            "kubernetes": {"kubeconfig": str(cluster.handle.kubeconfig)},
            "watcher": {"kinds": ["serviceaccounts"], "checkpointInterval": "200ms"},
        }
    )
    kube = KubeClient.from_config(config.kubernetes)
    watcher = Watcher(config, nats_scope.nc, kube)
    stop = asyncio.Event()
    watching = asyncio.create_task(watcher.run(stop))
    events = await nats_scope.nc.subscribe(bus.Subjects(nats_scope.prefix).events_of("serviceaccounts"))
    try:
        async with door(cluster, nats_srv, nats_scope, token_cache_ttl="24h") as d:
            assert (await d.ask(move("team-x", "a"), token)).ok  # its review is cached for a day
            cluster.custom.delete_cluster_custom_object(
                GROUP, VERSION, PLURAL, jobs(cluster)[0]["metadata"]["name"]
            )
            async with asyncio.timeout(30):
                await watcher.synced["serviceaccounts"].wait()
            cluster.core.delete_namespaced_service_account("defrag", "tools")
            async with asyncio.timeout(30):  # the watcher's word that it went reaches this connection
                while json.loads((await events.next_msg(timeout=30)).data)["type"] != "DELETED":
                    pass
            reply = await d.ask(move("team-y", "b"), token)
            await refused(reply, d, cluster, "service account token has been invalidated", "system:anonymous")
    finally:
        stop.set()
        await watching
        await events.unsubscribe()
        await kube.aclose()


async def test_an_api_server_that_cannot_review_makes_it_unavailable_not_refused(tmp_path: Path) -> None:
    """Nothing is decided while the API server cannot answer: the sender is told to retry."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters: [{name: x, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: x, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: x, user: x}}]\n"
    )
    kube = KubeClient.from_config(KubernetesConfig(kubeconfig=str(kubeconfig)))
    requesters = Requesters(kube, IntentsConfig(), bus.Subjects("p"))
    try:
        with pytest.raises(Forbidden) as unavailable:
            await requesters.identify("p.intent.request", bearer("a.b.c"))
    finally:
        await kube.aclose()
    assert unavailable.value.error.code == "Unavailable" and "retry" in unavailable.value.error.message
