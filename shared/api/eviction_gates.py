"""The eviction gates `skipEvictionGates` names (pure data)."""

from __future__ import annotations

from typing import Final

# What `skipEvictionGates` can switch off: Koordinator's gates, by its names and with its meaning (its
# `EvictionGate`s: the workload, node, namespace and global limits, and the filters), then Podherd's own
# filters under names no Koordinator gate can be mistaken for. Missing pods and another active job for the
# same pod are not gates: they can never be skipped.
KOORDINATOR_GATES: Final = (
    "MaxUnavailablePerWorkload",
    "MaxMigratingPerWorkload",
    "MaxMigratingPerNode",
    "MaxMigratingPerNamespace",
    "MaxMigratingGlobally",
    "ExpectedReplicas",
    "PVC",
    "BarePods",
    "LocalStorage",
    "SystemCritical",
    "PriorityThreshold",
    "LabelSelector",
    "Namespaces",
    "NodeFit",
)
PODHERD_GATES: Final = tuple(
    f"podherd.io/{name}"
    for name in (
        "EvictionCost",
        "SchedulerName",
        "DaemonSet",
        "MirrorPod",
        "StaticPod",
        "Terminating",
        "NoEviction",
        "DoNotDisrupt",
        "MinPodAge",
    )
)
EVICTION_GATES: Final = frozenset(KOORDINATOR_GATES + PODHERD_GATES)
