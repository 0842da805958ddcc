"""The rebalancing policies, one registry: every name the configuration takes has its runner, and a name
none has is refused, never run as another policy."""

from __future__ import annotations

import pytest

from podherd.plan_commands import READ_BY
from shared.config.planner import POLICY_NAMES, READS, PlannerPolicy
from shared.fit.cluster import Cluster
from shared.rebalance.planning import Planning
from shared.rebalance.policy_run import RUNNERS, PolicyOptions, run_policy


def test_every_policy_the_configuration_takes_has_its_runner_and_says_what_it_reads() -> None:
    assert set(RUNNERS) == set(POLICY_NAMES) == set(READS)
    assert READ_BY["target_thresholds"] == ("LowNodeUtilization",)
    assert READ_BY["thresholds"] == ("LowNodeUtilization", "HighNodeUtilization")
    for name in POLICY_NAMES:
        PlannerPolicy(name=name)  # the configuration takes it, with the same defaults


def test_a_name_no_policy_has_is_refused() -> None:
    with pytest.raises(ValueError, match="no rebalancing policy 'LowNodeUtilisation'"):
        run_policy(Planning(Cluster(), {}), PolicyOptions("LowNodeUtilisation"))
