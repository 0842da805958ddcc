"""Whether a job could ever move a pod (pure): the arbitrator's filters, run by the gate before it turns an
eviction into a job. A pod that fails one would only get a job that fails at once; its evicter must not be
told "evacuation triggered" for it. What the gate does instead is `interceptor.unmovable`: `allow` lets the
eviction through as if Podherd were not there (the pod's PodDisruptionBudgets still apply), `refuse`
answers 403 naming the rule and what lifts it."""

from __future__ import annotations

import msgspec

from shared.api.messages import PodInfo
from shared.api.names import LABEL_EVACUATE
from shared.config.model import MigrationControllerArgs
from shared.rules.facts import JobFacts, WorkloadFacts
from shared.rules.filters import Rejection, evaluate, surges


def why_not(
    pod: PodInfo,
    workload: WorkloadFacts | None,
    *,
    args: MigrationControllerArgs,
    mode: str,
    budgets: list[int],
) -> Rejection | None:
    """The first filter that would end the gate's job for `pod` (None: it may be moved). `budgets`: the
    disruptions its PodDisruptionBudgets allow now, for the surge switches to read as the arbitrator will."""
    facts = JobFacts(name="", uid="", pod_namespace=pod.namespace, pod_name=pod.name, mode=mode)
    if surges(facts, workload, pdbs=budgets, args=args):
        facts = msgspec.structs.replace(facts, surge=True)
    threshold = args.priority_threshold.value if args.priority_threshold is not None else None
    return evaluate(facts, pod, workload, args=args, priority_threshold=threshold)


def _lifts(rule: str) -> str:
    return f"skipEvictionGates: [{rule}] lifts it for every job"


def let_through(pod: PodInfo, rejection: Rejection) -> str:
    """The warning an eviction let through carries (interceptor.unmovable: allow)."""
    return (
        f"Podherd will not move pod {pod.namespace}/{pod.name} ({rejection.message}): evicted as without "
        "Podherd, under its PodDisruptionBudgets (interceptor.unmovable: allow)"
    )


def refused(pod: PodInfo, rejection: Rejection) -> str:
    """The refusal of an eviction of a pod no job could move (interceptor.unmovable: refuse)."""
    return (
        f"Podherd will not move pod {pod.namespace}/{pod.name}: {rejection.message}. The eviction is refused "
        f"(interceptor.unmovable: refuse); {_lifts(rejection.rule)}, interceptor.unmovable: allow lets such "
        f"evictions through, and the label {LABEL_EVACUATE}=false on the pod leaves it out of evacuation"
    )
