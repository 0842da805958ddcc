"""`podherd demo`: a defragmentation, end to end, on the embedded default.

1. kubesim serves the defragmentation article's picture (`fragmented`: every node half full, a node-sized
   pod pending), with RBAC on; real NATS (JetStream) and Redis come from the `embedded` extra (or
   `NATS_URL` / `REDIS_URL`).
2. Podherd's CRDs and `deploy/rbac` are installed; the pipeline's four services start as separate
   processes, each with its own ServiceAccount's token, so each can do only what its ClusterRole allows.
3. The planner picks the node that needs the fewest moves and where each pod goes; the moves are
   published as intents over NATS.
4. Live progress shows jobs by phase, ledger slots in use and each node's fill, while a watchdog reads the
   cluster and the ledger for the promises (no replacement Pending, no limit exceeded).
5. The summary says what happened, from the cluster; `--keep` leaves everything up.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import msgspec
import yaml

from kubesim.sim import SimHandle
from podherd import client, defrag_command, nats_pki
from podherd.demo import cluster as demo_cluster
from podherd.demo import mistyped as demo_mistyped
from podherd.demo import progress as demo_progress
from podherd.demo.engines import AccessRecord, access_record, start_cluster
from podherd.demo.interceptor import run_interceptor
from podherd.demo.maintenance import run_maintenance
from podherd.demo.rebalance import run_rebalance
from podherd.demo.services_up import keep_up, stay_up
from podherd.errors import CliError
from podherd.harness.processes import SERVICES, ServiceFailed, ServiceProcesses
from podherd.harness.servers import nats_server, redis_server
from podherd.install import install, requester_file, service_account, service_token
from podherd.watchdog.invariants import Findings, Watchdog, deployment_watchdog
from shared.access.private_files import write_private
from shared.api import paths
from shared.config.loader import config_from_dict
from shared.config.model import PodherdConfig
from shared.core.redact import without_credentials
from shared.kube.client import KubeClient
from shared.nats.permissions import OPERATOR
from shared.rebalance.defrag import Defrag
from shared.redis import client as redis_client

IN_CLUSTER_STOP = 60.0  # seconds: deploy/ gives each pod 45 s to stop
CLEANUP_WAIT = 15.0  # seconds an ended job's Reservation may take to be deleted before the summary counts it


@dataclass
class DemoOptions:
    keep: bool = False
    kubeconfig: str | None = None  # an existing cluster instead of kubesim's `fragmented`
    nats_url: str | None = None
    redis_url: str | None = None
    prefix: str = "podherd"
    timeout: float = 180.0
    workdir: str | None = None
    summary_json: str | None = None
    in_cluster: bool = False  # Podherd as `kubectl apply -k deploy/` installs it, its pods run by kubesim
    engine: str = "kubesim"  # or "real": the control plane `make controlplane` builds
    # or "maintenance": a node drained, plainly and by Podherd; "interceptor": kubectl drain, gated or not
    scenario: str = "defragment"


# How much of a failed service's log the summary shows.
LAST_WORDS_LINES = 12


# The scenarios that run on a kubesim cluster of their own, beside a run without Podherd.
ON_KUBESIM: dict[str, tuple[Callable[..., int], str]] = {
    "maintenance": (run_maintenance, "maintenance"),
    "interceptor": (run_interceptor, "maintenance"),
    "rebalance": (run_rebalance, "rebalance"),
}


def run_demo(opts: DemoOptions, out: TextIO = sys.stdout) -> int:
    started = time.monotonic()
    if opts.in_cluster and (opts.kubeconfig or opts.nats_url or opts.redis_url or opts.prefix != "podherd"):
        raise CliError(
            "--in-cluster runs deploy/ as it is on kubesim: it takes no --kubeconfig, --nats-url, --redis-url"
            " or --prefix"
        )
    if opts.scenario in ON_KUBESIM:
        runner, cluster = ON_KUBESIM[opts.scenario]
        if opts.in_cluster or opts.kubeconfig:
            raise CliError(
                f"--scenario {opts.scenario} runs on kubesim's {cluster} cluster:"
                " no --in-cluster, --kubeconfig"
            )
        return runner(opts, out, processes=_processes)
    workdir = Path(opts.workdir or tempfile.mkdtemp(prefix="podherd-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        services = _in_cluster(opts, stack, workdir) if opts.in_cluster else _processes(opts, stack, workdir)
        config_path = workdir / "podherd.yaml"
        token_file = workdir / "requester.token"  # the demo's planner sends intents as podherd-demo
        services.config_document.setdefault("intents", {})["tokenFile"] = str(token_file)
        config_path.write_text(yaml.safe_dump(services.config_document))
        config = config_from_dict(services.config_document)
        kube = KubeClient.from_config(config.kubernetes)
        stack.callback(kube.close)
        print(f"kubesim / cluster  KUBECONFIG={services.kubeconfig}", file=out)
        print(f"NATS               {without_credentials(config.nats.url)}", file=out)
        print(f"Redis              {without_credentials(config.redis.url)}", file=out)
        for line in services.start(kube):
            print(f"  {line}", file=out)
        requester_file(kube, token_file, audience=config.intents.audience)
        out.flush()
        summary = asyncio.run(_defragment(config, kube, opts, out=out))
        authorizer = services.authorizer
        if authorizer is not None:
            summary["rbac_denials"] = [str(d) for d in authorizer.denials]
            summary["rbac_identities"] = sorted({user for user, *_ in authorizer.used})
        else:
            summary["rbac_identities"] = []
        summary["metrics"] = services.metrics(kube) if opts.keep else "stopped with the services"
        codes = {} if opts.keep else services.stop(kube)
        summary["services_exit_codes"] = codes
        said = services.last_words()
        summary["services_failed"] = {name: said.get(name, "") for name, code in codes.items() if code}
        summary["services_stopped"] = not opts.keep
        summary["seconds"] = round(time.monotonic() - started, 1)
        tail = f"podherd audit tail --config {config_path}   (stream {summary.pop('_stream')})"
        # A hint that works once the demo has ended: its NATS stops with it unless --keep holds it up.
        summary["audit"] = tail if opts.keep else f"with --keep, {tail}; without, it stopped with the demo"
        summary["logs"] = services.logs
        ok = _print_summary(summary, out)
        if opts.summary_json:
            Path(opts.summary_json).write_text(json.dumps(summary, indent=2))
        stay_up(keep_up(opts.keep, stack, services, workdir=workdir), out)
        return 0 if ok and all(c == 0 for c in codes.values()) else 1


@dataclass
class _Services:
    """How the demo's four services run: as local processes, or as pods of deploy/ on kubesim."""

    kubeconfig: Path
    config_document: dict[str, Any]
    authorizer: AccessRecord | None
    handle: SimHandle | None  # kubesim's, where the demo started it
    start: Callable[[KubeClient], list[str]]  # starts them; lines describing each
    stop: Callable[[KubeClient], dict[str, int]]  # stops them; each one's exit code
    last_words: Callable[[], dict[str, str]]  # once stopped: what a service that failed said last
    metrics: Callable[[KubeClient], list[str]]
    logs: str


