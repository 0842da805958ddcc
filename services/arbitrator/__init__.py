"""Arbitrator: stateless admission of pending jobs; every decision is one atomic step on the Redis ledger."""
