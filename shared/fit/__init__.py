"""Whether a pod fits a node, as kube-scheduler decides it: Podherd's one answer for the planner, `podherd
plan` and the intake's `nodeFit`.

`Fit(cluster, pod).reasons(node)` runs the default profile's filters in its order (NodeUnschedulable,
NodeName, TaintToleration, NodeAffinity, NodeResourcesFit, VolumeBinding, VolumeZone, PodTopologySpread,
InterPodAffinity) and gives the first failing plugin's reasons in its own words; `unavailable` words the
whole answer as the scheduler's FailedScheduling event does. The cluster (`Cluster`) is the scheduler's
cache: what is bound where, the room Reservations hold, the volumes claims are bound to.

It is written apart from kubesim's scheduler, which Podherd's tests run it against: neither reuses the
other's decisions, so where they disagree, one of them is wrong.
"""
