"""`podherd submit --via kubernetes` and `podherd drain --via kubernetes`: through the API server with the
kubeconfig's own credentials (a bearer token, a client certificate, an exec plugin: whatever kubectl
accepts), for a person who holds no ServiceAccount token for Podherd's intent subject.

The API server authenticates the person and its RBAC authorizes every write, as for kubectl: a migration
needs `create podmigrationjobs.scheduling.koordinator.sh` (cluster-wide, as PodMigrationJobs are
cluster-scoped); a drain `get` and `patch` on the node, `list pods`, and `create podmigrationjobs`. The
drain record carries the identity the API server reports for the credentials (SelfSubjectReview); each
job's requester is recorded by Podherd's admission gate from the API server's word on who wrote it, and the
gate asks RBAC, as that user, for every effect the job asks for (docs/operating/security.md).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from podherd.client import kube_client
from podherd.errors import EXIT_FAILED, CliError
from shared.api import paths
from shared.api.messages import DrainIntent, DrainReply, MigrationIntent
from shared.api.pmj import TERMINAL_PHASES
from shared.api.pmj_read import read_pmj
from shared.config.model import MigrationControllerArgs, PodherdConfig
from shared.intake.drain_writes import DrainRefused, DrainWrites
from shared.intake.intent_jobs import conflict, job_for
from shared.kube.client import KubeClient, KubeError

POLL_S = 0.5


def run(config: PodherdConfig, work: Callable[[KubeClient], Awaitable[int]]) -> int:
    """`work` with a client of the configured kubeconfig, closed after it on its event loop."""

    async def session() -> int:
        with kube_client(config) as kube:
            try:
                return await work(kube)
            finally:
                await kube.aclose()

    return asyncio.run(session())


def submit_command(config: PodherdConfig, intent: MigrationIntent, *, wait: bool, within: float) -> int:
    """`podherd submit --via kubernetes`: the job written; with `wait`, followed until it ends (0 only if it
    succeeded, else `EXIT_FAILED`)."""

    async def work(kube: KubeClient) -> int:
        name, created = await submit(kube, intent)
        print(f"job {name} {'created' if created else 'exists'}", flush=True)
        if not wait:
            return 0
        ended = await follow(kube, [name], within=within, show=functools.partial(print, flush=True))
        return 0 if ended.get(name, ("",))[0] == "Succeeded" else EXIT_FAILED

    return run(config, work)


async def whoami(kube: KubeClient) -> str:
    """The user the API server authenticates these credentials as (`kubectl auth whoami`)."""
    try:
        return await kube.whoami()
    except KubeError as exc:
        raise _refused("POST", paths.SELF_SUBJECT_REVIEWS, exc) from exc


async def submit(kube: KubeClient, intent: MigrationIntent) -> tuple[str, bool]:
    """The intent's PodMigrationJob, written as the kubeconfig's user: (its name, whether it is new)."""
    intent = msgspec.structs.replace(intent, requester=await whoami(kube))
    if not await _pod_there(kube, intent):  # as kubectl says it: no job is made for a pod that is not there
        raise CliError(f'pods "{intent.pod.name}" not found in namespace {intent.pod.namespace}')
    job = job_for(intent, requester=None)
    name = job.metadata.name or ""
    try:
        await kube.arequest("POST", paths.JOBS, body=msgspec.to_builtins(job))
        return name, True
    except KubeError as exc:
        if exc.status != 409:
            raise _refused("POST", paths.JOBS, exc) from exc
    found = await kube.get_json(paths.job(name))
    problem = conflict(read_pmj(found)[0], intent) if found else None
    if problem:
        raise CliError(problem)
    return name, False


async def _pod_there(kube: KubeClient, intent: MigrationIntent) -> bool:
    """Whether the pod exists, asked as the right a job's author needs anyway (a dry-run eviction: nothing
    is evicted); only its NotFound counts, any other answer leaves the job's own checks to judge."""
    namespace, name = intent.pod.namespace, intent.pod.name
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
        "deleteOptions": {"dryRun": ["All"]},
    }
    try:
        await kube.arequest("POST", f"{paths.pod(namespace, name)}/eviction", body=body)
    except KubeError as exc:
        return exc.status != 404
    return True


async def drain(kube: KubeClient, intent: DrainIntent, args: MigrationControllerArgs) -> DrainReply:
    """The drain's plan and, unless refused or a dry run, its writes: the node cordoned with its record,
    one job per pod, as the kubeconfig's user."""
    who = await whoami(kube)
    intent = msgspec.structs.replace(intent, requester=who)
    writes = DrainWrites(kube, args)
    try:
        node, plan = await writes.look(intent)
        reply = await writes.reply(node, plan)
        if reply.ok and not intent.dry_run:
            await writes.write(intent, node, plan=plan, reply=reply, requester=who, verified=False)
    except DrainRefused as refused:
        raise CliError(f"drain refused: {refused.error.code}: {refused.error.message}") from refused
    except KubeError as exc:
        raise _refused("the drain's", f"node/{intent.node}", exc) from exc
    return reply


async def follow(
    kube: KubeClient, jobs: list[str], *, within: float | None, show: Callable[[str], None]
) -> dict[str, tuple[str, str]]:
    """Each job's phase changes, shown as they are seen, until every job has ended (or `within` seconds
    pass): the phase and message each ended with, by name. A job already collected counts as ended.
    Read with a `get` each, every POLL_S: a watch would need `list` and `watch` on every PodMigrationJob in
    the cluster, more than a person needs to move their own pods."""
    deadline = None if within is None else time.monotonic() + within
    seen: dict[str, tuple[str, str]] = {}
    ended: dict[str, tuple[str, str]] = {}
    while len(ended) < len(jobs) and (deadline is None or time.monotonic() < deadline):
        for name in jobs:
            if name in ended:
                continue
            try:
                found = await kube.get_json(paths.job(name))
            except KubeError as exc:
                raise _refused("GET", paths.job(name), exc) from exc
            status: dict[str, Any] = (found or {}).get("status") or {}
            now = (str(status.get("phase") or "Pending"), str(status.get("message") or ""))
            if found is None:
                now = ("Collected", "ended and collected before it was seen")
            if now != seen.get(name):
                seen[name] = now
                show(f"{time.strftime('%H:%M:%S')} {name} {now[0]}{': ' + now[1] if now[1] else ''}")
            if found is None or now[0] in TERMINAL_PHASES:
                ended[name] = now
        if len(ended) < len(jobs):
            await asyncio.sleep(POLL_S)
    return ended


async def _call(kube: KubeClient, method: str, path: str, **options: Any) -> bytes:
    try:
        return await kube.arequest(method, path, **options)
    except KubeError as exc:
        raise _refused(method, path, exc) from exc


def _refused(what: str, where: str, exc: KubeError) -> CliError:
    if exc.status in (401, 403):
        return CliError(f"the API server refused {what} {where}: {exc.message}")
    return CliError(f"the Kubernetes API answered {what} {where} with {exc}")
