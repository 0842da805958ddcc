"""The watcher's role for the configured workload kinds that `deploy/rbac` does not grant already: `list`
and `watch` on each kind and `get` on its `/scale`, and nothing wider (no wildcard)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shared.api.workload_kinds import WorkloadKind, default_workload_kinds

ROLE = "podherd-watcher-workloads"


def workload_rbac(kinds: Sequence[WorkloadKind], namespace: str = "podherd") -> list[dict[str, Any]]:
    """A ClusterRole and its binding to the watcher's ServiceAccount; none when every kind is a default."""
    granted = {k.name for k in default_workload_kinds()}
    rules: list[dict[str, Any]] = []
    for kind in kinds:
        if kind.name in granted:
            continue
        rules.append({"apiGroups": [kind.group], "resources": [kind.resource], "verbs": ["list", "watch"]})
        rules.append({"apiGroups": [kind.group], "resources": [f"{kind.resource}/scale"], "verbs": ["get"]})
    if not rules:
        return []
    rbac = "rbac.authorization.k8s.io"
    return [
        {"apiVersion": f"{rbac}/v1", "kind": "ClusterRole", "metadata": {"name": ROLE}, "rules": rules},
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": ROLE},
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": ROLE},
            "subjects": [{"kind": "ServiceAccount", "name": "podherd-watcher", "namespace": namespace}],
        },
    ]