def _processes(
    opts: DemoOptions, stack: contextlib.ExitStack, workdir: Path, *, scenario: str = "fragmented"
) -> _Services:
    nats_url, redis_url = opts.nats_url, opts.redis_url
    pki = None
    if nats_url is None:  # NATS as deploy/ runs it: TLS, each service by its own certificate
        pki = nats_pki.issue(workdir / "pki")
        nats_srv = nats_server(conf=pki.server_conf(opts.prefix))
        stack.callback(nats_srv.stop)
        nats_url = nats_srv.url
        if nats_srv.origin.startswith("env:"):  # $NATS_URL's server, as it is
            pki = None
    users: dict[str, tuple[str, Path]] = {}
    if redis_url is None:  # Redis as deploy/ has it: each service that uses it as a user of its own
        redis_srv = redis_server()
        stack.callback(redis_srv.stop)
        redis_url = redis_srv.url
        if not redis_srv.origin.startswith("env:"):  # $REDIS_URL's server, as it is
            users = _redis_users(redis_url, opts.prefix, workdir)
    handle = None
    if opts.kubeconfig:
        kubeconfig = Path(opts.kubeconfig)
    else:
        handle = start_cluster(opts.engine, scenario)
        stack.callback(handle.stop)
        kubeconfig = handle.kubeconfig
    document = _config_document(opts.prefix, nats_url, redis_url, kubeconfig=kubeconfig)
    if pki is not None:  # the demo's own client (its planner, its watchdog) is an operator
        document["nats"]["tls"] = msgspec.to_builtins(pki.tls(OPERATOR))
    if scenario in (
        "maintenance",
        "rebalance",
    ):  # a workload's replicas go one after another, not one per 5 min
        document["migrationController"] = {"objectLimiters": {"workload": {"duration": "1s"}}}
    kubeconfigs: dict[str, Path] = {}
    processes = ServiceProcesses(
        workdir / "podherd.yaml", workdir / "logs", kubeconfigs, pki=pki, redis_users=users
    )
    stack.callback(processes.stop_all)

    def start(kube: KubeClient) -> list[str]:
        install(kube, rbac=True)
        if handle is not None:  # on kubesim each service runs as its own ServiceAccount
            for service in SERVICES:
                token = service_token(kube, service)
                kubeconfigs[service] = handle.kubeconfig_for(workdir / f"kubeconfig-{service}", token)
        processes.start_all()
        try:
            processes.wait_ready(60)
        except ServiceFailed as exc:
            raise CliError(f"a service did not start: {exc}") from exc
        return [f"{p.name:<14} pid {p.process.pid:<7} metrics {p.metrics_url}" for p in processes.running]

    said: dict[str, str] = {}

    def stop(kube: KubeClient) -> dict[str, int]:
        replicas = list(processes.running)
        codes = processes.stop_all()
        said.update((p.name, p.tail(LAST_WORDS_LINES)) for p in replicas if codes.get(p.name))
        return codes

    return _Services(
        kubeconfig=kubeconfig,
        config_document=document,
        authorizer=access_record(handle) if handle is not None else None,
        handle=handle,
        start=start,
        stop=stop,
        last_words=lambda: said,
        metrics=lambda kube: [p.metrics_url for p in processes.running],
        logs=str(workdir / "logs"),
    )


