"""Podherd's configuration: one typed place, with the seeds' names and defaults.

`migrationController` is Koordinator's `MigrationControllerArgs` (seed 001's parameter table, plus what
Koordinator added since: `maxMigratingGlobally`, `evictAllBarePods`, `skipEvictionGates`, the default
`objectLimiters`). A Koordinator block loads unchanged: as a document of its own (`kind:
MigrationControllerArgs`), under `migrationController:`, or inside a whole descheduler configuration
(`profiles[].pluginConfig[name=MigrationController].args`). The rest is Podherd's own: where NATS, Redis and
Kubernetes are, the subject prefix, and who this replica is.

Precedence, lowest first: defaults, the YAML file, `PODHERD_<SECTION>__<KEY>` environment variables, and the
standard `KUBECONFIG`, `NATS_URL`, `REDIS_URL` that users of kubectl, the nats CLI and redis-cli expect. Every
problem is a `ConfigError` naming the key, raised at start.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import msgspec
import yaml

from shared.api.codec import error_location
from shared.api.meta import DeleteOptions, Duration, IntOrPercent, LabelSelector
from shared.durations import parse_duration

KOORDINATOR_KINDS: Final = frozenset({"MigrationControllerArgs"})
DESCHEDULER_KINDS: Final = frozenset({"DeschedulerConfiguration"})

# The arbitration gates `skipEvictionGates` can switch off, one per non-retryable filter of issue 5.
# Missing pods and another active job for the same pod are not gates: they can never be skipped.
EVICTION_GATES: Final = frozenset(
    {
        "EvictionCost",
        "SchedulerName",
        "Namespace",
        "LabelSelector",
        "PriorityThreshold",
        "SystemCritical",
        "LocalStorage",
        "PVC",
        "BarePod",
        "DaemonSet",
        "MirrorPod",
        "StaticPod",
        "Terminating",
        "ExpectedReplicas",
    }
)

EvictionPolicy = Literal["Eviction", "Delete", "SoftEviction"]
JobMode = Literal["ReservationFirst", "EvictDirectly"]
NonNegative = Annotated[int, msgspec.Meta(ge=0)]
Port = Annotated[int, msgspec.Meta(ge=0, le=65535)]


class ConfigError(ValueError):
    """A bad configuration value; `key` is its dotted camelCase path."""

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        self.reason = reason
        super().__init__(
            f"configuration error at `{key}`: {reason}" if key else f"configuration error: {reason}"
        )


class Section(msgspec.Struct, rename="camel", kw_only=True, forbid_unknown_fields=True):
    """Base of every config section: camelCase keys, unknown keys rejected (a typo must not pass)."""


class Namespaces(Section):
    include: list[str] = msgspec.field(default_factory=list)
    exclude: list[str] = msgspec.field(default_factory=list)


class PriorityThreshold(Section):
    value: int | None = None
    name: str | None = None


class ObjectLimiter(Section):
    """At most `maxMigrating` migrations per `duration` for one object (a workload or a namespace)."""

    duration: Duration = "5m"
    # None or 0: derived from maxMigratingPerWorkload as Koordinator does.
    max_migrating: IntOrPercent | None = None
    burst: NonNegative | None = None


class ArbitrationArgs(Section):
    enabled: bool = True
    interval: Duration = "500ms"


class ObjectLimiters(Section):
    """Koordinator's `ObjectLimiterMap`: rate limits per workload and per namespace. When the block is given,
    it replaces the default whole, as Koordinator's defaulting does (an empty map means the default)."""

    workload: ObjectLimiter | None = None
    namespace: ObjectLimiter | None = None

    def items(self) -> list[tuple[str, ObjectLimiter]]:
        return [
            (name, lim) for name, lim in (("workload", self.workload), ("namespace", self.namespace)) if lim
        ]


def _default_object_limiters() -> ObjectLimiters:
    return ObjectLimiters(workload=ObjectLimiter(duration="5m"))


