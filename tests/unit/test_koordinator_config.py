"""Koordinator's own configuration file, read as it is: its MigrationController plugin's args honoured with
Koordinator's meaning, the rest of the DeschedulerConfiguration ignored with one warning naming it, and
`podherd config --reference` saying how Podherd reads each of Koordinator's fields."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from podherd import cli, compatibility
from podherd.reference import KOORDINATOR, config_reference
from shared.config.loader import parse_config_text
from shared.config.model import ConfigError

SHIPPED = Path(__file__).parents[1] / "data" / "koordinator" / "descheduler-config.yaml"
# Koordinator v1.8.0's MigrationControllerArgs, field by field (types_pluginargs.go, v1alpha2).
KOORDINATOR_FIELDS = (
    "dryRun",
    "maxConcurrentReconciles",
    "evictFailedBarePods",
    "evictAllBarePods",
    "evictLocalStoragePods",
    "evictSystemCriticalPods",
    "ignorePvcPods",
    "priorityThreshold",
    "labelSelector",
    "namespaces",
    "nodeFit",
    "nodeSelector",
    "skipEvictionGates",
    "maxMigratingGlobally",
    "maxMigratingPerNode",
    "maxMigratingPerNamespace",
    "maxMigratingPerWorkload",
    "maxUnavailablePerWorkload",
    "skipCheckExpectedReplicas",
    "objectLimiters",
    "defaultJobMode",
    "defaultJobTTL",
    "schedulerNames",
    "evictQPS",
    "evictBurst",
    "evictionPolicy",
    "defaultDeleteOptions",
    "arbitrationArgs.enabled",
    "arbitrationArgs.interval",
)


def test_koordinators_shipped_configuration_is_read_as_it_is(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "shared.config.model")
    args = parse_config_text(SHIPPED.read_text()).migration_controller
    assert args.eviction_policy == "Eviction"
    assert args.namespaces is not None and args.namespaces.exclude == ["kube-system", "koordinator-system"]
    assert (args.evict_qps_value, args.evict_burst) == (10.0, 1)
    [warning] = [r.getMessage() for r in caplog.records]
    assert warning.startswith("Koordinator's DeschedulerConfiguration: only the MigrationController plugin's")
    for ignored in (
        "deschedulingInterval",
        "leaderElection",
        "healthzBindAddress",
        "the plugins LowNodeLoad",
    ):
        assert ignored in warning, warning


def test_its_commented_gates_are_accepted_when_written_out() -> None:
    text = SHIPPED.read_text().replace("# skipEvictionGates:", "skipEvictionGates:")
    for gate in (
        "MaxMigratingGlobally",
        "MaxMigratingPerNode",
        "MaxMigratingPerNamespace",
        "ExpectedReplicas",
    ):
        text = text.replace(f"#   - {gate}", f"  - {gate}")
    text = text.replace("#   - MaxMigratingPerWorkload", "  - MaxMigratingPerWorkload")
    text = text.replace("#   - MaxUnavailablePerWorkload", "  - MaxUnavailablePerWorkload")
    args = parse_config_text(text).migration_controller
    assert "MaxUnavailablePerWorkload" in args.skipped_gates and len(args.skip_eviction_gates) == 6


def test_podherd_config_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["config", "--config", str(SHIPPED)]) == 0
    assert "evictionPolicy: Eviction" in capsys.readouterr().out


def test_node_fit_is_on_unless_its_gate_is_skipped_and_its_node_selector_must_parse() -> None:
    args = parse_config_text("kind: MigrationControllerArgs\nnodeFit: true\nnodeSelector: zone in (a,b)")
    assert (
        args.migration_controller.fit_checked and args.migration_controller.node_selector == "zone in (a,b)"
    )
    skipped = parse_config_text("kind: MigrationControllerArgs\nnodeFit: true\nskipEvictionGates: [NodeFit]")
    assert not skipped.migration_controller.fit_checked
    with pytest.raises(ConfigError) as refused:
        parse_config_text("kind: MigrationControllerArgs\nnodeSelector: =a")
    assert refused.value.key == "migrationController.nodeSelector"
    assert "'=a' is not a label selector: found '=', expected: !, identifier, or 'end of string'" in str(
        refused.value
    )


def test_the_reference_says_how_each_of_koordinators_fields_is_read() -> None:
    # Each field said once: in the reference's own list, or by a row of the compatibility table.
    tabled = compatibility.config_keys()
    assert set(KOORDINATOR) | tabled == set(KOORDINATOR_FIELDS) and not set(KOORDINATOR) & tabled
    rows = {line.split(" | ")[0].strip("| `"): line for line in config_reference().splitlines()[2:]}
    for field in KOORDINATOR_FIELDS:
        row = rows.get(f"migrationController.{field}") or next(
            line for key, line in rows.items() if key.startswith(f"migrationController.{field}.")
        )
        said = KOORDINATOR.get(field) or compatibility.config_note(field)
        assert row.endswith(f"| {said} |"), row
    assert rows["migrationController.surge.singleReplicaDeployments"].endswith("| Podherd's own |")


BALANCED = """
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
maxNoOfPodsToEvictPerNode: 3
profiles:
- name: koord-descheduler
  plugins:
    balance:
      enabled: [{name: HighNodeUtilization}, {name: LowNodeUtilization}]
  pluginConfig:
  - name: MigrationController
    args: {maxMigratingPerNode: 1}
  - name: LowNodeUtilization
    args:
      thresholds: {cpu: 10, memory: 15, nvidia.com/gpu: 5}
      targetThresholds: {cpu: 70, memory: 80}
      numberOfNodes: 2
      useDeviationThresholds: true
"""


def test_a_descheduler_configuration_gives_the_planner_its_balance_plugins_args(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "shared.config.model")
    config = parse_config_text(BALANCED)
    assert config.migration_controller.max_migrating_per_node == 1
    low, high = config.planner.policies  # configured first, then enabled without args
    assert (low.name, low.thresholds, low.target_thresholds) == (
        "LowNodeUtilization",
        {"cpu": 10.0, "memory": 15.0},
        {"cpu": 70.0, "memory": 80.0},
    )
    assert low.number_of_nodes == 2
    assert (high.name, high.thresholds) == (
        "HighNodeUtilization",
        {"cpu": 20.0, "memory": 20.0, "pods": 20.0},
    )
    assert config.planner.max_no_of_pods_to_evict_per_node == 3
    [warning] = [r.getMessage() for r in caplog.records]
    assert "LowNodeUtilization.thresholds.nvidia.com/gpu" in warning, warning
    assert "LowNodeUtilization.useDeviationThresholds" in warning, warning
    assert "maxNoOfPodsToEvictPerNode" not in warning and "the plugins" not in warning, warning