def _redis_users(url: str, prefix: str, workdir: Path) -> dict[str, tuple[str, Path]]:
    users = {}
    for service, password in demo_cluster.redis_users(url, None, prefix).items():
        path = write_private(workdir / f"redis-{service}.password", password)
        users[service] = (f"podherd-{service}", path)
    return users


def _in_cluster(opts: DemoOptions, stack: contextlib.ExitStack, workdir: Path) -> _Services:
    cluster = demo_cluster.start(stack, workdir)
    assert cluster.handle.sim is not None

    def start(kube: KubeClient) -> list[str]:
        head = f"kubectl apply -k deploy/ (workers cordoned meanwhile): pods on {demo_cluster.SYSTEM_NODE}"
        return [head, *demo_cluster.pod_lines(kube)]

    return _Services(
        kubeconfig=cluster.handle.kubeconfig,
        config_document=demo_cluster.client_config(cluster),
        authorizer=cluster.handle.sim.authorizer,
        handle=cluster.handle,
        start=start,
        stop=lambda kube: demo_cluster.stop(cluster, kube, IN_CLUSTER_STOP),
        last_words=lambda: demo_cluster.last_words(cluster),
        metrics=lambda kube: [line.rsplit(" ", 1)[1] for line in demo_cluster.pod_lines(kube)],
        logs="kubectl logs -n podherd <pod>",
    )


def _roles_held(summary: dict[str, Any]) -> bool | str:
    """True only when each service ran under its own ServiceAccount with RBAC on and nothing was denied;
    a reason (not a pass) against an outside cluster, where the services used the given credentials."""
    wanted = {"system:serviceaccount:{}:{}".format(*service_account(s)) for s in SERVICES}
    gate = "system:serviceaccount:{}:{}".format(*service_account("gate"))  # where deploy/ runs it too
    if not summary["rbac_identities"]:
        return "not checked: the services used the --kubeconfig credentials"
    return not summary.get("rbac_denials") and wanted <= set(summary["rbac_identities"]) <= wanted | {gate}