class MigrationControllerArgs(Section):
    """Koordinator's `MigrationControllerArgs`: seed 001's table, names and defaults."""

    api_version: str | None = None
    kind: str | None = None

    dry_run: bool = False
    max_concurrent_reconciles: Annotated[int, msgspec.Meta(ge=1)] = 1
    evict_failed_bare_pods: bool = False
    evict_all_bare_pods: bool = False
    evict_local_storage_pods: bool = False
    evict_system_critical_pods: bool = False
    ignore_pvc_pods: bool = False
    priority_threshold: PriorityThreshold | None = None
    label_selector: LabelSelector | None = None
    namespaces: Namespaces | None = None
    # Accepted for compatibility; seed 001 notes they have no effect in Koordinator v1.4 either.
    node_fit: bool = False
    node_selector: str | None = None

    max_migrating_per_node: NonNegative = 2
    max_migrating_per_namespace: NonNegative = 0
    max_migrating_globally: NonNegative = 0
    max_migrating_per_workload: IntOrPercent | None = None
    max_unavailable_per_workload: IntOrPercent | None = None
    skip_check_expected_replicas: bool = False
    object_limiters: ObjectLimiters = msgspec.field(default_factory=_default_object_limiters)

    default_job_mode: JobMode = "ReservationFirst"
    default_job_ttl: Duration = msgspec.field(default="5m", name="defaultJobTTL")
    scheduler_names: list[str] = msgspec.field(default_factory=lambda: ["koord-scheduler"])
    evict_qps: float | str = msgspec.field(default=10.0, name="evictQPS")
    evict_burst: Annotated[int, msgspec.Meta(ge=1)] = 1
    eviction_policy: EvictionPolicy = "Eviction"
    default_delete_options: DeleteOptions | None = None
    arbitration_args: ArbitrationArgs = msgspec.field(default_factory=ArbitrationArgs)
    skip_eviction_gates: list[str] = msgspec.field(default_factory=list)

    # Seed 000 (v1.4) names of the global flow control; read as evictQPS / evictBurst when those are unset.
    flow_control_qps: str | None = msgspec.field(default=None, name="flowControlQPS")
    flow_control_burst: int | None = None

    @property
    def evict_qps_value(self) -> float:
        return float(self.evict_qps)

    @property
    def default_job_ttl_seconds(self) -> float:
        return parse_duration(self.default_job_ttl)

    @property
    def arbitration_interval_seconds(self) -> float:
        return parse_duration(self.arbitration_args.interval)


def nats_servers(url: str) -> list[str]:
    """The servers of a NATS URL, which may list a cluster's members separated by commas."""
    return [part.strip() for part in url.split(",") if part.strip()]


class NatsConfig(Section):
    # One server, or a cluster's members separated by commas (nats://a:4222,nats://b:4222).
    url: str = "nats://127.0.0.1:4222"
    subject_prefix: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]+$")] = "podherd"
    stream_max_age: Duration = "24h"
    stream_max_bytes: Annotated[int, msgspec.Meta(ge=-1)] = 1 << 30
    audit_max_age: Duration = "720h"
    duplicate_window: Duration = "2m"
    max_deliver: Annotated[int, msgspec.Meta(ge=1)] = 10
    ack_wait: Duration = "4s"
    replicas: Annotated[int, msgspec.Meta(ge=1, le=5)] = 1


class RedisConfig(Section):
    url: str = "redis://127.0.0.1:6379/0"
    key_prefix: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_.:-]+$")] = "podherd"


class KubernetesConfig(Section):
    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool = False
    qps: Annotated[float, msgspec.Meta(gt=0)] = 50.0


WATCHABLE_KINDS: Final = (
    "pods",
    "podmigrationjobs",
    "reservations",
    "poddisruptionbudgets",
    "deployments",
    "replicasets",
    "statefulsets",
    "nodes",
)


class WatcherConfig(Section):
    """The watcher: what it follows, how it narrows it, and its timing."""

    kinds: list[str] = msgspec.field(default_factory=lambda: list(WATCHABLE_KINDS))
    # Namespaced kinds only: one `include` namespace watches that namespace alone; several are filtered in
    # the watcher; `exclude` becomes a `metadata.namespace!=` field selector.
    namespaces: Namespaces | None = None
    # A Kubernetes label selector (`app=web,tier!=db`) applied to pods.
    label_selector: str | None = None
    lease_ttl: Duration = msgspec.field(default="15s", name="leaseTTL")
    checkpoint_interval: Duration = "1s"
    # The server ends each watch after this long (timeoutSeconds); the loop resumes from its resourceVersion.
    watch_timeout: Duration = "5m"
    # No byte (not even a bookmark) for this long means the stream died silently: restart it.
    inactivity_timeout: Duration = "90s"
    page_size: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 500
    backoff_max: Duration = "30s"


