"""NATS as deploy/ runs it: TLS from Podherd's CA, every client by certificate, each mapped to a user that
may use only the subjects and JetStream calls of its own service (`shared.nats.permissions`). A client
without a certificate, with one from another CA or of no user cannot connect; each service is refused what
another does; the four services carry a job end to end as their own users; a service refused a permission
stops with one line naming it.
"""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import nats
import nats.errors
import pytest
import yaml

from kubesim.sim import SimHandle
from podherd import nats_pki
from podherd.client import signed
from podherd.harness.servers import Server, find_nats_binary, start_nats_binary
from podherd.install import install, service_kubeconfig
from podherd.nats_pki import Pki
from services.tracker.intake.intents import INTENTS
from shared.access.authority import Authority
from shared.api import codec
from shared.api.messages import IntentReply, MigrationIntent, PodKey
from shared.config.model import KubernetesConfig, NatsConfig, Tls
from shared.intake.intent_jobs import job_name
from shared.kube.client import KubeClient
from shared.nats import bus
from shared.nats.access import DENIED, Access
from shared.nats.permissions import AUDITOR, INTENT_SENDER
from tests.e2e.pipeline import ended, pipeline, pipeline_config, until_job
from tests.e2e.test_gate import get_job
from tests.e2e.test_lifecycle import cluster, start, web_pods
from tests.e2e.test_pipeline import when_served
from tests.polling import until

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("secured-nats")]
PREFIX = "sec"
S = bus.Subjects(PREFIX)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Pki]]:
    binary = find_nats_binary()
    if binary is None:
        pytest.skip("no nats-server binary")
    work = tmp_path_factory.mktemp("secured-nats")
    pki = nats_pki.issue(work / "pki", (*nats_pki.USERS, "podherd-outsider"))
    server = start_nats_binary(binary, work / "server", conf=pki.server_conf(PREFIX))
    yield server, pki
    server.stop()


class Refusals(list[str]):
    def __init__(self) -> None:
        super().__init__()
        self.arrived = asyncio.Event()

    async def on_error(self, exc: Exception) -> None:
        self.append(str(exc).lower())
        self.arrived.set()

    async def until(self, count: int) -> None:
        async with asyncio.timeout(15):  # a bound for failing only: each arrives at once
            while len(self) < count:
                self.arrived.clear()
                await self.arrived.wait()


async def connect(server: Server, tls: Tls, refusals: Refusals | None = None) -> Any:
    options: dict[str, Any] = {"connect_timeout": 3, "allow_reconnect": False, "max_reconnect_attempts": 1}
    if refusals is not None:
        options["error_cb"] = refusals.on_error
    return await nats.connect(server.url, **options, **Access(NatsConfig(url=server.url, tls=tls)).options)


async def test_no_certificate_one_from_another_ca_or_of_no_user_cannot_connect(
    secured: tuple[Server, Pki], tmp_path: Path
) -> None:
    server, pki = secured
    elsewhere = nats_pki.issue(
        tmp_path / "elsewhere", ("podherd-tracker",), authority=Authority.new("other-ca")
    )
    attempts = {
        "no certificate": Tls(ca=str(pki.ca)),
        "another CA": Tls(
            ca=str(pki.ca),
            cert=elsewhere.tls("podherd-tracker").cert,
            key=elsewhere.tls("podherd-tracker").key,
        ),
        "no user of this certificate": pki.tls("podherd-outsider"),
    }
    for what, tls in attempts.items():
        with pytest.raises((nats.errors.Error, OSError, ssl.SSLError, TimeoutError)):
            nc = await connect(server, tls)
            await nc.close()
            pytest.fail(f"connected with {what}")
    nc = await connect(server, pki.tls("podherd-tracker"))  # its own certificate, its own user
    assert nc.is_connected
    await nc.close()


