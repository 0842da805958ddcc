"""Workload kinds: how a pod's controller kind is named, which configured kinds are accepted, and the
watcher's role for them (each kind and its /scale, nothing wider)."""

from __future__ import annotations

import pytest

from shared.access.workload_rbac import workload_rbac
from shared.api.workload_kinds import WorkloadKind, of_reference
from shared.config.loader import config_from_dict
from shared.config.model import ConfigError

CLONESETS = {"kind": "CloneSet", "group": "apps.kruise.io", "version": "v1alpha1", "resource": "clonesets"}


@pytest.mark.parametrize(
    ("api_version", "kind", "named"),
    [
        ("apps/v1", "Deployment", "Deployment"),
        ("v1", "ReplicationController", "ReplicationController"),
        ("apps.kruise.io/v1alpha1", "CloneSet", "CloneSet.apps.kruise.io"),
        # OpenKruise's Advanced StatefulSet is not apps/v1's.
        ("apps.kruise.io/v1beta1", "StatefulSet", "StatefulSet.apps.kruise.io"),
        ("argoproj.io/v1alpha1", "Rollout", "Rollout.argoproj.io"),
    ],
)
def test_a_kind_is_named_with_its_group_unless_core_or_apps(api_version: str, kind: str, named: str) -> None:
    assert of_reference(api_version, kind) == named


def test_replication_controllers_are_read_by_default_and_more_kinds_may_be_added() -> None:
    default = config_from_dict({}).watcher.workload_kinds
    assert [k.name for k in default] == ["ReplicationController"]
    added = config_from_dict({"watcher": {"workloadKinds": [CLONESETS]}}).watcher.workload_kinds
    assert [k.name for k in added] == ["CloneSet.apps.kruise.io"]


@pytest.mark.parametrize(
    ("kinds", "key", "says"),
    [
        ([{**CLONESETS, "resource": ""}], "watcher.workloadKinds[0].resource", "must not be empty"),
        ([CLONESETS, CLONESETS], "watcher.workloadKinds[1].kind", "CloneSet.apps.kruise.io is listed twice"),
        (
            [{"kind": "Deployment", "group": "apps", "resource": "deployments"}],
            "watcher.workloadKinds[0].kind",
            "Deployment is read from its own objects",
        ),
    ],
)
def test_a_workload_kind_that_cannot_work_is_refused_naming_it(
    kinds: list[dict[str, str]], key: str, says: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        config_from_dict({"watcher": {"workloadKinds": kinds}})
    assert refused.value.key == key and says in str(refused.value)


def test_the_watchers_role_grants_each_added_kind_and_its_scale_and_nothing_else() -> None:
    default = WorkloadKind(kind="ReplicationController", resource="replicationcontrollers")
    assert workload_rbac([default]) == []  # deploy/rbac grants it
    role, binding = workload_rbac([default, WorkloadKind(**CLONESETS)])
    assert role["rules"] == [
        {"apiGroups": ["apps.kruise.io"], "resources": ["clonesets"], "verbs": ["list", "watch"]},
        {"apiGroups": ["apps.kruise.io"], "resources": ["clonesets/scale"], "verbs": ["get"]},
    ]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "podherd-watcher", "namespace": "podherd"}
    ]