def _config_document(prefix: str, nats_url: str, redis_url: str, *, kubeconfig: Path) -> dict[str, Any]:
    return {
        "nats": {"url": nats_url, "subjectPrefix": prefix},
        "redis": {"url": redis_url, "keyPrefix": prefix},
        "kubernetes": {"kubeconfig": str(kubeconfig)},
        "replica": "demo",
        "http": {"host": "127.0.0.1", "port": 0},
        "logging": {"level": "INFO", "format": "json"},
        "watcher": {"checkpointInterval": "500ms"},
    }


async def _defragment(
    config: PodherdConfig, kube: KubeClient, opts: DemoOptions, *, out: TextIO
) -> dict[str, Any]:
    chosen = await asyncio.to_thread(defrag_command.plan_cluster, config, None)
    print(f"\nplan: empty {chosen.node} so that {chosen.pending.key} can schedule", file=out)
    for move in chosen.moves:
        print(f"  move {move.pod} from {move.source} to {move.target}", file=out)
    store = redis_client.connect(config.redis)
    watchdog = deployment_watchdog(kube, store, config, ignore_pods=frozenset({chosen.pending.key}))
    stop = asyncio.Event()
    watching = asyncio.create_task(watchdog.run(stop))
    sender = client.Sender.of(config)
    subjects = sender.subjects
    try:
        intents = defrag_command.intents(chosen, "podherd-demo")
        async with client.nats_client(config) as nc:
            replies = await client.gather_replies(nc, sender, intents, within=30)
        jobs = sorted({r.job for r in replies if r.job})
        print(f"published {len(intents)} intents -> jobs {', '.join(jobs)}", file=out)
        namespace, _, pod = chosen.pending.key.partition("/")
        refused = await demo_mistyped.create(kube, namespace, pod)
        typo = f"{demo_mistyped.NAME} with spec.mode: evictdirectly (a typo)"
        if refused is None:
            print(f"created {typo}: it must end InvalidSpec\n", file=out)
        else:
            print(f"{typo} refused by the admission gate: {refused}\n", file=out)
        await _follow(kube, chosen, jobs, watchdog=watchdog, within=opts.timeout, out=out)
        await _cleaned_up(kube, CLEANUP_WAIT)
        async with client.nats_client(config) as nc:
            mistyped = await demo_mistyped.outcome(kube, nc, subjects, refused=refused)
    finally:
        stop.set()
        findings = await watching
        await store.aclose()
    try:
        facts = await _facts(kube, chosen, jobs, findings=findings)
    finally:
        await kube.aclose()  # this loop's connections; the summary reads on through the blocking pool
    facts["_stream"] = subjects.audit_stream
    facts["mistyped"] = mistyped
    return facts


async def _follow(
    kube: KubeClient, chosen: Defrag, jobs: list[str], *, watchdog: Watchdog, within: float, out: TextIO
) -> None:
    live = out.isatty()
    deadline = time.monotonic() + within
    last = ""
    while time.monotonic() < deadline:
        state = await demo_progress.state(kube, chosen, jobs)
        line = demo_progress.line(state, watchdog.findings)
        if live:
            out.write("\r\033[K" + line)
            out.flush()
        elif line != last:
            print(line, file=out, flush=True)
        last = line
        if state["ended"] == len(jobs) and state["pending_phase"] == "Running":
            break
        await asyncio.sleep(0.25)
    if live:
        out.write("\n")