# What each user may not do: another service's subject, and another stream's JetStream calls.
REFUSED = {
    "podherd-watcher": [
        S.job("evict", "x"),
        S.job("admitted", "x"),
        f"$JS.API.CONSUMER.DURABLE.CREATE.{S.jobs_stream}.executor",
    ],
    "podherd-arbitrator": [
        S.job("evict", "x"),
        S.event("pods", "default", "x"),
        f"$KV.{S.lease_bucket}.watcher.pods",
    ],
    "podherd-executor": [
        S.job("admitted", "x"),
        S.job("evict", "x"),
        S.event("pods", "default", "x"),
        f"$JS.API.CONSUMER.DURABLE.CREATE.{S.events_stream}.arbitrator",
    ],
    "podherd-tracker": [S.job("admitted", "x"), S.job("report", "x"), S.event("pods", "default", "x")],
    INTENT_SENDER: [S.job("evict", "x"), S.audit("x"), f"$JS.API.STREAM.CREATE.{S.jobs_stream}"],
    AUDITOR: [S.intent_request, S.job("evict", "x"), f"$JS.API.STREAM.DELETE.{S.audit_stream}"],
}
ALLOWED = {
    "podherd-watcher": [S.event("pods", "default", "x")],
    "podherd-arbitrator": [S.job("admitted", "x"), S.audit("x")],
    "podherd-executor": [S.job("report", "x"), S.audit("x")],
    "podherd-tracker": [S.job("evict", "x"), S.job("reserve", "x"), S.audit("x")],
    INTENT_SENDER: [S.intent("default")],
    AUDITOR: [],
}


async def test_the_servers_certificate_is_checked_for_the_configured_server_name(
    secured: tuple[Server, Pki],
) -> None:
    """Through a port-forward the address is 127.0.0.1: `serverName` names the name the certificate must
    carry instead (the in-cluster one), so no hosts file is edited; a name it does not carry is refused."""
    server, pki = secured
    tls = pki.tls("podherd-tracker")
    nc = await connect(server, msgspec.structs.replace(tls, server_name="nats.podherd.svc"))
    assert nc.is_connected
    await nc.close()
    with pytest.raises((ssl.SSLError, OSError, nats.errors.Error, TimeoutError)):
        nc = await connect(server, msgspec.structs.replace(tls, server_name="nats.elsewhere.example"))
        await nc.close()
        pytest.fail("connected to a server whose certificate does not carry the name asked for")


@pytest.mark.parametrize("user", list(REFUSED))
async def test_each_user_is_refused_what_another_does(secured: tuple[Server, Pki], user: str) -> None:
    server, pki = secured
    refusals = Refusals()
    nc = await connect(server, pki.tls(user), refusals)
    try:
        for subject in ALLOWED[user] + REFUSED[user]:
            await nc.publish(subject, b"{}")
        await nc.flush()
        await refusals.until(len(REFUSED[user]))
        await nc.flush()
    finally:
        await nc.close()
    assert len(refusals) == len(REFUSED[user]), refusals
    for subject in REFUSED[user]:
        assert any(f'permissions violation for publish to "{subject.lower()}"' in r for r in refusals), (
            subject,
            refusals,
        )


