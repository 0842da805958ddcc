"""Who asked, and what they must be allowed to do for Podherd to do it for them (pure).

Podherd acts with its own ServiceAccounts' rights, so it moves a pod only for a requester who could have
moved it without Podherd. What each request needs, in RBAC's terms:

- a migration of pod P in namespace N: `create pods/eviction` in N (what `kubectl evict` needs); with a
  `targetNode`, also `create pods/binding` in N, because choosing the node is the scheduler's decision
  (the right kube-scheduler holds); with a priority above 0, `create podmigrationjobs/priority`. A `mode`
  needs nothing more: EvictDirectly is what an eviction is.
- a drain of node X: `patch nodes` on X (the cordon), `list pods` in every namespace (kubectl drain lists the
  node's pods cluster-wide), and in each namespace the drain moves pods from, `create pods/eviction`, or
  `delete pods` where the jobs delete (`evictionPolicy: Delete`, as `kubectl drain --disable-eviction`,
  and pods no controller recreates, which `--force` deletes).
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec


class Need(msgspec.Struct, frozen=True, kw_only=True):
    """One permission, as a SubjectAccessReview's `resourceAttributes` asks it."""

    verb: str
    resource: str
    group: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    def __str__(self) -> str:
        what = self.resource + (f"/{self.subresource}" if self.subresource else "")
        if self.group:
            what += f".{self.group}"
        if self.name:
            what += f" {self.name}"
        return f"{self.verb} {what}" + (f" in namespace {self.namespace}" if self.namespace else "")


class Identity(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A requester as the cluster knows it (a TokenReview's `status.user`) or as NATS proved it."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, list[str]] = msgspec.field(default_factory=dict)


ANONYMOUS = Identity(username="system:anonymous", groups=("system:unauthenticated",))


# A migration priority above 0 admits a job before others': a permission of its own that no built-in role
# grants (RBAC grants any resource name it is given, as for CertificateSigningRequest signers).
PRIORITY = Need(
    verb="create", group="scheduling.koordinator.sh", resource="podmigrationjobs", subresource="priority"
)


def migration_needs(namespace: str, pod: str, *, target_node: bool, priority: int = 0) -> list[Need]:
    needs = [Need(verb="create", resource="pods", subresource="eviction", namespace=namespace, name=pod)]
    if target_node:
        needs.append(
            Need(verb="create", resource="pods", subresource="binding", namespace=namespace, name=pod)
        )
    if priority > 0:
        needs.append(PRIORITY)
    return needs


def drain_node_needs(node: str) -> list[Need]:
    """What a drain of `node` needs before its pods are even looked at: the cordon and the listing."""
    return [Need(verb="patch", resource="nodes", name=node), Need(verb="list", resource="pods")]


def drain_pod_needs(namespaces: Iterable[str], *, deletes: bool, bare: Iterable[str] = ()) -> list[Need]:
    """What moving the drained pods needs, in each namespace they are in; `bare`: the namespaces of pods no
    controller recreates, which the drain deletes (`--force`)."""
    deleted = set(bare) | (set(namespaces) if deletes else set())
    evicted = set() if deletes else set(namespaces)
    return [
        *(Need(verb="create", resource="pods", subresource="eviction", namespace=n) for n in sorted(evicted)),
        *(Need(verb="delete", resource="pods", namespace=n) for n in sorted(deleted)),
    ]
