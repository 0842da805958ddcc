"""The planner's Prometheus metrics."""

from prometheus_client import Counter, Gauge

LEADER = Gauge("podherd_planner_leader", "1 while this replica holds the planner's lease")
RUNS = Counter(
    "podherd_planner_runs_total",
    "Planning runs: sent (moves sent), nothing (no move to make), waiting (its last moves in flight)",
    ["outcome"],
)
MOVES = Counter("podherd_planner_moves_total", "Moves sent as intents, by the trackers' answer", ["answer"])
