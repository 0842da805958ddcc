"""Configuration: Koordinator's guide's defaults, Koordinator's blocks as they are, and errors that name the
key."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from shared.api.eviction_gates import EVICTION_GATES
from shared.api.pmj import PodMigrationJobSpec
from shared.config.loader import config_from_dict, load_config, parse_config_text
from shared.config.model import ConfigError, PodherdConfig
from shared.service.runtime import loop_factory

# Koordinator v1.8.0's module, as `make controlplane` brings it into the Go module cache.
KOORDINATOR = Path.home() / "go/pkg/mod/github.com/koordinator-sh/koordinator@v1.8.0"


def test_seed_001_defaults() -> None:
    args = config_from_dict({}).migration_controller
    # Koordinator's guide's table, row by row
    assert args.dry_run is False
    assert args.evict_failed_bare_pods is False
    assert args.evict_local_storage_pods is False
    assert args.evict_system_critical_pods is False
    assert args.ignore_pvc_pods is False
    assert args.label_selector is None
    assert args.priority_threshold is None
    assert args.max_concurrent_reconciles == 1
    assert args.namespaces is None
    assert args.node_fit is False
    assert args.max_migrating_per_node == 2
    assert args.max_migrating_per_namespace == 0
    assert args.max_migrating_per_workload is None
    assert args.max_unavailable_per_workload is None
    assert args.skip_check_expected_replicas is False
    assert args.default_job_mode == "ReservationFirst"
    assert args.default_job_ttl == "5m"
    assert args.default_job_ttl_seconds == 300
    assert args.scheduler_names == ["koord-scheduler"]
    assert args.evict_qps_value == 10
    assert args.evict_burst == 1
    assert args.eviction_policy == "Eviction"
    assert args.default_delete_options is None
    assert args.arbitration_args.enabled is True
    assert args.arbitration_interval_seconds == pytest.approx(0.5)
    # what Koordinator added since
    assert args.max_migrating_globally == 0
    assert args.evict_all_bare_pods is False
    assert args.skip_eviction_gates == []
    assert args.object_limiters.namespace is None
    assert args.object_limiters.workload is not None
    assert args.object_limiters.workload.duration == "5m"
    assert args.object_limiters.workload.max_migrating is None


# Koordinator's guide, section 2: the MigrationController args block of the LowNodeLoad example.
SEED_001_ARGS = """
apiVersion: descheduler/v1alpha2
kind: MigrationControllerArgs
evictionPolicy: Eviction
namespaces:
  exclude:
  - kube-system
evictQPS: "10"
evictBurst: 1
"""

SEED_001_DESCHEDULER = """
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
profiles:
- name: koord-descheduler
  plugins:
    evict:
      disabled:
      - name: "*"
      enabled:
      - name: MigrationController
  pluginConfig:
  - name: MigrationController
    args:
      apiVersion: descheduler/v1alpha2
      kind: MigrationControllerArgs
      defaultJobMode: EvictDirectly
      evictionPolicy: SoftEviction
      maxMigratingPerWorkload: 20%
      objectLimiters:
        workload:
          duration: 10m
          maxMigrating: 3
