"""The watcher on kubesim and real NATS: every change once, in order, across crashes, 410s and failovers.

Ground truth is kubesim's own event history (what the API server told watchers), never the watcher's logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgspec
import nats
import pytest
from nats.js.api import ConsumerConfig, DeliverPolicy
from prometheus_client import REGISTRY

from kubesim.sim import SimHandle
from podherd.harness.servers import Server
from services.watcher.service import Watcher
from shared.config.loader import config_from_dict
from shared.config.model import PodherdConfig
from shared.kube.client import KubeClient
from shared.nats import bus
from shared.nats.bus import Subjects
from tests.kube import Kube, client_for, with_crds
from tests.kubesim.test_scaling import CLONESETS
from tests.polling import until

pytestmark = pytest.mark.integration
GROUP, VERSION = "scheduling.koordinator.sh", "v1alpha1"


def watcher_config(
    nats_url: str, handle: SimHandle, prefix: str, replica: str = "w1", **watcher: Any
) -> PodherdConfig:
    return config_from_dict(
        {
            "nats": {"url": nats_url, "subjectPrefix": prefix},
            "kubernetes": {"kubeconfig": str(handle.kubeconfig)},
            "replica": replica,
            "http": {"port": 0},
            "watcher": {"leaseTTL": "2s", "checkpointInterval": "100ms", **watcher},
        }
    )


async def read_events(url: str, prefix: str, kind: str | None = None) -> list[dict[str, Any]]:
    """Every message on the events stream (optionally of one kind), in stream order."""
    subjects = Subjects(prefix)
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        filter_subject = subjects.events_of(kind) if kind else subjects.all_events
        info = await js.stream_info(subjects.events_stream, subjects_filter=filter_subject)
        total = info.state.messages if kind is None else sum((info.state.subjects or {}).values())
        out: list[dict[str, Any]] = []
        if not total:
            return out
        sub = await js.subscribe(
            filter_subject, ordered_consumer=True, config=ConsumerConfig(deliver_policy=DeliverPolicy.ALL)
        )
        while len(out) < total:
            msg = await sub.next_msg(timeout=5)
            out.append(
                {
                    **json.loads(msg.data),
                    "_subject": msg.subject,
                    "_msgid": (msg.headers or {}).get("Nats-Msg-Id"),
                }
            )
        await sub.unsubscribe()
        return out
    finally:
        await nc.close()


async def wait_events(
    url: str,
    prefix: str,
    predicate: Callable[[list[dict[str, Any]]], bool],
    kind: str | None = None,
    within: float = 20.0,
) -> list[dict[str, Any]]:
    """Follow the stream until `predicate(all events so far)` holds."""
    subjects = Subjects(prefix)
    nc = await nats.connect(url)
    events: list[dict[str, Any]] = []
    try:
        js = nc.jetstream()
        deadline = time.monotonic() + within
        subject = subjects.events_of(kind) if kind else subjects.all_events
        sub = await until(  # the stream is made by a service starting beside the test: nothing announces it
            lambda: js.subscribe(subject, ordered_consumer=True),
            within=within,
            what="the events stream",
            retry=(Exception,),
        )
        while not predicate(events):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"condition not met; {len(events)} events seen")
            with contextlib.suppress(TimeoutError, nats.errors.TimeoutError):
                msg = await sub.next_msg(timeout=min(remaining, 1.0))
                events.append({**json.loads(msg.data), "_subject": msg.subject})
        return events
    finally:
        await nc.close()


async def wait_checkpoint(
    url: str, prefix: str, kind: str, within: float = 20.0, *, at_least: int = 0
) -> str:
    """Wait until the watcher has listed `kind` and checkpointed (its watch is then established), at
    `at_least` that resourceVersion: every event up to it is then published and acknowledged, so any
    repeat a replay from an older checkpoint would publish has come too."""
    nc = await nats.connect(url)
    try:

        async def checkpoint() -> str | None:
            kv = await nc.jetstream().key_value(Subjects(prefix).watch_bucket)
            entry = await kv.get(f"rv.{kind}")
            rv = str(json.loads(entry.value)["rv"]) if entry.value else None
            return rv if rv is not None and int(rv) >= at_least else None

        # A checkpoint is a key-value write nobody is told of: read again.
        found: str = await until(
            checkpoint, within=within, what=f"a checkpoint for {kind}", retry=(Exception,)
        )
        return found
    finally:
        await nc.close()


def truth(handle: SimHandle, plural: str, group: str = "") -> list[tuple[str, str, str]]:
    """(type, uid, resourceVersion) of every event kubesim emitted for a resource, in order."""

    def collect(sim: Any) -> list[tuple[str, str, str]]:
        return [
            (e.type, e.obj["metadata"]["uid"], str(e.rv))
            for e in sim.store.log.history
            if e.rt.plural == plural and e.rt.group == group
        ]

    return handle.call(collect)


@contextlib.asynccontextmanager
async def running(config: PodherdConfig) -> AsyncIterator[Watcher]:
    nc = await nats.connect(config.nats.url)
    kube = KubeClient.from_config(config.kubernetes)
    watcher = Watcher(config, nc, kube)
    stop = asyncio.Event()
    task = asyncio.create_task(watcher.run(stop))
    try:
        yield watcher
    finally:
        stop.set()
        async with asyncio.timeout(20):
            await task
        await nc.close()
        await kube.aclose()


async def create_pmj(kube: Kube, name: str, spec: dict[str, Any]) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodMigrationJob",
        "metadata": {"name": name},
        "spec": spec,
    }
    await asyncio.to_thread(
        kube.custom.create_cluster_custom_object, GROUP, VERSION, "podmigrationjobs", body
    )


def crds(handle: SimHandle) -> Kube:
    return with_crds(client_for(handle))


# ---------------------------------------------------------------------------------------------------------


async def test_every_change_of_every_kind_arrives_once(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, test_id: str
) -> None:
    handle = kubesim_factory("small")
    kube = crds(handle)
    config = watcher_config(nats_srv.url, handle, test_id)
    async with running(config):
        # The initial list publishes what exists...
        await wait_events(
            nats_srv.url,
            test_id,
            lambda ev: (
                {e["kind"] for e in ev} >= {"Pod", "Node", "Deployment", "ReplicaSet", "PodDisruptionBudget"}
            ),
        )
        # ...and every change afterwards.
        await create_pmj(kube, "j.1", {"podRef": {"namespace": "default", "name": "x"}})
        await asyncio.to_thread(
            kube.custom.patch_cluster_custom_object_status,
            GROUP,
            VERSION,
            "podmigrationjobs",
            "j.1",
            {"status": {"phase": "Running"}},
        )
        await asyncio.to_thread(
            kube.custom.create_cluster_custom_object,
            GROUP,
            VERSION,
            "reservations",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "Reservation",
                "metadata": {"name": "r1"},
                "spec": {
                    "template": {"spec": {"containers": [{"name": "c"}]}},
                    "owners": [{"object": {"namespace": "default", "name": "x"}}],
                },
            },
        )
        await asyncio.to_thread(
            kube.custom.delete_cluster_custom_object, GROUP, VERSION, "podmigrationjobs", "j.1"
        )
        await asyncio.to_thread(
            kube.apps.create_namespaced_stateful_set,
            "default",
            {
                "metadata": {"name": "db"},
                "spec": {
                    "replicas": 1,
                    "serviceName": "db",
                    "selector": {"matchLabels": {"app": "db"}},
                    "template": {
                        "metadata": {"labels": {"app": "db"}},
                        "spec": {"containers": [{"name": "c"}]},
                    },
                },
            },
        )
        await create_pmj(kube, "bad", {"mode": "Teleport", "podRef": {"namespace": "default", "name": "x"}})
        await wait_events(
            nats_srv.url,
            test_id,
            lambda ev: (
                any(e["kind"] == "Pod" and e["name"] == "db-0" and e["object"].get("ready") for e in ev)
                and any(e["name"] == "bad" for e in ev)
                and any(e["kind"] == "Reservation" for e in ev)
            ),
        )
        # Compare with the truth once the stream has every pod event the API server has emitted so far.
        latest = truth(handle, "pods")[-1][2]
        await wait_events(
            nats_srv.url, test_id, lambda ev: any(e["resourceVersion"] == latest for e in ev), kind="pods"
        )
        events = await read_events(nats_srv.url, test_id)
    ids = [e["_msgid"] for e in events]
    assert len(ids) == len(set(ids)), "an event was published twice"
    jobs = [(e["type"], e["object"].get("status", {}).get("phase")) for e in events if e["name"] == "j.1"]
    assert jobs == [("ADDED", None), ("MODIFIED", "Running"), ("DELETED", "Running")]
    assert (
        events[[e["name"] for e in events].index("j.1")]["_subject"]
        == f"{test_id}.events.podmigrationjobs._.j_1"
    )
    bad = next(e for e in events if e["name"] == "bad")
    assert "spec.mode" in bad["error"] and bad["object"]["metadata"]["name"] == "bad"
    # Every pod event the API server emitted after the watcher's list is on the stream, once, in order.
    pods = [e for e in events if e["kind"] == "Pod"]
    streamed = [(e["uid"], e["resourceVersion"]) for e in pods]
    first_rv = min(int(rv) for _, rv in streamed)
    last_rv = max(int(rv) for _, rv in streamed)
    expected = [(uid, rv) for _, uid, rv in truth(handle, "pods") if first_rv < int(rv) <= last_rv]
    assert [p for p in streamed if int(p[1]) > first_rv] == expected
    db = next(e for e in pods if e["name"] == "db-0")["object"]
    assert db["workload"] == {
        "kind": "StatefulSet",
        "namespace": "default",
        "name": "db",
        "uid": db["owner"]["uid"],
    }
    web = next(e for e in pods if e["name"].startswith("web-"))["object"]
    assert web["workload"]["kind"] == "Deployment" and web["workload"]["name"] == "web"
    assert web["requests"] == {"cpu": "500m"} and web["schedulerName"] == "koord-scheduler"
    pdb = next(e for e in events if e["kind"] == "PodDisruptionBudget")["object"]
    assert pdb["minAvailable"] == 2 and pdb["selector"] == {"app": "web"}


async def test_namespace_and_label_selection(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, test_id: str
) -> None:
    handle = kubesim_factory()
    kube = client_for(handle)
    for ns in ("team-a", "team-b"):
        kube.core.create_namespace({"metadata": {"name": ns}})
        for name, labels in (("keep", {"tier": "web"}), ("skip", {"tier": "db"})):
            kube.core.create_namespaced_pod(
                ns,
                {
                    "metadata": {"name": name, "labels": labels},
                    "spec": {"schedulerName": "manual", "containers": [{"name": "c"}]},
                },
            )
    config = watcher_config(
        nats_srv.url,
        handle,
        test_id,
        kinds=["pods"],
        labelSelector="tier=web",
        namespaces={"exclude": ["team-b"]},
    )
    async with running(config):
        events = await wait_events(nats_srv.url, test_id, lambda ev: len(ev) >= 1, kind="pods")
        kube.core.create_namespaced_pod(
            "team-b",
            {
                "metadata": {"name": "late", "labels": {"tier": "web"}},
                "spec": {"schedulerName": "manual", "containers": [{"name": "c"}]},
            },
        )
        kube.core.create_namespaced_pod(
            "team-a",
            {
                "metadata": {"name": "late", "labels": {"tier": "web"}},
                "spec": {"schedulerName": "manual", "containers": [{"name": "c"}]},
            },
        )
        events = await wait_events(
            nats_srv.url, test_id, lambda ev: any(e["name"] == "late" for e in ev), kind="pods"
        )
    assert {(e["namespace"], e["name"]) for e in events} == {("team-a", "keep"), ("team-a", "late")}


# ---------------------------------------------------------------------------------------------------------
# Crashes, 410 and failover with real processes


class WatcherProcess:
    def __init__(self, config_env: dict[str, str], log_path: Path) -> None:
        self.env = config_env
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log_file = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.process = subprocess.Popen(
            [sys.executable, "-m", "podherd", "run", "watcher"],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env={**os.environ, **self.env},
        )
        log_file.close()

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def terminate(self) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(20)


def process_env(
    nats_url: str, handle: SimHandle, prefix: str, replica: str, kinds: str = "[pods]"
) -> dict[str, str]:
    return {
        "NATS_URL": nats_url,
        "KUBECONFIG": str(handle.kubeconfig),
        "PODHERD_NATS__SUBJECTPREFIX": prefix,
        "PODHERD_REPLICA": replica,
        "PODHERD_HTTP__PORT": "0",
        "PODHERD_WATCHER__KINDS": kinds,
        "PODHERD_WATCHER__LEASETTL": "2s",
        "PODHERD_WATCHER__CHECKPOINTINTERVAL": "100ms",
        "PODHERD_LOGGING__FORMAT": "text",
        "PODHERD_CONFIG": "",
    }


def churn(kube: Kube, start: int, count: int) -> None:
    for i in range(start, start + count):
        kube.core.create_namespaced_config_map(
            "default", {"metadata": {"name": f"noise-{i}"}}
        )  # other kinds' rv
        kube.core.create_namespaced_pod(
            "default",
            {
                "metadata": {"name": f"p-{i}"},
                "spec": {"schedulerName": "manual", "containers": [{"name": "c"}]},
            },
        )
        kube.core.patch_namespaced_pod(f"p-{i}", "default", {"metadata": {"labels": {"touched": "yes"}}})
        if i % 3 == 0:
            kube.core.delete_namespaced_pod(f"p-{i}", "default")


def last_version(handle: SimHandle) -> int:
    """The resourceVersion of the last pod event kubesim emitted."""
    return int(truth(handle, "pods")[-1][2])


def assert_exactly_the_truth(events: list[dict[str, Any]], handle: SimHandle) -> None:
    streamed = [
        (e["type"], e["uid"], e["resourceVersion"]) for e in events if not e["_msgid"].endswith("/deleted")
    ]
    assert len(streamed) == len(set(streamed)), "an event was published twice"
    expected = truth(handle, "pods")
    assert streamed == expected, f"{len(streamed)} streamed vs {len(expected)} emitted by the API server"


def publish_restarts() -> float:
    """How often a PMJ watch resumed from its checkpoint after a publish failed (in-process watchers)."""
    labels = {"kind": "podmigrationjobs", "reason": "publish"}
    return REGISTRY.get_sample_value("podherd_watcher_watch_restarts_total", labels) or 0.0


async def publish_restarts_above(count: float, within: float) -> None:
    what = "the watch resuming from its checkpoint after the failed publish"
    await until(lambda: publish_restarts() > count, within=within, what=what, every=0.02)  # a metric


async def test_a_publish_jetstream_never_acknowledged_is_published_again(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, test_id: str
) -> None:
    """A publish that fails only at the checkpoint's flush (JetStream away as the event came, as in a NATS
    restart) is not skipped: the watch resumes from the last checkpoint and publishes it again."""
    handle = kubesim_factory(scheduler=False)
    kube = crds(handle)
    config = watcher_config(nats_srv.url, handle, test_id)
    subjects = Subjects(test_id)
    nc = await nats.connect(nats_srv.url)
    try:
        js = nc.jetstream()
        async with running(config):
            await wait_checkpoint(nats_srv.url, test_id, "podmigrationjobs")
            before = publish_restarts()
            await js.delete_stream(subjects.events_stream)  # no stream: the publish gets no acknowledgement
            await create_pmj(kube, "lost-1", {"podRef": {"namespace": "default", "name": "x"}})
            await publish_restarts_above(before, within=20.0)  # the flush found it unacknowledged
            await bus.ensure_events_stream(js, subjects, config.nats)
            events = await wait_events(
                nats_srv.url,
                test_id,
                lambda ev: any(e["name"] == "lost-1" for e in ev),
                kind="podmigrationjobs",
            )
            assert [e["type"] for e in events if e["name"] == "lost-1"] == ["ADDED"]
    finally:
        await nc.close()


async def test_killed_watcher_resumes_without_loss_or_duplicates(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, test_id: str, tmp_path: Path
) -> None:
    handle = kubesim_factory(scheduler=False)
    kube = client_for(handle)
    proc = WatcherProcess(process_env(nats_srv.url, handle, test_id, "w1"), tmp_path / "w1.log")
    proc.start()
    try:
        await wait_checkpoint(nats_srv.url, test_id, "pods")
        writer = asyncio.create_task(asyncio.to_thread(churn, kube, 0, 60))
        await wait_events(nats_srv.url, test_id, lambda ev: len(ev) >= 40, kind="pods")
        proc.kill()  # mid-stream: some events published, some not, checkpoint somewhere behind
        await writer
        proc.start()
        final = len(truth(handle, "pods"))
        await wait_events(nats_srv.url, test_id, lambda ev: len(ev) >= final, kind="pods")
        await wait_checkpoint(nats_srv.url, test_id, "pods", at_least=last_version(handle))
        assert_exactly_the_truth(await read_events(nats_srv.url, test_id, "pods"), handle)
        assert proc.terminate() == 0
    finally:
        if proc.process and proc.process.poll() is None:
            proc.kill()


async def test_410_relists_and_reports_deletions_made_while_away(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, test_id: str, tmp_path: Path
) -> None:
    handle = kubesim_factory(scheduler=False)
    kube = client_for(handle)
    churn(kube, 0, 6)
    proc = WatcherProcess(process_env(nats_srv.url, handle, test_id, "w1"), tmp_path / "w1.log")
    proc.start()
    await wait_events(nats_srv.url, test_id, lambda ev: len(ev) >= 4, kind="pods")
    assert proc.terminate() == 0  # graceful: checkpoint written, lease released
    kube.core.delete_namespaced_pod("p-1", "default")
    kube.core.delete_namespaced_pod("p-2", "default")
    kube.core.patch_namespaced_pod("p-4", "default", {"metadata": {"labels": {"again": "yes"}}})
    kube.core.create_namespaced_pod(
        "default",
        {"metadata": {"name": "new"}, "spec": {"schedulerName": "manual", "containers": [{"name": "c"}]}},
    )
    handle.call(lambda sim: sim.store.compact())  # the checkpoint is now older than the server's window
    proc.start()
    try:
        await wait_events(
            nats_srv.url,
            test_id,
            lambda ev: (
                any(e["name"] == "new" for e in ev)
                and {e["name"] for e in ev if e["type"] == "DELETED"} >= {"p-1", "p-2"}
            ),
            kind="pods",
        )
        events = await read_events(nats_srv.url, test_id, "pods")
        vanished = {e["name"] for e in events if e["_msgid"].endswith("/deleted")}
        assert vanished == {"p-1", "p-2"}
        latest = {e["name"]: e for e in events}
        assert latest["p-4"]["object"]["labels"].get("again") == "yes"
        assert latest["new"]["type"] == "ADDED"
        live = {p.metadata.name for p in kube.core.list_namespaced_pod("default").items}
        believed = {name for name, e in latest.items() if e["type"] != "DELETED"}
        assert believed == live  # what consumers believe equals what exists
    finally:
        proc.terminate()


async def test_two_replicas_one_publishes_and_the_other_takes_over(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, test_id: str, tmp_path: Path
) -> None:
    handle = kubesim_factory(scheduler=False)
    kube = client_for(handle)
    first = WatcherProcess(process_env(nats_srv.url, handle, test_id, "w1"), tmp_path / "w1.log")
    second = WatcherProcess(process_env(nats_srv.url, handle, test_id, "w2"), tmp_path / "w2.log")
    first.start()
    await wait_checkpoint(nats_srv.url, test_id, "pods")
    second.start()
    try:
        churn(kube, 0, 10)
        await wait_events(
            nats_srv.url, test_id, lambda ev: len(ev) >= len(truth(handle, "pods")), kind="pods"
        )
        nc = await nats.connect(nats_srv.url)
        kv = await nc.jetstream().key_value(Subjects(test_id).lease_bucket)
        holder = json.loads((await kv.get("watcher.pods")).value or b"{}")["holder"]
        await nc.close()
        assert holder == "w1"
        first.kill()
        killed_at = time.monotonic()
        churn(kube, 10, 10)  # changes while nobody is active must still arrive
        final = len(truth(handle, "pods"))
        await wait_events(nats_srv.url, test_id, lambda ev: len(ev) >= final, kind="pods", within=20)
        took_over = time.monotonic() - killed_at
        assert took_over < 2 + 3  # the lease TTL (2 s) plus a generous allowance for the catch-up
        await wait_checkpoint(nats_srv.url, test_id, "pods", at_least=last_version(handle))
        assert_exactly_the_truth(await read_events(nats_srv.url, test_id, "pods"), handle)
        nc = await nats.connect(nats_srv.url)
        kv = await nc.jetstream().key_value(Subjects(test_id).lease_bucket)
        assert json.loads((await kv.get("watcher.pods")).value or b"{}")["holder"] == "w2"
        await nc.close()
    finally:
        for proc in (first, second):
            if proc.process and proc.process.poll() is None:
                proc.terminate()


def test_event_payloads_decode_as_the_shared_types() -> None:
    from shared.api.messages import ObjectEvent, PodInfo

    raw = json.dumps(
        {
            "schemaVersion": 1,
            "kind": "Pod",
            "type": "ADDED",
            "name": "p",
            "uid": "u",
            "resourceVersion": "1",
            "namespace": "d",
            "observedAt": "2026-01-01T00:00:00Z",
            "object": {"uid": "u", "namespace": "d", "name": "p"},
        }
    )
    assert msgspec.json.decode(raw, type=ObjectEvent[PodInfo]).object.name == "p"


async def test_a_configured_workload_kinds_replicas_are_read_through_its_scale_and_its_pods_name_it(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, test_id: str
) -> None:
    # Replicas the CloneSet-like CRD keeps at .spec.size: only its /scale says where they are.
    handle = kubesim_factory("small")
    kube = client_for(handle)
    kube.client("ApiextensionsV1Api").create_custom_resource_definition(CLONESETS)
    where = ("apps.example.io", "v1alpha1", "default", "clonesets")
    body = {"apiVersion": "apps.example.io/v1alpha1", "kind": "CloneSet", "metadata": {"name": "shop"}}
    shop = kube.custom.create_namespaced_custom_object(*where, {**body, "spec": {"size": 3}})
    owner = {"apiVersion": "apps.example.io/v1alpha1", "kind": "CloneSet", "name": "shop"}
    pod = {
        "metadata": {
            "name": "shop-0",
            "ownerReferences": [{**owner, "uid": shop["metadata"]["uid"], "controller": True}],
        },
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }
    kube.core.create_namespaced_pod("default", pod)
    clonesets = {
        "kind": "CloneSet",
        "group": "apps.example.io",
        "version": "v1alpha1",
        "resource": "clonesets",
    }
    config = watcher_config(nats_srv.url, handle, test_id, kinds=["pods"], workloadKinds=[clonesets])
    topic = f"{bus.WORKLOADS}.CloneSet_apps_example_io"

    def replicas(count: int) -> Callable[[list[dict[str, Any]]], bool]:
        return lambda events: any(e["object"].get("replicas") == count for e in events)

    async with running(config):
        first = await wait_events(nats_srv.url, test_id, replicas(3), kind=topic)
        kube.custom.patch_namespaced_custom_object_scale(*where, "shop", {"spec": {"replicas": 5}})
        later = await wait_events(nats_srv.url, test_id, replicas(5), kind=topic)
        pods = await wait_events(nats_srv.url, test_id, bool, kind="pods")
    assert first[0]["kind"] == "CloneSet.apps.example.io"
    assert first[0]["_subject"] == f"{test_id}.events.{topic}.default.shop"
    assert [e["object"]["replicas"] for e in later] == [3, 5]
    assert pods[0]["object"]["workload"]["kind"] == "CloneSet.apps.example.io"