async def test_the_four_services_carry_a_job_as_their_own_users(
    kubesim_factory: Callable[..., SimHandle], secured: tuple[Server, Pki], redis_srv: Server, test_id: str
) -> None:
    server, pki = secured
    kube = start(kubesim_factory, cluster())
    first, second = sorted(web_pods(kube))[:2]
    config = pipeline_config(kube.handle, server, redis_srv, PREFIX)
    asked, sent = (
        MigrationIntent(
            idempotency_key=f"{test_id}-{n}", pod=PodKey(namespace="default", name=n), requester="t"
        )
        for n in (first, second)
    )
    sender = await connect(server, pki.tls(INTENT_SENDER))
    try:
        async with pipeline(config, pki=pki):
            answer = await when_served(sender, S, codec.encode(asked), signed(config))
            reply = codec.decode(answer, IntentReply)
            assert reply.ok and reply.job, reply
            # The stream's door: read and refused (it proves no sender with kubernetes authorization), as
            # the tracker's own user; nothing made for it.
            refused = INTENTS.labels("stream", "Forbidden")
            before = refused._value.get()
            await sender.jetstream().publish(S.intent("default"), codec.encode(sent))
            await until(lambda: refused._value.get() > before, within=30, what="the stream intent refused")
            jobs = [await until_job(kube, reply.job, ended)]
    finally:
        await sender.close()
    assert [j["status"]["phase"] for j in jobs] == ["Succeeded"], [j["status"] for j in jobs]
    assert get_job(kube, job_name(sent.idempotency_key)) is None
    assert DENIED.first is None, DENIED.first  # no service was refused anything it does


def test_a_service_refused_a_permission_stops_with_one_line_naming_it(
    kubesim_factory: Callable[..., SimHandle], secured: tuple[Server, Pki], tmp_path: Path
) -> None:
    server, pki = secured
    handle = kubesim_factory()
    admin = KubeClient.from_config(KubernetesConfig(kubeconfig=str(handle.kubeconfig)))
    install(admin, rbac=True)
    kubeconfig = service_kubeconfig(admin, handle.kubeconfig, "watcher", path=tmp_path / "kubeconfig")
    admin.close()
    auditor = pki.tls(AUDITOR)  # a watcher given the auditor's certificate: it may publish no event
    document = {
        "nats": {"url": server.url, "subjectPrefix": PREFIX, "tls": msgspec.to_builtins(auditor)},
        "kubernetes": {"kubeconfig": str(kubeconfig)},
        "http": {"host": "127.0.0.1", "port": 0},
        "logging": {"format": "text"},
        "intents": {"authorization": "none"},
    }
    path = tmp_path / "podherd.yaml"
    path.write_text(yaml.safe_dump(document))
    ran = subprocess.run(
        [sys.executable, "-m", "podherd", "run", "watcher", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    errors = [line for line in ran.stderr.splitlines() if "NATS refused" in line]
    assert ran.returncode == 1, ran.stderr[-3000:]
    assert len(errors) == 1 and "permissions violation" in errors[0], ran.stderr[-3000:]
    assert "Traceback" not in ran.stderr


async def test_a_renewed_certificate_is_taken_at_the_next_connection(
    secured: tuple[Server, Pki], tmp_path: Path
) -> None:
    """As cert-manager renews a Secret in place: the client's files change under it, and a service's
    reconnection (`nats_connect.connect`) presents the new certificate without a restart."""
    server, pki = secured
    mounted = tmp_path / "mounted"
    mounted.mkdir()
    stale = nats_pki.issue(tmp_path / "stale", ("podherd-tracker",), authority=Authority.new("retired-ca"))
    for name in ("ca.crt", "tls.crt", "tls.key"):  # what an old Secret held: another CA's
        (mounted / name).write_bytes((stale.directory / "podherd-tracker" / name).read_bytes())
    tls = Tls(ca=str(mounted / "ca.crt"), cert=str(mounted / "tls.crt"), key=str(mounted / "tls.key"))
    access = Access(NatsConfig(url=server.url, tls=tls))
    with pytest.raises((nats.errors.Error, OSError, ssl.SSLError, TimeoutError)):
        nc = await nats.connect(server.url, connect_timeout=3, allow_reconnect=False, **access.options)
        await nc.close()
    for name in ("ca.crt", "tls.crt", "tls.key"):  # renewed in place
        (mounted / name).write_bytes((pki.directory / "podherd-tracker" / name).read_bytes())
    access.refresh()  # what nats_connect.connect does before each reconnection
    nc = await nats.connect(server.url, connect_timeout=3, allow_reconnect=False, **access.options)
    assert nc.is_connected
    await nc.close()
