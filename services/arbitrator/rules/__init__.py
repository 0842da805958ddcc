"""The arbitrator's decision core: pure functions over facts, no I/O (an import contract keeps it so).

- `filters`: the non-retryable filters (the PodMigrationJob proposal, Koordinator's guide and
  code):
  a job that fails one ends Failed.
- `limits`: what admitting a job would take (slots, token buckets, budgets), and the reference evaluation
  of those limits that the Redis ledger script implements atomically.
- `order`: the sort order among jobs competing for the same room.
"""
