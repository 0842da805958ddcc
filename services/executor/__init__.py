"""Executor: creates Reservations and performs evictions for admitted jobs, idempotently."""
