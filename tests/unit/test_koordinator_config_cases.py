"""Koordinator v1.8.0's validation of the MigrationController's args and of a DeschedulerConfiguration
(pkg/descheduler/apis/config/validation), case by case, on how Podherd loads them: what Koordinator refuses
is refused naming the key; what it accepts loads. Where Podherd refuses what Koordinator accepts, the
case says why (tests/koordinator_cases.py)."""

from __future__ import annotations

import pytest

from shared.config.loader import parse_config_text
from shared.config.model import ConfigError

ARGS = "kind: MigrationControllerArgs\n"


@pytest.mark.parametrize(
    ("given", "refused"),
    [
        pytest.param("", None, id="default args"),
        pytest.param("evictQPS: xxxx", "evictQPS", id="invalid evictQPS"),
        pytest.param("evictQPS: 11\nevictBurst: 0", "evictBurst", id="invalid evictBurst"),
        pytest.param(
            "labelSelector: {matchLabels: {test/a/b/c: '123'}}", "labelSelector", id="invalid labelSelector"
        ),
        pytest.param(
            "maxConcurrentReconciles: -1", "maxConcurrentReconciles", id="invalid maxConcurrentReconciles"
        ),
        pytest.param("defaultJobMode: unsupportedMode", "defaultJobMode", id="invalid defaultJobMode"),
        pytest.param("defaultJobTTL: -10m", "defaultJobTTL", id="invalid defaultJobTTL"),
        pytest.param("skipEvictionGates: [NoSuchGate]", "skipEvictionGates", id="invalid skipEvictionGates"),
    ],
)
def test_validate_migration_controller_args(given: str, refused: str | None) -> None:
    if refused is None:
        assert parse_config_text(ARGS + given).migration_controller.evict_burst == 1
        return
    with pytest.raises(ConfigError) as error:
        parse_config_text(ARGS + given)
    assert refused in str(error.value)


@pytest.mark.parametrize("key", ["maxMigratingPerNamespace", "maxMigratingGlobally", "maxMigratingPerNode"])
@pytest.mark.parametrize(("value", "ok"), [(10, True), (100, True), (0, True), (-1, False)])
def test_validate_migration_controller_args_max_migrating(key: str, value: int, ok: bool) -> None:
    """TestValidateMigrationControllerArgs_MaxMigratingPerNamespace, _MaxMigratingGlobally and
    _MaxMigratingPerNode: a count of 0 or more."""
    if ok:
        parse_config_text(f"{ARGS}{key}: {value}")
    else:
        with pytest.raises(ConfigError, match=key):
            parse_config_text(f"{ARGS}{key}: {value}")


@pytest.mark.parametrize("key", ["maxMigratingPerWorkload", "maxUnavailablePerWorkload"])
def test_validate_migration_controller_args_per_workload(key: str) -> None:
    """TestValidateMigrationControllerArgs_MaxMigratingPerWorkload and _MaxUnavailablePerWorkload: 10, 100 and
    0 load as in Koordinator; -1, which Koordinator does not check ("we do not check the valid value"), is
    refused, as a limit that can never mean anything."""
    for value in (10, 100, 0):
        parse_config_text(f"{ARGS}{key}: {value}")
    with pytest.raises(ConfigError, match=key):
        parse_config_text(f"{ARGS}{key}: -1")


PROFILE = "{name: MigrationController, args: {evictBurst: 1}}"


@pytest.mark.parametrize(
    ("profiles", "refused"),
    [
        pytest.param(f"[{{name: a, pluginConfig: [{PROFILE}]}}]", None, id="default args"),
        pytest.param(
            f"[{{name: a, pluginConfig: [{PROFILE}, {PROFILE}]}}]",
            "MigrationController configured twice",
            id="duplicate plugin config",
        ),
    ],
)
def test_validate_descheduler_configuration(profiles: str, refused: str | None) -> None:
    text = f"kind: DeschedulerConfiguration\nprofiles: {profiles}"
    if refused is None:
        assert parse_config_text(text).migration_controller.evict_burst == 1
    else:
        with pytest.raises(ConfigError, match=refused):
            parse_config_text(text)
