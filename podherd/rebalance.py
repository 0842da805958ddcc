"""`podherd plan --policy NAME` and `podherd rebalance --policy NAME`: a rebalancing plan on the cluster as
it is now, shown (what-if) or carried out as jobs.

The cluster is read once (nodes, pods, the room Reservations hold, bound volumes, namespaces) and planned
by `shared.rebalance`. Carried out, each move is an intent for a job with its target node and
ReservationFirst, admitted under every limit and budget like any job (and its room checked again by the
scheduler when its Reservation is made); then each job is followed, as `drain` follows its jobs.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from podherd import drain
from podherd.client import Sender, gather_replies, kube_client, kube_get, nats_client, now_utc
from podherd.errors import CliError
from shared import bus
from shared.api import paths
from shared.api.messages import MigrationIntent, PodKey
from shared.config import PodherdConfig
from shared.durations import parse_duration
from shared.fit.cluster import Cluster, Held
from shared.fit.views import VolumeView, node_view, pod_view, volume_view
from shared.quantity import milli
from shared.rebalance import policies
from shared.rebalance.candidates import Candidate, candidate
from shared.rebalance.planning import Caps, Planning, fill

POLICIES = ("LowNodeUtilization", "HighNodeUtilization", "RemovePodsViolatingTopologySpreadConstraint")
RESERVATIONS = "/apis/scheduling.koordinator.sh/v1alpha1/reservations"


@dataclass
class Outcome:
    policy: str
    planning: Planning
    measure: policies.Measure
    before: dict[str, dict[str, float]]
    after: dict[str, dict[str, float]]


def read_cluster(config: PodherdConfig, *, moved_since: str) -> tuple[Cluster, list[Candidate]]:
    with kube_client(config) as kube:
        nodes = [node_view(n) for n in kube_get(kube, paths.NODES).get("items") or []]
        pod_objs = kube_get(kube, paths.PODS).get("items") or []
        reservations = _items(kube, RESERVATIONS)
        claims = _items(kube, "/api/v1/persistentvolumeclaims")
        volumes = {v["metadata"]["name"]: v for v in _items(kube, "/api/v1/persistentvolumes")}
        namespaces = _items(kube, "/api/v1/namespaces")
    bound: dict[str, VolumeView] = {}
    for claim in claims:
        name = (claim.get("spec") or {}).get("volumeName")
        if name in volumes:
            bound[f"{claim['metadata']['namespace']}/{claim['metadata']['name']}"] = volume_view(
                volumes[name]
            )
    cluster = Cluster.of(
        nodes,
        [pod_view(p) for p in pod_objs],
        held=[h for h in map(held_room, reservations) if h is not None],
        volumes=bound,
        namespace_labels={n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in namespaces},
    )
    placed = [p for p in pod_objs if (p.get("spec") or {}).get("nodeName")]
    return cluster, [candidate(p, moved_since=moved_since) for p in placed]


def _items(kube: Any, path: str) -> list[dict[str, Any]]:
    try:
        return list(kube_get(kube, path).get("items") or [])
    except CliError:
        return []  # a cluster without Koordinator's Reservations holds no room for them


def held_room(obj: Mapping[str, Any]) -> Held | None:
    """An Available Reservation's room still unallocated, on its node, for the pods it names."""
    status = obj.get("status") or {}
    if status.get("phase") != "Available" or not status.get("nodeName"):
        return None
    allocatable = {k: milli(v) for k, v in (status.get("allocatable") or {}).items()}
    allocated = {k: milli(v) for k, v in (status.get("allocated") or {}).items()}
    room = {k: max(0, v - allocated.get(k, 0)) for k, v in allocatable.items() if k != "pods"}
    owners = frozenset(
        f"{ref['object'].get('namespace')}/{ref['object'].get('name')}"
        for ref in (obj.get("spec") or {}).get("owners") or ()
        if ref.get("object")
    )
    return Held(obj["metadata"]["name"], str(status["nodeName"]), room, owners)


def make_plan(args: Any, config: PodherdConfig) -> Outcome:
    moved_since = (now_utc() - timedelta(seconds=parse_duration(args.recent))).strftime("%Y-%m-%dT%H:%M:%SZ")
    cluster, pods = read_cluster(config, moved_since=moved_since)
    controller = config.migration_controller
    reserving = controller.default_job_mode == "ReservationFirst"
    caps = Caps(args.max_pods_per_node, args.max_pods_per_namespace, args.max_pods_total)
    planning = Planning.of(
        cluster, pods, caps=caps, schedulers=frozenset(controller.scheduler_names) if reserving else None
    )
    before = {n: fill(cluster, n) for n in sorted(cluster.nodes)}
    if args.policy == "LowNodeUtilization":
        measure = policies.low_node_utilization(
            planning,
            thresholds=args.thresholds,
            target_thresholds=args.target_thresholds,
            number_of_nodes=args.number_of_nodes,
        )
    elif args.policy == "HighNodeUtilization":
        measure = policies.high_node_utilization(planning, thresholds=args.thresholds)
    else:
        measure = policies.spread_repair(planning)
    after = {n: fill(cluster, n) for n in sorted(cluster.nodes)}
    return Outcome(args.policy, planning, measure, before, after)


def intents(outcome: Outcome, requester: str) -> list[MigrationIntent]:
    """One intent per move, keyed by the plan (the same plan sent twice is the same jobs)."""
    moves = outcome.planning.moves
    stamp = hashlib.sha256("|".join(f"{m.pod}>{m.target}" for m in moves).encode()).hexdigest()[:12]
    out = []
    for move in moves:
        namespace, name = move.pod.split("/", 1)
        out.append(
            MigrationIntent(
                idempotency_key=f"rebalance-{stamp}-{namespace}-{name}"[:200],
                pod=PodKey(namespace=namespace, name=name),
                requester=requester,
                target_node=move.target,
                mode="ReservationFirst",
                reason=f"{outcome.policy}: {move.why}"[:1024],
            )
        )
    return out


def execute(args: Any, config: PodherdConfig, outcome: Outcome) -> int:
    """Send the plan's moves as intents and follow their jobs to their end."""
    sent = intents(outcome, args.requester)
    if not sent:
        print("nothing to move")
        return 0
    sender = Sender.of(config, args.token_file)
    show = functools.partial(print, flush=True)

    async def run() -> int:
        started = now_utc()
        async with nats_client(config) as nc:
            replies = await gather_replies(nc, sender, sent, within=args.timeout)
            refused = [(i, r) for i, r in zip(sent, replies, strict=True) if not r.ok or not r.job]
            jobs = {
                str(r.job): f"{i.pod.namespace}/{i.pod.name}"
                for i, r in zip(sent, replies, strict=True)
                if r.job
            }
            for intent, reply in refused:
                why = reply.error.message if reply.error else "refused"
                print(f"error: {intent.pod.namespace}/{intent.pod.name}: {why}", file=sys.stderr)
            subjects = bus.Subjects(config.nats.subject_prefix)
            within = getattr(args, "follow_timeout", None)
            ended = await drain.follow(nc, subjects, jobs, since=started, within=within, show=show)
        failed = ended.failed()
        print(f"{len(jobs) - len(failed)} of {len(sent)} moves done", flush=True)
        for job, message in sorted(failed.items()):
            print(f"error: {jobs[job]}: {message}", file=sys.stderr)
        return 1 if failed or refused else 0

    return asyncio.run(run())
