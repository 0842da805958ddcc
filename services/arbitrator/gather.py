"""What the rules need about queued jobs (their facts as queued), gathered from Redis in three round trips
however many jobs there are: each job's pod (a fact), its workload and budgets (facts), its pod's failed
migrations and its workload's past ones (shared.ledger.stats), and, when ranking, how many of its workload's
replicas hold a slot."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from services.arbitrator.fact_store import FactStore
from shared.api.messages import PdbInfo, WorkloadInfo
from shared.ledger.scripts import as_text
from shared.ledger.slots import workload_slot
from shared.ledger.stats import MigrationStats, counts
from shared.ledger.store import Ledger
from shared.rules.facts import JobFacts, PodInfo, WorkloadFacts, workload_key


class Loaded(msgspec.Struct, frozen=True):
    facts: JobFacts
    pod: PodInfo | None
    workload: WorkloadFacts | None
    pdbs: list[PdbInfo]
    migrating: int = 0  # replicas of its workload holding a slot now (when asked for)


class _Workloads(msgspec.Struct, frozen=True):
    """The second round trip's replies, by what they are."""

    infos: list[WorkloadInfo | None]
    past: list[Any]
    pdb_names: dict[str, list[str]]
    migrating: list[int]


class Gatherer:
    def __init__(self, facts: FactStore, stats: MigrationStats, ledger: Ledger) -> None:
        self.facts, self.stats, self.ledger = facts, stats, ledger

    async def load(self, jobs: Sequence[JobFacts], with_migrating: bool = False) -> list[Loaded]:
        idents = [f"{job.pod_namespace}/{job.pod_name}" for job in jobs]
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
            pods,
            counts(raw_failures),
            workloads.infos,
            workloads.past,
            workloads.migrating,
            strict=True,
        )
        for job, pod, failed, info, past, moving in rows:
            workload = None
            if info is not None:
                workload = WorkloadFacts(
                    key=workload_key(info), replicas=info.replicas, past_migrations=int(past or 0)
                )
            budgets = _budgets(pod, workloads.pdb_names, pdbs)
            facts = msgspec.structs.replace(job, failed_attempts=failed) if failed else job
            loaded.append(Loaded(facts, pod, workload, budgets, moving))
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
                pipe.scard(self.ledger.keys.member("slots", workload_slot(key)))
        replies = await pipe.execute()
        pdb_names = {
            ns: sorted(as_text(n) for n in names)
            for ns, names in zip(namespaces, replies[2 : 2 + len(namespaces)], strict=True)
        }
        migrating = [int(n) for n in replies[2 + len(namespaces) :]] or [0] * jobs
        return _Workloads(self.facts.decode_many(replies[0], WorkloadInfo), replies[1], pdb_names, migrating)


def _budgets(
    pod: PodInfo | None, names: dict[str, list[str]], pdbs: dict[str, PdbInfo | None]
) -> list[PdbInfo]:
    """The budgets whose selector selects the pod."""
    if pod is None:
        return []
    found = (pdbs.get(ident) for ident in names.get(pod.namespace, []))
    return [pdb for pdb in found if pdb is not None and pdb.selects(pod.labels)]