class ArbitratorConfig(Section):
    """Podherd's own arbitration settings (the rules themselves are `migrationController`'s)."""

    # `seed`: seed 000's order (higher QoS, higher priority first). `cheapestFirst`: Koordinator's code
    # (lower QoS and priority first, i.e. the cheapest pods to disturb go first).
    sort_order: Literal["seed", "cheapestFirst"] = "seed"
    # A slot held by a job nobody releases (its PMJ vanished while Redis kept the slot) expires after this.
    slot_ttl: Duration = msgspec.field(default="30m", name="slotTTL")
    # How many queued jobs one admission pass looks at, in order, for one that fits.
    scan_depth: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 256


class HttpConfig(Section):
    """Where a service serves /metrics, /healthz and /readyz."""

    host: str = "0.0.0.0"
    port: Port = 8080


class LoggingConfig(Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    format: Literal["json", "text"] = "json"


def _default_replica() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class CollectorConfig(Section):
    """Finished jobs are deleted (collected) after `retention`, as Koordinator's scavenger does (30 minutes),
    but never one in flight; the audit stream keeps their history. An intent naming a collected job within
    `dedupWindow` of its collection is answered with that job and does not make a new one."""

    enabled: bool = True
    retention: Duration = "30m"
    interval: Duration = "1m"
    dedup_window: Duration = "24h"


class PodherdConfig(Section):
    api_version: str | None = None
    kind: str | None = None
    migration_controller: MigrationControllerArgs = msgspec.field(default_factory=MigrationControllerArgs)
    nats: NatsConfig = msgspec.field(default_factory=NatsConfig)
    redis: RedisConfig = msgspec.field(default_factory=RedisConfig)
    kubernetes: KubernetesConfig = msgspec.field(default_factory=KubernetesConfig)
    watcher: WatcherConfig = msgspec.field(default_factory=WatcherConfig)
    arbitrator: ArbitratorConfig = msgspec.field(default_factory=ArbitratorConfig)
    collector: CollectorConfig = msgspec.field(default_factory=CollectorConfig)
    http: HttpConfig = msgspec.field(default_factory=HttpConfig)
    logging: LoggingConfig = msgspec.field(default_factory=LoggingConfig)
    # This replica's identity: in leases, audit records and decisions.
    replica: str = msgspec.field(default_factory=_default_replica)


# ---------------------------------------------------------------------------------------------------------
# Loading


def load_config(
    path: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> PodherdConfig:
    """Load defaults <- YAML file (`path`, else `$PODHERD_CONFIG`) <- environment; validate everything."""
    env = os.environ if env is None else env
    path = path if path is not None else env.get("PODHERD_CONFIG")
    document: dict[str, Any] = {}
    if path:
        document = _read_yaml(Path(path))
    document = _normalise(document)
    _apply_env(document, env)
    return config_from_dict(document)


def config_from_dict(document: Mapping[str, Any]) -> PodherdConfig:
    """Build and validate a config from a parsed document in Podherd's shape."""
    try:
        config = msgspec.convert(dict(document), type=PodherdConfig, str_keys=True)
    except msgspec.ValidationError as exc:
        key, reason = error_location(str(exc))
        raise ConfigError(key, reason) from exc
    validate(config)
    return config


def parse_config_text(text: str, env: Mapping[str, str] | None = None) -> PodherdConfig:
    """Load from YAML text (Podherd's shape, a bare MigrationControllerArgs, or a descheduler config)."""
    document = _normalise(_parse_yaml(text, "<text>"))
    _apply_env(document, {} if env is None else env)
    return config_from_dict(document)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError("", f"cannot read config file {path}: {exc.strerror}") from exc
    return _parse_yaml(text, str(path))


def _parse_yaml(text: str, origin: str) -> dict[str, Any]:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError("", f"{origin} is not valid YAML: {exc}") from exc
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ConfigError("", f"{origin} must hold a mapping, got {type(document).__name__}")
    return document


def _normalise(document: dict[str, Any]) -> dict[str, Any]:
    """Accept a Koordinator MigrationControllerArgs or DeschedulerConfiguration as they are."""
    kind = document.get("kind")
    if kind in KOORDINATOR_KINDS:
        return {"migrationController": document}
    if kind in DESCHEDULER_KINDS or ("profiles" in document and "migrationController" not in document):
        args = _migration_args_from_profiles(document.get("profiles"))
        return {"migrationController": args}
    return document


def _migration_args_from_profiles(profiles: Any) -> dict[str, Any]:
    if not isinstance(profiles, list):
        raise ConfigError("profiles", "expected a list of descheduler profiles")
    for i, profile in enumerate(profiles):
        for j, plugin in enumerate((profile or {}).get("pluginConfig") or []):
            if isinstance(plugin, dict) and plugin.get("name") == "MigrationController":
                args = plugin.get("args") or {}
                if not isinstance(args, dict):
                    raise ConfigError(f"profiles[{i}].pluginConfig[{j}].args", "expected a mapping")
                return args
    raise ConfigError("profiles", "no pluginConfig named MigrationController in any profile")


def _field_names(struct_type: type[msgspec.Struct]) -> dict[str, tuple[str, Any]]:
    """lower-cased JSON name -> (JSON name, field type), for matching environment variable names."""
    info = msgspec.inspect.type_info(struct_type)
    assert isinstance(info, msgspec.inspect.StructType)
    return {f.encode_name.lower(): (f.encode_name, f.type) for f in info.fields}


# What a kubelet gives every container for each Service of its namespace (pkg/kubelet/envvars): a Service
# named `podherd-watcher` yields PODHERD_WATCHER_SERVICE_HOST, PODHERD_WATCHER_PORT_8080_TCP_ADDR and so on.
# They are not configuration and are left alone; any other unknown PODHERD_ name is still refused. (A Service
# name is a DNS-1035 label and a port name an IANA service name: neither ends in "-", so no configuration
# name, whose parts are joined by "__", has this shape.)
_SVC = r"[A-Z]([A-Z0-9_]*[A-Z0-9])?"
_PORT_NAME = r"[A-Z0-9]([A-Z0-9_]*[A-Z0-9])?"
SERVICE_LINK = re.compile(
    rf"{_SVC}_(SERVICE_HOST|SERVICE_PORT(_{_PORT_NAME})?|PORT|PORT_[0-9]+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)"
)


def is_service_link(name: str) -> bool:
    return SERVICE_LINK.fullmatch(name) is not None


def _apply_env(document: dict[str, Any], env: Mapping[str, str]) -> None:
    for name, raw in env.items():
        if not name.startswith("PODHERD_") or name in ("PODHERD_CONFIG",) or is_service_link(name):
            continue
        parts = [p for p in name[len("PODHERD_") :].split("__") if p]
        _set_path(document, parts, raw, name)
    standard = {
        "KUBECONFIG": ("kubernetes", "kubeconfig"),
        "NATS_URL": ("nats", "url"),
        "REDIS_URL": ("redis", "url"),
    }
    for var, (section, key) in standard.items():
        if env.get(var):
            value = env[var]
            if var == "KUBECONFIG":  # a list, as kubectl takes it: the first file that exists
                paths = [p for p in value.split(os.pathsep) if p]
                value = next((p for p in paths if os.path.exists(p)), paths[0] if paths else value)
            document.setdefault(section, {})
            if not isinstance(document[section], dict):
                raise ConfigError(section, "expected a mapping")
            document[section][key] = value


def _set_path(document: dict[str, Any], parts: list[str], raw: str, var: str) -> None:
    struct_type: Any = PodherdConfig
    node = document
    path: list[str] = []
    for i, part in enumerate(parts):
        match = _field_names(struct_type).get(part.lower())
        if match is None:
            raise ConfigError(
                ".".join([*path, part.lower()]), f"environment variable {var} names no such key"
            )
        json_name, ftype = match
        path.append(json_name)
        if i == len(parts) - 1:
            node[json_name] = _env_value(raw)
            return
        child = node.setdefault(json_name, {})
        if not isinstance(child, dict):
            raise ConfigError(".".join(path), "expected a mapping")
        node = child
        struct_type = _struct_of(ftype)
        if struct_type is None:
            raise ConfigError(
                ".".join(path), f"environment variable {var} goes below a value that has no keys"
            )


def _struct_of(ftype: msgspec.inspect.Type) -> type[msgspec.Struct] | None:
    if isinstance(ftype, msgspec.inspect.StructType):
        return ftype.cls
    if isinstance(ftype, msgspec.inspect.UnionType):
        for t in ftype.types:
            if isinstance(t, msgspec.inspect.StructType):
                return t.cls
    return None


def _env_value(raw: str) -> Any:
    """An environment value is read as a YAML scalar or flow collection: '3' -> 3, 'true' -> True."""
    try:
        return yaml.safe_load(raw) if raw.strip() else raw
    except yaml.YAMLError:
        return raw


# ---------------------------------------------------------------------------------------------------------
# Validation of what types alone cannot say


def validate(config: PodherdConfig) -> None:
    args = config.migration_controller
    prefix = "migrationController."
    if isinstance(args.evict_qps, str):
        try:
            qps = float(args.evict_qps)
        except ValueError:
            raise ConfigError(prefix + "evictQPS", f"expected a number, got {args.evict_qps!r}") from None
        args.evict_qps = qps
    if args.evict_qps_value <= 0:
        raise ConfigError(prefix + "evictQPS", f"must be > 0, got {args.evict_qps}")
    if args.flow_control_qps is not None:
        try:
            float(args.flow_control_qps)
        except ValueError:
            raise ConfigError(
                prefix + "flowControlQPS", f"expected a number, got {args.flow_control_qps!r}"
            ) from None
    if args.namespaces and args.namespaces.include and args.namespaces.exclude:
        raise ConfigError(prefix + "namespaces", "only one of include and exclude can be set")
    _positive_duration(prefix + "defaultJobTTL", args.default_job_ttl)
    _positive_duration(prefix + "arbitrationArgs.interval", args.arbitration_args.interval)
    if not args.object_limiters.items():
        args.object_limiters = _default_object_limiters()
    for name, limiter in args.object_limiters.items():
        _positive_duration(f"{prefix}objectLimiters.{name}.duration", limiter.duration)
    for i, gate in enumerate(args.skip_eviction_gates):
        if gate not in EVICTION_GATES:
            known = ", ".join(sorted(EVICTION_GATES))
            raise ConfigError(f"{prefix}skipEvictionGates[{i}]", f"unknown gate {gate!r}; known: {known}")
    if not args.scheduler_names:
        raise ConfigError(prefix + "schedulerNames", "must name at least one scheduler")
    if args.priority_threshold and args.priority_threshold.value is not None and args.priority_threshold.name:
        raise ConfigError(prefix + "priorityThreshold", "only one of value and name can be set")
    for key, urls, schemes in (
        ("nats.url", nats_servers(config.nats.url) or [""], ("nats://", "tls://", "ws://", "wss://")),
        ("redis.url", [config.redis.url], ("redis://", "rediss://", "unix://")),
    ):
        for url in urls:
            if not url.startswith(schemes):
                raise ConfigError(
                    key, f"expected a URL starting with one of {', '.join(schemes)}, got {url!r}"
                )
    for i, kind in enumerate(config.watcher.kinds):
        if kind not in WATCHABLE_KINDS:
            raise ConfigError(
                f"watcher.kinds[{i}]", f"unknown kind {kind!r}; known: {', '.join(WATCHABLE_KINDS)}"
            )
    namespaces = config.watcher.namespaces
    if namespaces and namespaces.include and namespaces.exclude:
        raise ConfigError("watcher.namespaces", "only one of include and exclude can be set")
    for key, value in (
        ("watcher.leaseTTL", config.watcher.lease_ttl),
        ("watcher.checkpointInterval", config.watcher.checkpoint_interval),
        ("watcher.watchTimeout", config.watcher.watch_timeout),
        ("watcher.inactivityTimeout", config.watcher.inactivity_timeout),
        ("watcher.backoffMax", config.watcher.backoff_max),
        ("nats.streamMaxAge", config.nats.stream_max_age),
        ("nats.auditMaxAge", config.nats.audit_max_age),
        ("nats.duplicateWindow", config.nats.duplicate_window),
        ("nats.ackWait", config.nats.ack_wait),
        ("collector.retention", config.collector.retention),
        ("collector.interval", config.collector.interval),
        ("collector.dedupWindow", config.collector.dedup_window),
    ):
        _positive_duration(key, value)


def _positive_duration(key: str, value: str) -> None:
    if parse_duration(value) <= 0:
        raise ConfigError(key, f"must be a positive duration, got {value!r}")