"""


def test_koordinator_args_block_loads_as_is() -> None:
    args = parse_config_text(SEED_001_ARGS).migration_controller
    assert args.eviction_policy == "Eviction"
    assert args.namespaces is not None and args.namespaces.exclude == ["kube-system"]
    assert args.evict_qps_value == 10.0
    assert args.evict_burst == 1
    assert args.max_migrating_per_node == 2  # untouched defaults stay


def test_koordinator_block_under_podherd_key_and_in_descheduler_config() -> None:
    nested = parse_config_text(
        "migrationController:\n" + "\n".join("  " + line for line in SEED_001_ARGS.splitlines())
    )
    assert nested.migration_controller.namespaces is not None
    args = parse_config_text(SEED_001_DESCHEDULER).migration_controller
    assert args.default_job_mode == "EvictDirectly"
    assert args.eviction_policy == "SoftEviction"
    assert args.max_migrating_per_workload == "20%"
    assert args.object_limiters.workload is not None
    assert args.object_limiters.workload.max_migrating == 3
    assert args.object_limiters.namespace is None


@pytest.mark.parametrize(
    ("yaml_text", "key"),
    [
        ("maxMigratingPerNode: -1", "migrationController.maxMigratingPerNode"),
        ("maxMigratingPerNode: two", "migrationController.maxMigratingPerNode"),
        ("evictionPolicy: Evict", "migrationController.evictionPolicy"),
        ("defaultJobMode: Reserve", "migrationController.defaultJobMode"),
        ("defaultJobTTL: 5 minutes", "migrationController.defaultJobTTL"),
        ("defaultJobTTL: -1s", "migrationController.defaultJobTTL"),
        ("evictQPS: fast", "migrationController.evictQPS"),
        ("evictQPS: 0", "migrationController.evictQPS"),
        ("evictBurst: 0", "migrationController.evictBurst"),
        ("maxUnavailablePerWorkload: 10", None),  # valid
        ("maxUnavailablePerWorkload: ten%", "migrationController.maxUnavailablePerWorkload"),
        ("maxMigratingPerNodes: 3", "migrationController.maxMigratingPerNodes"),
        ("skipEvictionGates: [Teleport]", "migrationController.skipEvictionGates[0]"),
        ("namespaces: {include: [a], exclude: [b]}", "migrationController.namespaces"),
        ("objectLimiters: {pod: {duration: 1m}}", "migrationController.objectLimiters.pod"),
        (
            "objectLimiters: {workload: {duration: soon}}",
            "migrationController.objectLimiters.workload.duration",
        ),
        ("arbitrationArgs: {interval: 0ms}", "migrationController.arbitrationArgs.interval"),
        ("schedulerNames: []", "migrationController.schedulerNames"),
        (
            "labelSelector: {matchExpressions: [{key: a, operator: Eq}]}",
            "migrationController.labelSelector.matchExpressions[0].operator",
        ),
    ],
)
def test_bad_values_name_the_key(yaml_text: str, key: str | None) -> None:
    text = "kind: MigrationControllerArgs\n" + yaml_text
    if key is None:
        parse_config_text(text)
        return
    with pytest.raises(ConfigError) as err:
        parse_config_text(text)
    assert err.value.key == key
    assert key in str(err.value)


@pytest.mark.parametrize(
    ("document", "key"),
    [
        ({"nats": {"url": "http://x"}}, "nats.url"),
        ({"redis": {"url": "localhost:6379"}}, "redis.url"),
        ({"nats": {"subjectPrefix": "a.b"}}, "nats.subjectPrefix"),
        ({"http": {"port": 70000}}, "http.port"),
        ({"logging": {"level": "LOUD"}}, "logging.level"),
        ({"natz": {}}, "natz"),
    ],
)
def test_podherd_sections_are_checked(document: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        config_from_dict(document)
    assert err.value.key == key


def test_environment_overrides(tmp_path: Path) -> None:
    path = tmp_path / "podherd.yaml"
    path.write_text("migrationController:\n  maxMigratingPerNode: 4\nnats:\n  url: nats://file:4222\n")
    config = load_config(
        path,
        env={
            "NATS_URL": "nats://env:4222",
            "REDIS_URL": "redis://env:6379/1",
            "KUBECONFIG": "/tmp/a.kubeconfig:/tmp/b.kubeconfig",
            "PODHERD_MIGRATIONCONTROLLER__MAXMIGRATINGPERNAMESPACE": "7",
            "PODHERD_MIGRATIONCONTROLLER__DRYRUN": "true",
            "PODHERD_MIGRATIONCONTROLLER__SCHEDULERNAMES": "[koord-scheduler, default-scheduler]",
            "PODHERD_NATS__SUBJECTPREFIX": "ph",
            "PODHERD_REPLICA": "tracker-7",
            "UNRELATED": "x",
        },
    )
    assert config.migration_controller.max_migrating_per_node == 4  # from the file
    assert config.migration_controller.max_migrating_per_namespace == 7
    assert config.migration_controller.dry_run is True
    assert config.migration_controller.scheduler_names == ["koord-scheduler", "default-scheduler"]
    assert config.nats.url == "nats://env:4222"
    assert config.nats.subject_prefix == "ph"
    assert config.redis.url == "redis://env:6379/1"
    assert config.kubernetes.kubeconfig == "/tmp/a.kubeconfig"
    assert config.replica == "tracker-7"


def test_config_file_from_environment(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(SEED_001_ARGS)
    assert load_config(env={"PODHERD_CONFIG": str(path)}).migration_controller.namespaces is not None


@pytest.mark.parametrize(
    ("env", "key"),
    [
        (
            {"PODHERD_MIGRATIONCONTROLLER__MAXMIGRATINGPERNODE": "-3"},
            "migrationController.maxMigratingPerNode",
        ),
        ({"PODHERD_MIGRATIONCONTROLLER__NOSUCHKEY": "1"}, "migrationController.nosuchkey"),
        ({"PODHERD_REPLICA__NAME": "x"}, "replica"),
        ({"NATS_URL": "localhost"}, "nats.url"),
    ],
)
def test_bad_environment_names_the_key(env: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(env=env)
    assert err.value.key == key


def test_unreadable_or_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "missing.yaml", env={})
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1,\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad, env={})
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_config(listy, env={})


def test_descheduler_config_without_migration_controller() -> None:
    with pytest.raises(ConfigError, match="no profile enables or configures MigrationController"):
        parse_config_text("kind: DeschedulerConfiguration\nprofiles: [{name: p, pluginConfig: []}]")


def test_a_profile_enabling_migration_controller_without_its_args_takes_koordinators_defaults() -> None:
    enabled = "{evict: {enabled: [{name: MigrationController}]}}"
    text = f"kind: DeschedulerConfiguration\nprofiles: [{{name: p, plugins: {enabled}}}]"
    args = parse_config_text(text).migration_controller
    assert args.max_migrating_per_node == 2 and args.evict_qps == 10 and args.default_job_ttl == "5m"


def test_profiles_configuring_migration_controller_otherwise_are_refused_naming_the_second() -> None:
    one = "{name: MigrationController, args: {maxMigratingPerNode: 1}}"
    two = "{name: MigrationController, args: {maxMigratingPerNode: 3}}"
    profiles = f"[{{name: a, pluginConfig: [{one}]}}, {{name: b, pluginConfig: [{two}]}}]"
    text = f"kind: DeschedulerConfiguration\nprofiles: {profiles}"
    with pytest.raises(ConfigError, match=r"profiles\[1\].*otherwise than profiles\[0\]"):
        parse_config_text(text)


def test_koordinators_shipped_config_map_is_read_for_its_configuration() -> None:
    shipped = KOORDINATOR / "config" / "manager" / "descheduler-config.yaml"
    if not shipped.exists():
        pytest.skip("Koordinator v1.8.0's module is not in the Go module cache (make controlplane)")
    args = parse_config_text(shipped.read_text()).migration_controller
    assert args.namespaces is not None and args.namespaces.exclude == ["kube-system", "koordinator-system"]
    assert float(args.evict_qps) == 10 and args.evict_burst == 1 and args.eviction_policy == "Eviction"
    with pytest.raises(ConfigError, match="none holds one"):
        parse_config_text("kind: ConfigMap\ndata: {other: 'a: 1'}")


def test_a_default_job_ttl_of_zero_gives_jobs_without_their_own_no_deadline() -> None:
    args = parse_config_text("kind: MigrationControllerArgs\ndefaultJobTTL: 0s").migration_controller
    assert PodMigrationJobSpec().ttl_seconds(args.default_job_ttl) == math.inf
    assert PodMigrationJobSpec(ttl="1m").ttl_seconds(args.default_job_ttl) == 60


def test_empty_object_limiters_mean_the_default() -> None:
    limiters = parse_config_text(
        "kind: MigrationControllerArgs\nobjectLimiters: {}"
    ).migration_controller.object_limiters
    assert limiters.workload is not None and limiters.workload.duration == "5m"


def test_every_gate_is_accepted() -> None:
    config = config_from_dict({"migrationController": {"skipEvictionGates": sorted(EVICTION_GATES)}})
    assert isinstance(config, PodherdConfig)
    assert set(config.migration_controller.skip_eviction_gates) == EVICTION_GATES


def test_kubeconfig_list_takes_the_first_file_that_exists(tmp_path: Path) -> None:
    present = tmp_path / "config"
    present.write_text("{}")
    listed = f"{tmp_path / 'kubeconfig-watcher'}:{tmp_path / 'kubeconfig'}:{present}"
    assert load_config(None, env={"KUBECONFIG": listed}).kubernetes.kubeconfig == str(present)
    absent = f"{tmp_path / 'a'}:{tmp_path / 'b'}"
    assert load_config(None, env={"KUBECONFIG": absent}).kubernetes.kubeconfig == str(tmp_path / "a")


@pytest.mark.parametrize(
    ("gate", "said"),
    [
        ("BarePod", "did you mean 'BarePods'?"),  # Koordinator's names are plural where they are
        ("namespace", "did you mean 'Namespaces'?"),
        ("DaemonSet", "did you mean 'podherd.io/DaemonSet'?"),  # Podherd's own gates carry its prefix
        ("Teleport", "known: MaxUnavailablePerWorkload, MaxMigratingPerWorkload,"),
    ],
)
def test_a_gate_near_a_known_one_is_refused_naming_it(gate: str, said: str) -> None:
    with pytest.raises(ConfigError) as refused:
        config_from_dict({"migrationController": {"skipEvictionGates": [gate]}})
    assert refused.value.key == "migrationController.skipEvictionGates[0]"
    assert said in str(refused.value), refused.value


def test_koordinators_fourteen_gates_are_accepted_by_its_names() -> None:
    names = [
        "MaxUnavailablePerWorkload", "MaxMigratingPerWorkload", "MaxMigratingPerNode",
        "MaxMigratingPerNamespace", "MaxMigratingGlobally", "ExpectedReplicas", "PVC", "BarePods",
        "LocalStorage", "SystemCritical", "PriorityThreshold", "LabelSelector", "Namespaces", "NodeFit",
    ]  # fmt: skip
    config = config_from_dict({"migrationController": {"skipEvictionGates": names}})
    assert config.migration_controller.skipped_gates == frozenset(names)


def test_the_event_loop_is_uvloop_unless_asked_otherwise() -> None:
    assert config_from_dict({}).event_loop == "uvloop"
    factory = loop_factory("uvloop")
    assert factory is not None
    loop = factory()
    try:
        assert type(loop).__module__.startswith("uvloop")
    finally:
        loop.close()
    assert loop_factory(config_from_dict({"eventLoop": "asyncio"}).event_loop) is None
    with pytest.raises(ConfigError, match="eventLoop"):
        config_from_dict({"eventLoop": "libuv"})
