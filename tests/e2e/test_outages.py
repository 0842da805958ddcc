"""The four services on a bad day, as processes: a dependency that stays away (NATS at start, Redis, the API
server) costs one line per attempt with a growing wait, never a traceback; `/readyz` answers 503 from the
first second until the service can work, and 200 again once the dependency is back, without a restart;
SIGTERM ends a service within 10 s with exit 0 whatever it is waiting for."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from kubesim.kubelet.proxy import Forward
from kubesim.sim import SimHandle
from podherd.harness.nats_cluster import NatsCluster
from podherd.harness.processes import ServiceProcess, ServiceProcesses
from podherd.harness.servers import (
    Server,
    find_nats_binary,
    find_redis_binary,
    free_port,
    start_nats_binary,
    start_redis_binary,
)
from tests.kube import client_for, with_crds
from tests.polling import until_sync

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
STOP_WITHIN_S = 10.0


# At most this many lines for one dependency in the first `seconds` of an outage: the waits double from
# 0.25 s (NATS) or 0.5 s (Redis) up to their cap (5 s, 30 s), each at least half of its step.
def most_lines(seconds: float, first: float, cap: float = float("inf")) -> int:
    lines, waited, step = 1, 0.0, first
    while waited + step / 2 <= seconds:
        waited += step / 2
        step = min(cap, step * 2)
        lines += 1
    return lines


def crds(handle: SimHandle) -> SimHandle:
    with_crds(client_for(handle)).api.close()
    return handle


def readyz(proc: ServiceProcess) -> int | None:
    """The status `/readyz` answers; None before the service listens."""
    if not proc.port:
        return None
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{proc.port}/readyz", timeout=2) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        return refused.code
    except (urllib.error.URLError, OSError):
        return None


def answers(proc: ServiceProcess, status: int | None = None) -> Callable[[], bool]:
    """Whether `/readyz` answers at all, or answers `status`."""
    return lambda: readyz(proc) is not None if status is None else readyz(proc) == status


def said(proc: ServiceProcess, text: str, times: int) -> Callable[[], bool]:
    return lambda: lines(proc, text) >= times


def until(condition: Callable[[], bool], within: float, what: str) -> None:
    until_sync(condition, within=within, what=what)  # a process's port and log: nothing announces them


def lines(proc: ServiceProcess, text: str) -> int:
    return sum(text in line for line in proc.log.read_text(errors="replace").splitlines())


def stop(procs: list[ServiceProcess]) -> dict[str, tuple[int, float]]:
    """SIGTERM to each at once: (exit code, seconds it took), by replica."""
    started = time.monotonic()
    for proc in procs:
        proc.process.send_signal(signal.SIGTERM)
    ended = {}
    for proc in procs:
        code = proc.process.wait(STOP_WITHIN_S + 5)  # one SIGTERM, as the kubelet sends
        ended[proc.name] = (code, time.monotonic() - started)
    return ended


def two_stopped_two_recover(
    procs: list[ServiceProcess], restore: Callable[[], object], why: str, within: float = 30.0
) -> dict[str, tuple[int, float]]:
    """Mid-outage, the first two services are SIGTERMed; `restore` brings the dependency back and the other
    two are ready again without a restart, then SIGTERMed too. How each ended, by replica (`stop`)."""
    stopped, staying = procs[:2], procs[2:]
    ended = stop(stopped)
    restore()
    for proc in staying:
        until(answers(proc, 200), within, f"{proc.name} ready once {why}, not restarted")
    ended.update(stop(staying))
    return ended


def ended_cleanly(procs: list[ServiceProcess], ended: dict[str, tuple[int, float]]) -> None:
    """Each exited 0, within the time SIGTERM may take, having logged no traceback."""
    for proc in procs:
        code, took = ended[proc.name]
        assert code == 0 and took < STOP_WITHIN_S, (proc.name, code, took, proc.tail())
        assert "Traceback" not in proc.log.read_text(errors="replace"), proc.tail(40)


@pytest.fixture
def nats_down(own_nats: Server) -> Server:
    """A NATS server that was started once, then killed: its address refuses connections until `restart`."""
    own_nats.kill()
    return own_nats


def config(tmp_path: Path, *, nats_url: str, redis_url: str, kubeconfig: Path, replicas: int = 1) -> Path:
    path = tmp_path / "podherd.yaml"
    document = {
        "nats": {"url": nats_url, "subjectPrefix": "outage", "replicas": replicas},
        "redis": {"url": redis_url, "keyPrefix": "outage"},
        "kubernetes": {"kubeconfig": str(kubeconfig)},
        "intents": {"authorization": "none"},
    }
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.fixture
def without_nats(
    kubesim_factory: Callable[..., SimHandle], redis_srv: Server, nats_down: Server, tmp_path: Path
) -> Iterator[list[ServiceProcess]]:
    """The four services started while NATS is away."""
    handle = crds(kubesim_factory())
    cfg = config(tmp_path, nats_url=nats_down.url, redis_url=redis_srv.url, kubeconfig=handle.kubeconfig)
    processes = ServiceProcesses(cfg, tmp_path / "services")
    try:
        yield processes.start_all()
    finally:
        processes.stop_all()


def test_nats_away_at_start_costs_a_line_per_attempt_and_sigterm_ends_each_service(
    without_nats: list[ServiceProcess], nats_down: Server
) -> None:
    """Two services are stopped while NATS is still away; NATS comes back and the other two work."""
    procs = without_nats
    for proc in procs:  # not ready from the first answer on
        until(answers(proc), 30, f"{proc.name} listening")
        assert readyz(proc) == 503, proc.tail()
    waited = time.monotonic()
    for proc in procs:
        until(said(proc, "NATS unreachable at", 2), 30, f"{proc.name} trying again")
    outage = time.monotonic() - waited + 2.0
    ended = two_stopped_two_recover(procs, nats_down.restart, "NATS is back")
    ended_cleanly(procs, ended)
    for proc in procs:
        assert f"NATS unreachable at {nats_down.url}: " in proc.log.read_text(errors="replace"), proc.tail()
    for proc in procs[2:]:
        assert "answers again" in proc.log.read_text(errors="replace"), proc.tail()
    for proc in procs[:2]:
        assert lines(proc, "NATS unreachable at") <= most_lines(outage + ended[proc.name][1], 0.25), (
            proc.tail()
        )


def test_nats_lost_mid_run_is_waited_out_and_sigterm_still_ends_each_service(
    kubesim_factory: Callable[..., SimHandle], redis_srv: Server, nats_down: Server, tmp_path: Path
) -> None:
    nats_down.restart()  # up at start this time
    handle = crds(kubesim_factory())
    cfg = config(tmp_path, nats_url=nats_down.url, redis_url=redis_srv.url, kubeconfig=handle.kubeconfig)
    processes = ServiceProcesses(cfg, tmp_path / "services")
    try:
        procs = processes.start_all()
        processes.wait_ready(60)
        nats_down.kill()
        gone = time.monotonic()
        for proc in procs:
            until(answers(proc, 503), 30, f"{proc.name} not ready while NATS is away")
            until(said(proc, "NATS unreachable at", 2), 30, f"{proc.name} trying again")
        outage = time.monotonic() - gone
        counted = {p.name: lines(p, "NATS unreachable at") for p in procs}
        ended = two_stopped_two_recover(procs, nats_down.restart, "NATS is back")
    finally:
        processes.stop_all()
    ended_cleanly(procs, ended)
    for proc in procs:  # one line per reconnection attempt, the waits growing
        assert counted[proc.name] <= most_lines(outage + 1, 0.25, 5.0), (proc.name, counted)


def test_redis_away_costs_a_line_per_attempt_not_a_traceback(
    kubesim_factory: Callable[..., SimHandle], nats_srv: Server, tmp_path: Path
) -> None:
    binary = find_redis_binary()
    if binary is None:
        pytest.skip("no redis binary")
    redis = start_redis_binary(binary, tmp_path / "redis")
    handle = crds(kubesim_factory())
    cfg = config(tmp_path, nats_url=nats_srv.url, redis_url=redis.url, kubeconfig=handle.kubeconfig)
    processes = ServiceProcesses(cfg, tmp_path / "services")
    try:
        arbitrator, tracker = processes.start("arbitrator"), processes.start("tracker")
        processes.wait_ready(60)
        redis.kill()
        gone = time.monotonic()
        until(answers(arbitrator, 503), 30, "arbitrator not ready while Redis is away")
        until(answers(tracker, 503), 30, "tracker not ready while Redis is away")
        until(said(arbitrator, "Redis unreachable at", 3), 30, "arbitrator trying again")
        outage = time.monotonic() - gone
        counted = {p.name: lines(p, "Redis unreachable at") for p in (arbitrator, tracker)}
        redis.restart()
        until(answers(arbitrator, 200), 30, "arbitrator ready once Redis is back")
        until(answers(tracker, 200), 30, "tracker ready once Redis is back")
        ended = stop(processes.running)
    finally:
        processes.stop_all()
        redis.stop()
    for proc in (arbitrator, tracker):
        log = proc.log.read_text(errors="replace")
        assert "Traceback" not in log, log
        assert counted[proc.name] <= most_lines(outage + 1, 0.5), (proc.name, counted, log)
        assert ended[proc.name][0] == 0 and ended[proc.name][1] < STOP_WITHIN_S, ended


def dead_kubeconfig(tmp_path: Path) -> Path:
    """A kubeconfig naming an API server that is not there."""
    kubeconfig = tmp_path / "kubeconfig"
    dead = f"https://127.0.0.1:{free_port()}"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": dead, "insecure-skip-tls-verify": True}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return kubeconfig


API_AWAY = "the Kubernetes API server unreachable at"


class Link:
    """A TCP link to an address that can be cut and made again on the same port: an API server that goes
    away (connections refused, those open reset) and comes back at the same address."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.port, self.target = free_port(), target
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.forward: Forward | None = None

    def up(self) -> None:
        self.forward = Forward(None, ("127.0.0.1", self.port), None, targets=[self.target])
        asyncio.run_coroutine_threadsafe(self.forward.start(), self.loop).result(10)

    def down(self) -> None:
        if self.forward is not None:
            asyncio.run_coroutine_threadsafe(self.forward.stop(), self.loop).result(10)
            self.forward = None

    def close(self) -> None:
        self.down()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def api_link(kubesim_factory: Callable[..., SimHandle], tmp_path: Path) -> Iterator[tuple[Link, Path]]:
    """kubesim behind a link (down at first), and a kubeconfig that reaches it through the link."""
    handle = crds(kubesim_factory())
    address = urllib.parse.urlsplit(handle.url)
    link = Link((address.hostname or "127.0.0.1", address.port or 443))
    document = yaml.safe_load(handle.kubeconfig.read_text())
    for entry in document["clusters"]:
        entry["cluster"]["server"] = f"https://127.0.0.1:{link.port}"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(document))
    yield link, kubeconfig
    link.close()


