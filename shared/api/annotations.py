"""Pod annotations (and a pod condition) Podherd reads or writes, defined by the seeds, Koordinator and
Kubernetes; one spelling each."""

from __future__ import annotations

from typing import Final

# The PodMigrationJob proposal: an int32 eviction cost; MaxInt32 means "never evict".
EVICTION_COST: Final = "scheduling.koordinator.sh/eviction-cost"
# Koordinator's guide: SoftEviction marks the pod instead of removing it.
SOFT_EVICTION: Final = "scheduling.koordinator.sh/soft-eviction"
# Set by the scheduler on a pod that took a Reservation's room.
RESERVATION_ALLOCATED: Final = "scheduling.koordinator.sh/reservation-allocated"
# Koordinator's guide: lifts the object, node, namespace and workload limits.
EVICT: Final = "descheduler.alpha.kubernetes.io/evict"
# KEP-1397: evictions in background.
REQUEST_EVICT_ONLY: Final = "descheduler.alpha.kubernetes.io/request-evict-only"
EVICTION_IN_PROGRESS: Final = "descheduler.alpha.kubernetes.io/eviction-in-progress"
# Static and mirror pods.
CONFIG_MIRROR: Final = "kubernetes.io/config.mirror"
CONFIG_SOURCE: Final = "kubernetes.io/config.source"
POD_DELETION_COST: Final = "controller.kubernetes.io/pod-deletion-cost"
# What people ask the descheduler and the autoscalers for: leave this pod be (any value of the first, as the
# descheduler's DefaultEvictor reads it; "true" and "false" of the others, as Karpenter and the
# cluster-autoscaler read them).
PREFER_NO_EVICTION: Final = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
DO_NOT_DISRUPT: Final = "karpenter.sh/do-not-disrupt"
SAFE_TO_EVICT: Final = "cluster-autoscaler.kubernetes.io/safe-to-evict"

# The pod condition the API server's eviction handler adds before it deletes a pod (PodDisruptionConditions).
DISRUPTION_TARGET: Final = "DisruptionTarget"
EVICTION_BY_EVICTION_API: Final = "EvictionByEvictionAPI"
