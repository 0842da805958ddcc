"""One planning run: the cluster read, the policies planned on it in order, and the plan's first wave sent
as intents (a later wave needs what the first frees: the next run plans it again, on the cluster then).

De-duplicated against jobs in flight: nothing is planned while a job this planner asked for is still
running, and no pod with a job in flight is moved. The intents are keyed by the plan, so a run repeated
(a replica taking the lease over mid-run) makes no second job."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nats.aio.client import Client as NatsClient

from services.planner import metrics
from shared.access.reviews import token_subject
from shared.api import codec, paths
from shared.api.messages import IntentReply, MigrationIntent
from shared.api.names import ANNOTATION_CLAIMED_REQUESTER, ANNOTATION_REQUESTER
from shared.api.pmj import TERMINAL_PHASES
from shared.api.pmj_read import pod_of
from shared.config.model import PodherdConfig
from shared.intake.intent_requests import bearer, intent_subject
from shared.kube.client import KubeClient, KubeError
from shared.nats import bus
from shared.rebalance.intents import move_intents, plan_stamp
from shared.rebalance.planning import Caps, Planning
from shared.rebalance.policy_run import PolicyOptions, run_policy
from shared.rebalance.snapshot import (
    OPTIONAL_LISTS,
    recent_moves,
    reserving_schedulers,
    snapshot_of,
    window_start,
)

log = logging.getLogger(__name__)
ANSWER_WITHIN = 10.0  # seconds a tracker has to answer an intent


class Cycle:
    def __init__(self, config: PodherdConfig, nc: NatsClient, kube: KubeClient) -> None:
        self.config, self.nc, self.kube = config, nc, kube
        self.subjects = bus.Subjects(config.nats.subject_prefix)

    async def once(self) -> int:
        """One run; how many moves the trackers took."""
        planner = self.config.planner
        jobs = await self.kube.list_items(paths.JOBS, "")
        active = [j for j in jobs if (j.get("status") or {}).get("phase") not in TERMINAL_PHASES]
        ours = self.ours()
        mine = [j for j in active if ours(_annotations(j))]
        if mine:
            log.info("its last moves are still in flight (%d jobs): nothing planned", len(mine))
            metrics.RUNS.labels("waiting").inc()
            return 0
        planning = await self._planning(busy={pod_of(j) for j in active}, jobs=jobs)
        for policy in planner.policies:
            options = PolicyOptions(
                policy.name,
                {str(k): v for k, v in policy.thresholds.items()},
                {str(k): v for k, v in policy.target_thresholds.items()},
                policy.number_of_nodes,
            )
            measure = run_policy(planning, options)
            log.info("%s: %s %g -> %g", policy.name, measure.name, measure.before, measure.after)
        waves = planning.waves()
        if not waves:
            metrics.RUNS.labels("nothing").inc()
            return 0
        intents = move_intents(
            waves[0],
            requester=planner.requester,
            kind="planner",
            reason="planner",
            stamp=plan_stamp(planning.moves),
        )
        taken = 0
        for intent in intents:
            taken += await self._send(intent)
        metrics.RUNS.labels("sent").inc()
        log.info("sent %d of %d moves (%d waves planned)", taken, len(intents), len(waves))
        return taken

    def ours(self) -> Callable[[dict[str, str]], bool]:
        """Whether a job's annotations say this planner asked for it: the requester the tracker verified
        (its ServiceAccount's, in `kubernetes` mode; a claim scoped only by NATS permissions otherwise)."""
        mode, claimed = self.config.intents.authorization, self.config.planner.requester
        if mode == "kubernetes":
            me = own_username(self.config.intents.token_file)
            return lambda a: me is not None and a.get(ANNOTATION_REQUESTER) == me
        doors = f"nats:{self.subjects.intent_request}."
        return lambda a: (
            a.get(ANNOTATION_CLAIMED_REQUESTER) == claimed
            and (mode == "none" or a.get(ANNOTATION_REQUESTER, "").startswith(doors))
        )

    async def _planning(self, *, busy: set[str], jobs: list[dict[str, Any]]) -> Planning:
        planner = self.config.planner
        since = window_start(planner.recent)
        optional = {name: await self._optional(path) for name, (path, _) in OPTIONAL_LISTS.items()}
        cluster, candidates = snapshot_of(
            nodes=await self.kube.list_items(paths.NODES, ""),
            pods=await self.kube.list_items(paths.PODS, ""),
            moved_since=since,
            **optional,
        )
        caps = Caps(
            planner.max_no_of_pods_to_evict_per_node,
            planner.max_no_of_pods_to_evict_per_namespace,
            planner.max_no_of_pods_to_evict_total,
        )
        return Planning.of(
            cluster,
            [c for c in candidates if c.key not in busy],
            caps=caps,
            schedulers=reserving_schedulers(self.config.migration_controller),
            recent=recent_moves(jobs, since=since),
        )

    async def _optional(self, path: str) -> list[dict[str, Any]]:
        """A list the plan can do without (`OPTIONAL_LISTS`)."""
        try:
            return await self.kube.list_items(path, "")
        except KubeError as exc:
            log.warning("cannot list %s (%s): the plan goes on without it", path, exc)
            return []

    async def _send(self, intent: MigrationIntent) -> int:
        intents = self.config.intents
        subject = intent_subject(self.subjects, intents.authorization, namespace=intent.pod.namespace)
        msg = await self.nc.request(
            subject, codec.encode(intent), timeout=ANSWER_WITHIN, headers=bearer(intents.token_file)
        )
        reply = codec.decode(msg.data, IntentReply)
        if reply.ok:
            metrics.MOVES.labels("taken").inc()
            return 1
        error = reply.error
        log.warning(
            "move of %s/%s refused: %s",
            intent.pod.namespace,
            intent.pod.name,
            f"{error.code}: {error.message}" if error else "no reason given",
        )
        metrics.MOVES.labels(error.code if error else "refused").inc()
        return 0


def own_username(token_file: str | None) -> str | None:
    """Who the tracker verifies this planner's intents as: its token's subject (read at each run)."""
    try:
        return token_subject(Path(token_file).read_text().strip()) if token_file else None
    except OSError:
        return None


def _annotations(job: dict[str, Any]) -> dict[str, str]:
    return dict((job.get("metadata") or {}).get("annotations") or {})
