"""What decides whether a job may start at all, apart from any I/O: the facts read of a job, its pod and
workload, and the filters a pod that can never be moved fails (the arbitrator's, and the gate's before it
turns an eviction into a job)."""
