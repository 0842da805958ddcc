"""The tracker's Redis keys (`<keyPrefix>:tracker:…`), spelled here only. Every replica reads and writes
them; nothing outside the tracker does (the statistics other services read are shared.ledger.stats')."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TrackerKeys:
    key_prefix: str

    @property
    def base(self) -> str:
        return f"{self.key_prefix}:tracker"

    # Per job, by uid (hashes): the arbitrator's decision, the pod the job was made for, its replacement, the
    # Reservation attempts asked for.
    @property
    def decisions(self) -> str:
        return f"{self.base}:decisions"

    @property
    def atomic_plans(self) -> str:
        """Set: atomic plans reserving room for their moves (their paused jobs' reconciles add them)."""
        return f"{self.base}:atomic-plans"

    @property
    def atomic_drains(self) -> str:
        """Set: nodes whose atomic drain is reserving room (their paused jobs' reconciles add them)."""
        return f"{self.base}:atomic-drains"

    @property
    def windows(self) -> str:
        """Hash: job uid -> the arbitrator's latest deferral for a disruption window (its opening)."""
        return f"{self.base}:windows"

    @property
    def deferrals(self) -> str:
        """Hash: job uid -> the arbitrator's latest deferral (what the job waits for, in its words)."""
        return f"{self.base}:deferrals"

    @property
    def pod_uids(self) -> str:
        return f"{self.base}:pod-uids"

    @property
    def pods_gone(self) -> str:
        """Jobs whose pod was seen gone: a pod's uid never comes back, so it is not read again."""
        return f"{self.base}:pods-gone"

    @property
    def replacement(self) -> str:
        return f"{self.base}:replacement"

    @property
    def attempts(self) -> str:
        """The latest Reservation attempt the tracker asked the executor for: which names to read."""
        return f"{self.base}:attempts"

    def reports(self, job_uid: str) -> str:
        """The executor's reports on a job, by step (hash)."""
        return f"{self.base}:reports:{job_uid}"

    # Per job, by name: its phase as last written, the workload it is in flight for, its lock, its deadline.
    @property
    def phases(self) -> str:
        return f"{self.base}:phases"

    def written(self, job: str) -> str:
        """The resourceVersions of the tracker's own writes of the job (its status, its annotations and
        reservationRef) that left it settled: their PMJ events, however late they come, bring nothing to
        decide (a set; it expires a while after the job's last such write)."""
        return f"{self.base}:written:{job}"

    @property
    def ended(self) -> str:
        """Per ended job, the resourceVersion it was left at once its tracker had carried its ending out
        whole (status, audit record, commands, release), or `stale` since an event of a Reservation it made
        or names (kept room taken later is cleaned up by its next reconcile). A reconcile that reads the job
        still at that version has nothing to do: it ends there (a hash)."""
        return f"{self.base}:ended"

    @property
    def workload_uid_of(self) -> str:
        return f"{self.base}:workload-uid-of"

    def lock(self, job: str) -> str:
        return f"{self.base}:lock:{job}"

    def lock_wanted(self, job: str) -> str:
        """Set while another reconcile waits for the job's lock: its release is announced then."""
        return f"{self.base}:lock-wanted:{job}"

    @property
    def deadlines(self) -> str:
        """Jobs by the time their ttl ends (sorted set)."""
        return f"{self.base}:deadlines"

    def deletion(self, pod_uid: str) -> str:
        """How a pod a job was made for is being deleted: "evicted" (the Eviction API) or "deleted"."""
        return f"{self.base}:deletion:{pod_uid}"

    # Which job a pod or a name points at.
    @property
    def pod_jobs(self) -> str:
        """namespace/pod -> the job made for that pod."""
        return f"{self.base}:pod-jobs"

    @property
    def replacement_jobs(self) -> str:
        """namespace/pod -> the job that claimed that pod as its replacement."""
        return f"{self.base}:replacement-jobs"

    @property
    def named(self) -> str:
        """A Reservation named by a job's reservationRef -> the job."""
        return f"{self.base}:named"

    @property
    def claims(self) -> str:
        """A replacement pod's uid -> the job that claimed it."""
        return f"{self.base}:claims"

    # Per workload (controller uid): replacements bound in its room, jobs waiting for one, jobs in flight.
    def pool(self, controller: str) -> str:
        return f"{self.base}:pool:{controller}"

    def waiting(self, controller: str) -> str:
        return f"{self.base}:waiting:{controller}"

    def in_flight(self, workload: str) -> str:
        return f"{self.base}:in-flight:{workload}"

    def room_kept(self, workload: str) -> str:
        return f"{self.base}:room-kept:{workload}"

    @property
    def collector_pass(self) -> str:
        return f"{self.base}:collector"
