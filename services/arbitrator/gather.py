"""What the rules need about queued jobs, gathered from Redis in three round trips however many jobs there
are: each job's pod (a fact), its workload and budgets (facts), its pod's failed migrations and its
workload's past ones (shared.stats), and, when ranking, how many of its workload's replicas hold a slot."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from services.arbitrator.fact_store import FactStore
from services.arbitrator.rules.facts import JobFacts, PodInfo, WorkloadFacts, workload_key
from shared.api.messages import PdbInfo, WorkloadInfo
from shared.api.pmj import ANNOTATION_MIGRATION_PRIORITY, PodMigrationJob
from shared.ledger import Ledger, as_text
from shared.slots import workload_slot
from shared.stats import MigrationStats, counts


@dataclass(frozen=True)
class Loaded:
    job: PodMigrationJob
    facts: JobFacts
    pod: PodInfo | None
    workload: WorkloadFacts | None
    pdbs: list[PdbInfo]
    migrating: int = 0  # replicas of its workload holding a slot now (when asked for)


@dataclass(frozen=True)
class _Workloads:
    """The second round trip's replies, by what they are."""

    infos: list[WorkloadInfo | None]
    past: list[Any]
    pdb_names: dict[str, list[str]]
    migrating: list[int]


class Gatherer:
    def __init__(self, facts: FactStore, stats: MigrationStats, ledger: Ledger, *, default_mode: str) -> None:
        self.facts, self.stats, self.ledger, self.default_mode = facts, stats, ledger, default_mode

    async def load(self, jobs: Sequence[PodMigrationJob], with_migrating: bool = False) -> list[Loaded]:
        refs = [
            (j.spec.pod_ref.namespace or "", j.spec.pod_ref.name or "") if j.spec.pod_ref else ("", "")
            for j in jobs
        ]
        idents = [f"{namespace}/{name}" for namespace, name in refs]
        pipe = self.ledger.client.pipeline(transaction=False)
        pipe.mget([self.facts.key("pod", i) for i in idents])
        self.stats.queue_pod_failures(pipe, idents)
        raw_pods, raw_failures = await pipe.execute()
        pods = self.facts.decode_many(raw_pods, PodInfo)
        keys = [workload_key(p.workload) if p and p.workload else "-" for p in pods]
        namespaces = sorted({p.namespace for p in pods if p is not None})
        workloads = await self._workloads(keys, namespaces, with_migrating, jobs=len(jobs))
        pdb_idents = [ident for names in workloads.pdb_names.values() for ident in names]
        pdbs = dict(zip(pdb_idents, await self.facts.get_many("pdb", pdb_idents, PdbInfo), strict=True))
        loaded = []
        rows = zip(
            jobs,
            refs,
            pods,
            counts(raw_failures),
            workloads.infos,
            workloads.past,
            workloads.migrating,
            strict=True,
        )
        for job, ref, pod, failed, info, past, moving in rows:
            workload = None
            if info is not None:
                workload = WorkloadFacts(
                    key=workload_key(info), replicas=info.replicas, past_migrations=int(past or 0)
                )
            budgets = _budgets(pod, workloads.pdb_names, pdbs)
            loaded.append(Loaded(job, self._job_facts(job, ref, failed), pod, workload, budgets, moving))
        return loaded

    async def _workloads(
        self, keys: list[str], namespaces: list[str], with_migrating: bool, *, jobs: int
    ) -> _Workloads:
        pipe = self.ledger.client.pipeline(transaction=False)
        pipe.mget([self.facts.key("workload", k) for k in keys])
        self.stats.queue_workload_migrations(pipe, keys)
        for namespace in namespaces:
            pipe.smembers(self.facts.pdb_index(namespace))
        if with_migrating:
            for key in keys:
                pipe.scard(self.ledger.slot_set(workload_slot(key)))
        replies = await pipe.execute()
        pdb_names = {
            ns: sorted(as_text(n) for n in names)
            for ns, names in zip(namespaces, replies[2 : 2 + len(namespaces)], strict=True)
        }
        migrating = [int(n) for n in replies[2 + len(namespaces) :]] or [0] * jobs
        return _Workloads(self.facts.decode_many(replies[0], WorkloadInfo), replies[1], pdb_names, migrating)

    def _job_facts(self, job: PodMigrationJob, ref: tuple[str, str], failed: int) -> JobFacts:
        annotations = job.metadata.annotations or {}
        try:
            migration_priority = int(annotations.get(ANNOTATION_MIGRATION_PRIORITY, "0"))
        except ValueError:
            migration_priority = 0
        created = job.metadata.creation_timestamp
        return JobFacts(
            name=job.metadata.name or "",
            uid=job.metadata.uid or "",
            pod_namespace=ref[0],
            pod_name=ref[1],
            mode=job.spec.mode or self.default_mode,
            created_at=created.timestamp() if created else 0.0,
            migration_priority=migration_priority,
            failed_attempts=failed,
        )


def _budgets(
    pod: PodInfo | None, names: dict[str, list[str]], pdbs: dict[str, PdbInfo | None]
) -> list[PdbInfo]:
    """The budgets whose selector selects the pod."""
    if pod is None:
        return []
    found = (pdbs.get(ident) for ident in names.get(pod.namespace, []))
    return [pdb for pdb in found if pdb is not None and _selects(pdb.selector, pod.labels)]


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    """A budget's selector (matchLabels; an empty one selects nothing, as policy/v1 reads it) and labels."""
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())
