"""Planner: the rebalancing policies on an interval, their moves sent as intents under its own identity.
Off unless `planner.enabled`; one replica plans at a time (a lease in NATS KV)."""