async def _cleaned_up(kube: KubeClient, within: float) -> None:
    """Wait (up to `within` seconds) for the ended jobs' Reservations to go: the tracker asks the executor
    to delete them as each job ends, so they outlive their jobs by a moment."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not ((await kube.get_json(paths.RESERVATIONS) or {}).get("items")):
            return
        await asyncio.sleep(0.1)


async def _facts(kube: KubeClient, chosen: Defrag, jobs: list[str], *, findings: Findings) -> dict[str, Any]:
    phases: dict[str, str] = {}
    for name in jobs:
        job = await kube.get_json(paths.job(name)) or {}
        status = job.get("status") or {}
        phases[name] = f"{status.get('phase') or 'Pending'} {status.get('reason') or ''}".strip()
        if status.get("phase") == "Failed":
            phases[name] += f": {status.get('message') or ''}"
    namespace, _, name = chosen.pending.key.partition("/")
    pending = await kube.get_json(paths.pod(namespace, name)) or {}
    pods = msgspec.json.decode(await kube.arequest("GET", paths.PODS)).get("items") or []
    on_node = sorted(
        f"{p['metadata']['namespace']}/{p['metadata']['name']}"
        for p in pods
        if (p.get("spec") or {}).get("nodeName") == chosen.node
    )
    reservations = await kube.get_json(paths.RESERVATIONS) or {}
    return {
        "jobs": phases,
        "jobs_succeeded": sum(1 for p in phases.values() if p.startswith("Succeeded")),
        "pending_pod": chosen.pending.key,
        "pending_pod_phase": (pending.get("status") or {}).get("phase"),
        "pending_pod_node": (pending.get("spec") or {}).get("nodeName"),
        "emptied_node": chosen.node,
        "pods_on_emptied_node": on_node,
        "reservations_left": len(reservations.get("items") or []),
        **findings.as_dict(),
    }


def _print_summary(summary: dict[str, Any], out: TextIO) -> bool:
    checks = {
        "jobs succeeded": summary["jobs_succeeded"] == len(summary["jobs"]) > 0,
        f"{summary['pending_pod']} scheduled": summary["pending_pod_phase"] == "Running",
        f"{summary['emptied_node']} emptied for it": summary["pods_on_emptied_node"]
        == [summary["pending_pod"]],
        "no replacement pod ever Pending": summary["replacement_pods_ever_pending"] == 0,
        "no disruption limit exceeded": summary["limits_exceeded"] == 0,
        "every eviction into room read Available and unbound": summary["evictions_checked_against_room"]
        == summary["jobs_succeeded"]
        and not summary["evictions_without_room"],
        "no job Succeeded before its old pod was gone": not summary["succeeded_before_old_pod_gone"],
        "no Reservation left": summary["reservations_left"] == 0,
        "an invalid job refused, or ended InvalidSpec once": demo_mistyped.ended_once(summary["mistyped"]),
        "every service within its ClusterRole": _roles_held(summary),
        "every service ended with 0 on SIGTERM": not summary["services_failed"]
        if summary["services_stopped"]
        else "not checked: --keep keeps them up",
    }
    print("\nsummary", file=out)
    print(f"  jobs: {summary['jobs_succeeded']}/{len(summary['jobs'])} succeeded", file=out)
    node = summary["pending_pod_node"]
    print(f"  {summary['pending_pod']}: {summary['pending_pod_phase']} on {node}", file=out)
    print(f"  {summary['emptied_node']} now runs: {', '.join(summary['pods_on_emptied_node'])}", file=out)
    print(f"  replacement pods ever Pending: {summary['replacement_pods_ever_pending']}", file=out)
    print(
        f"  disruption limits exceeded: {summary['limits_exceeded']} "
        f"({summary['samples']} samples of the ledger and the cluster)",
        file=out,
    )
    print(f"  audit stream: {summary['audit']}", file=out)
    metrics = summary["metrics"]
    shown = ", ".join(metrics) if isinstance(metrics, list) else f"{metrics} (--keep keeps them up)"
    print(f"  metrics: {shown}", file=out)
    print(f"  logs: {summary['logs']}", file=out)
    for name, words in summary["services_failed"].items():
        code = summary["services_exit_codes"][name]
        print(f"  {name} exited with {code}; its last words:", file=out)
        for line in words.splitlines()[-LAST_WORDS_LINES:]:
            print(f"    {line}", file=out)
    for name, passed in checks.items():
        if isinstance(passed, str):
            print(f"  [--] {name}: {passed}", file=out)
        else:
            print(f"  [{'ok' if passed else 'FAILED'}] {name}", file=out)
    return all(checks.values())
