"""How Podherd names a workload's kind, and which kinds it knows the replica count of.

A pod's controller is named by its kind alone for Kubernetes' own groups (core and `apps`), and by
`<Kind>.<group>` otherwise (`CloneSet.apps.kruise.io`), so that two groups' kinds of one name (OpenKruise's
Advanced StatefulSet and `apps/v1`'s) are two workloads, as Koordinator's controller finder tells them
apart by group.
"""

from __future__ import annotations

from typing import Final

import msgspec

# Read from the objects themselves (their `spec.replicas`), watched by default.
BUILTIN: Final = ("Deployment", "ReplicaSet", "StatefulSet")


def group_of(api_version: str) -> str:
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def qualified(group: str, kind: str) -> str:
    """The kind as Podherd names it: alone for core and `apps`, else with its group."""
    return kind if group in ("", "apps") else f"{kind}.{group}"


def of_reference(api_version: str, kind: str) -> str:
    """The kind an owner reference (`apiVersion`, `kind`) names."""
    return qualified(group_of(api_version), kind)


class WorkloadKind(msgspec.Struct, rename="camel", kw_only=True, forbid_unknown_fields=True):
    """A workload kind whose replica count Podherd reads through its `/scale` subresource, as Koordinator's
    controller finder does for any controller: its pods then get the per-workload limits and the
    expected-replicas rule. The watcher needs `list` and `watch` on `resource` and `get` on its `/scale`
    (`podherd rbac` prints the role)."""

    kind: str
    resource: str  # the API resource (plural): clonesets
    group: str = ""  # "" for the core group
    version: str = "v1"

    @property
    def name(self) -> str:
        """How pods' workloads of this kind are named (`CloneSet.apps.kruise.io`)."""
        return qualified(self.group, self.kind)


def default_workload_kinds() -> list[WorkloadKind]:
    """What Koordinator's controller finder reads besides Deployments, ReplicaSets and StatefulSets, and
    every cluster serves: ReplicationControllers."""
    return [WorkloadKind(kind="ReplicationController", resource="replicationcontrollers")]
