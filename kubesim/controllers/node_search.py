"""How kube-scheduler searches the nodes for a pod (pkg/scheduler/schedule_one.go): it stops once it has
found enough feasible nodes, starting where its last search stopped; the best of them is kubesim.controllers.
node_scores' to choose."""

from __future__ import annotations

from collections.abc import Callable

from kubesim.apiserver.records import Obj

# kube-scheduler's bounds on the feasible nodes a search finds.
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


def feasible_nodes_to_find(nodes: int, percentage: int = 0) -> int:
    """How many feasible nodes kube-scheduler looks for before it stops searching (numFeasibleNodesToFind):
    every node below 100; else `percentageOfNodesToScore` of them (0: 50% less 1% per 125 nodes, at least
    5%), at least 100."""
    if nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return nodes
    if percentage <= 0:
        percentage = max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND, 50 - nodes // 125)
    return max(MIN_FEASIBLE_NODES_TO_FIND, nodes * min(percentage, 100) // 100)


def search(
    nodes: list[Obj],
    fit: Callable[[Obj], tuple[tuple[str, ...], float]],
    *,
    start: int,
    wanted: int,
    reasons: dict[str, int],
) -> tuple[list[tuple[float, Obj]], int]:
    """The first `wanted` feasible nodes from `start` on, each with its room score (lower is better), and
    how many nodes were examined; each node `fit` refuses is counted in `reasons` under each reason it
    gives."""
    found: list[tuple[float, Obj]] = []
    examined = 0
    for examined in range(1, len(nodes) + 1):
        node = nodes[(start + examined - 1) % len(nodes)]
        rejected, score = fit(node)
        if rejected:
            for reason in rejected:
                reasons[reason] = reasons.get(reason, 0) + 1
            continue
        found.append((score, node))
        if len(found) >= wanted:
            break
    return found, examined
