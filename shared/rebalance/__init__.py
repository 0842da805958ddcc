"""Rebalancing plans: which pods to move where, so a policy's measure improves and no move strands a pod.

A plan is made on a snapshot of the cluster (`shared.fit.Cluster`) and checks every move as kube-scheduler
would check its replacement's Reservation, on the cluster the earlier moves leave: a move may use room an
earlier move frees. The policies carry the descheduler's names and thresholds (LowNodeUtilization,
HighNodeUtilization, RemovePodsViolatingTopologySpreadConstraint) and Podherd's defragmentation for pending
pods. Pure: reading the cluster and sending the moves belong to the callers.
"""