def test_an_api_server_away_at_start_and_mid_run_is_waited_out(
    nats_srv: Server, redis_srv: Server, api_link: tuple[Link, Path], tmp_path: Path
) -> None:
    """Away from the start: the services that need it are not ready, two are stopped meanwhile; back, the
    other two are ready without a restart; away again mid-run: not ready again, then ready again. The
    arbitrator admits from what NATS brings (the API server only tells it of disruption windows): it stays
    ready throughout."""
    link, kubeconfig = api_link
    cfg = config(tmp_path, nats_url=nats_srv.url, redis_url=redis_srv.url, kubeconfig=kubeconfig)
    processes = ServiceProcesses(cfg, tmp_path / "services")
    procs = processes.start_all()
    began = time.monotonic()
    by_name = {proc.service: proc for proc in procs}
    needing = [by_name[name] for name in ("watcher", "tracker")]
    try:
        for proc in procs:
            until(answers(proc), 30, f"{proc.name} listening")
        for proc in (*needing, by_name["executor"]):
            assert readyz(proc) == 503, proc.tail()
        until(said(by_name["watcher"], API_AWAY, 2), 30, "the watcher trying again")
        ended = stop([by_name["executor"]])
        outage = time.monotonic() - began
        # Every kind's watch tries again, and the API server costs one line per step for all of them.
        assert lines(by_name["watcher"], API_AWAY) <= most_lines(outage, 0.25, 30.0), by_name[
            "watcher"
        ].tail()
        link.up()
        for proc in (*needing, by_name["arbitrator"]):
            until(answers(proc, 200), 30, f"{proc.name} ready once the API server answers, not restarted")
        link.down()
        for proc in needing:
            until(answers(proc, 503), 30, f"{proc.name} not ready while the API server is away")
        assert readyz(by_name["arbitrator"]) == 200
        link.up()
        for proc in needing:
            until(answers(proc, 200), 30, f"{proc.name} ready again, not restarted")
        ended.update(stop(processes.running))
    finally:
        processes.stop_all()
    ended_cleanly(procs, ended)


