"""The watchdog: the invariants a run must hold (limits, room before eviction, availability, Surge's
floor, timeouts), read from the cluster and the audit stream. The demo, the chaos runs and the tests use it
to prove a run; no service imports it."""