def test_everything_away_holds_no_service_past_sigterm(nats_down: Server, tmp_path: Path) -> None:
    """NATS, Redis and the API server all unreachable from the start."""
    kubeconfig = dead_kubeconfig(tmp_path)
    cfg = config(
        tmp_path,
        nats_url=nats_down.url,
        redis_url=f"redis://127.0.0.1:{free_port()}/0",
        kubeconfig=kubeconfig,
    )
    processes = ServiceProcesses(cfg, tmp_path / "services")
    procs = processes.start_all()
    try:
        for proc in procs:
            until(answers(proc, 503), 30, f"{proc.name} listening, not ready")
            until(said(proc, "NATS unreachable at", 1), 30, f"{proc.name} trying")
        ended = stop(processes.running)
    finally:
        processes.stop_all()
    ended_cleanly(procs, ended)


# `make chaos` runs it (`-m full`, 18-33 s here): `make test` has a stream without quorum read whole once it
# has it again (tests/integration/test_room_checks.py) and NATS lost mid-run waited out by the four services.
@pytest.mark.full
def test_jetstream_without_quorum_is_waited_out_and_sigterm_still_ends_each_service(
    kubesim_factory: Callable[..., SimHandle], redis_srv: Server, nats_cluster: NatsCluster, tmp_path: Path
) -> None:
    """Two of three servers down: NATS answers, JetStream cannot (no leader for the streams at replicas 3).
    Two services are stopped meanwhile; the servers come back and the other two work, not restarted."""
    first, *others = nats_cluster.servers
    for server in others:
        server.kill()
    handle = crds(kubesim_factory())
    cfg = config(
        tmp_path, nats_url=first.url, redis_url=redis_srv.url, kubeconfig=handle.kubeconfig, replicas=3
    )
    processes = ServiceProcesses(cfg, tmp_path / "services")
    try:
        procs = processes.start_all()
        for proc in procs:
            until(answers(proc), 30, f"{proc.name} listening")
            until(said(proc, "JetStream not ready", 1), 30, f"{proc.name} waiting for JetStream")
            assert readyz(proc) == 503, proc.tail()

        def restore() -> None:  # one after the other (together, JetStream took over a minute to answer)
            for server in others:
                nats_cluster.restart(server)

        ended = two_stopped_two_recover(procs, restore, "JetStream has its quorum", within=60)
    finally:
        processes.stop_all()
    ended_cleanly(procs, ended)


LONG_OUTAGE_S = 60.0


@pytest.mark.slow
@pytest.mark.full  # a minute each: `pytest -m slow` runs them, `make test` the short outages above
@pytest.mark.parametrize(("dependency", "first", "cap"), [("NATS", 0.25, 5.0), ("Redis", 0.5, 30.0)])
def test_a_minute_without_a_dependency_costs_a_line_per_backoff_step(
    kubesim_factory: Callable[..., SimHandle],
    tmp_path: Path,
    dependency: str,
    first: float,
    cap: float,
) -> None:
    nats_binary, redis_binary = find_nats_binary(), find_redis_binary()
    if nats_binary is None or redis_binary is None:
        pytest.skip("needs the nats-server and redis-server binaries")
    servers = {
        "NATS": start_nats_binary(nats_binary, tmp_path / "nats"),
        "Redis": start_redis_binary(redis_binary, tmp_path / "redis"),
    }
    handle = crds(kubesim_factory())
    cfg = config(
        tmp_path, nats_url=servers["NATS"].url, redis_url=servers["Redis"].url, kubeconfig=handle.kubeconfig
    )
    processes = ServiceProcesses(cfg, tmp_path / "services")
    away = servers[dependency]
    try:
        procs = processes.start_all() if dependency == "NATS" else [processes.start("arbitrator")]
        processes.wait_ready(60)
        away.kill()
        gone = time.monotonic()
        for proc in procs:
            until(answers(proc, 503), 30, f"{proc.name} not ready while {dependency} is away")
        time.sleep(max(0.0, LONG_OUTAGE_S - (time.monotonic() - gone)))  # the outage itself: a minute
        outage = time.monotonic() - gone
        counted = {p.name: lines(p, f"{dependency} unreachable at") for p in procs}
        away.restart()
        for proc in procs:
            until(answers(proc, 200), 60, f"{proc.name} ready once {dependency} is back, not restarted")
        ended = stop(processes.running)
    finally:
        processes.stop_all()
        for server in servers.values():
            server.stop()
    ended_cleanly(procs, ended)
    for proc in procs:
        assert 2 <= counted[proc.name] <= most_lines(outage + 1, first, cap), (proc.name, counted)
