"""Podherd's configuration: one typed place, with the seeds' names and defaults.

`migrationController` is Koordinator's `MigrationControllerArgs` (Koordinator's guide's parameter table, plus
what Koordinator added since: `maxMigratingGlobally`, `evictAllBarePods`, `skipEvictionGates`, the default
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
import socket
from typing import Annotated, Final, Literal

import msgspec

from shared.api.eviction_gates import NODE_FIT
from shared.api.meta import DeleteOptions, Duration, IntOrPercent, LabelSelector
from shared.api.workload_kinds import WorkloadKind, default_workload_kinds
from shared.config.planner import PlannerConfig
from shared.core.durations import parse_duration

KOORDINATOR_KINDS: Final = frozenset({"MigrationControllerArgs"})
DESCHEDULER_KINDS: Final = frozenset({"DeschedulerConfiguration"})


EvictionPolicy = Literal["Eviction", "Delete", "SoftEviction"]
NoEvictionPolicy = Literal["Preferred", "Mandatory"]
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


class SurgeArgs(Section):
    """Jobs moved by Surge (`podherd.io/strategy: Surge`): the Deployment scaled up by one for the new pod,
    then back down. The switches make the arbitrator choose it for a ReservationFirst job of a Deployment
    with a single replica, or whose PodDisruptionBudget allows no disruption when the job is admitted. A
    HorizontalPodAutoscaler targeting the Deployment would fight the surge: such jobs are refused unless
    allowed here."""

    single_replica_deployments: bool = False
    zero_disruption_deployments: bool = False
    allow_with_horizontal_pod_autoscaler: bool = False


class DisruptionWindow(Section):
    """A time when pods may be disrupted: it opens at each time `schedule` (a five-field cron expression,
    read in `timeZone`) names and stays open for `duration`. It applies to jobs whose pod is in one of
    `namespaces` (all when empty) and matches `labelSelector` (all when unset). A job its windows apply to is
    admitted only while one of them is open; a job already running when its window closes finishes."""

    schedule: str
    duration: Duration
    time_zone: str = "UTC"
    namespaces: list[str] = msgspec.field(default_factory=list)
    label_selector: LabelSelector | None = None
    # How statuses and audit records name it; `<schedule> <timeZone>` when unset.
    name: str | None = None

    @property
    def title(self) -> str:
        return self.name or f"{self.schedule} {self.time_zone}"


class ObjectLimiters(Section):
    """Koordinator's `ObjectLimiterMap`: rate limits per workload and per namespace. When the block is given,
    it replaces the default whole, as Koordinator's defaulting does (an empty map means the default)."""

    workload: ObjectLimiter | None = None
    namespace: ObjectLimiter | None = None

    def items(self) -> list[tuple[str, ObjectLimiter]]:
        return [
            (name, lim) for name, lim in (("workload", self.workload), ("namespace", self.namespace)) if lim
        ]


def default_object_limiters() -> ObjectLimiters:
    return ObjectLimiters(workload=ObjectLimiter(duration="5m"))


class MigrationControllerArgs(Section):
    """Koordinator's `MigrationControllerArgs`: Koordinator's guide's table, names and defaults."""

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
    # As Koordinator's evictor applies them: to what asks for a pod to be moved (intents), not to jobs.
    node_fit: bool = False
    node_selector: str | None = None  # the nodes nodeFit counts (a label selector, as a string)

    max_migrating_per_node: NonNegative = 2
    max_migrating_per_namespace: NonNegative = 0
    max_migrating_globally: NonNegative = 0
    max_migrating_per_workload: IntOrPercent | None = None
    max_unavailable_per_workload: IntOrPercent | None = None
    skip_check_expected_replicas: bool = False
    object_limiters: ObjectLimiters = msgspec.field(default_factory=default_object_limiters)

    default_job_mode: JobMode = "ReservationFirst"
    default_job_ttl: Duration = msgspec.field(default="5m", name="defaultJobTTL")
    scheduler_names: list[str] = msgspec.field(default_factory=lambda: ["koord-scheduler"])
    evict_qps: float | str = msgspec.field(default=10.0, name="evictQPS")
    evict_burst: Annotated[int, msgspec.Meta(ge=1)] = 1
    eviction_policy: EvictionPolicy = "Eviction"
    default_delete_options: DeleteOptions | None = None
    arbitration_args: ArbitrationArgs = msgspec.field(default_factory=ArbitrationArgs)
    skip_eviction_gates: list[str] = msgspec.field(default_factory=list)
    surge: SurgeArgs = msgspec.field(default_factory=SurgeArgs)
    disruption_windows: list[DisruptionWindow] = msgspec.field(default_factory=list)
    # Podherd's own (the descheduler's DefaultEvictor has them; Koordinator's arbitrator has not): how the
    # pods' own requests to be left be are honoured (Mandatory: never moved; Preferred: moved last), and the
    # age (since status.startTime) below which a pod's job waits.
    no_eviction_policy: NoEvictionPolicy = "Preferred"
    autoscaler_protections: NoEvictionPolicy = "Mandatory"
    min_pod_age: Duration | None = None

    # The PodMigrationJob proposal's (v1.4) names of the global flow control; read as evictQPS / evictBurst
    # when those are unset.
    flow_control_qps: str | None = msgspec.field(default=None, name="flowControlQPS")
    flow_control_burst: int | None = None

    @property
    def skipped_gates(self) -> frozenset[str]:
        return frozenset(self.skip_eviction_gates)

    @property
    def fit_checked(self) -> bool:
        """Whether an intent's pod must fit another node (nodeFit, unless its gate is skipped)."""
        return self.node_fit and NODE_FIT.name not in self.skipped_gates

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


def host_port(address: str) -> tuple[str, int] | None:
    """`host:port` split (None when it is not one): a Sentinel's address."""
    host, _, port = address.rpartition(":")
    return (host, int(port)) if host and port.isdigit() else None


class Tls(Section):
    """TLS to a server: `ca` (PEM) is what its certificate must chain to (else the system's roots); `cert`
    and `key` (PEM) are this client's, for servers that want one (NATS maps it to a user with
    `verify_and_map`); `serverName` is the name its certificate must carry, when not the address's. Files,
    as mounted from Secrets: read again when they change, so a renewed certificate is used from the next
    connection on."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    # The name the server's certificate is checked for, where it is not the address's host: through a
    # port-forward to 127.0.0.1, the server's in-cluster name (nats.podherd.svc).
    server_name: str | None = None


class NatsConfig(Section):
    # One server, or a cluster's members: a list, or separated by commas (nats://a:4222,nats://b:4222).
    url: str = "nats://127.0.0.1:4222"
    subject_prefix: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]+$")] = "podherd"
    stream_max_age: Duration = "24h"
    stream_max_bytes: Annotated[int, msgspec.Meta(ge=-1)] = 1 << 30
    audit_max_age: Duration = "720h"
    duplicate_window: Duration = "2m"
    max_deliver: Annotated[int, msgspec.Meta(ge=1)] = 10
    ack_wait: Duration = "4s"
    replicas: Annotated[int, msgspec.Meta(ge=1, le=5)] = 1
    # A file: an nkey seed (`SU…`) or a `.creds` file (a user JWT and its seed), read at each connection.
    credentials: str | None = None
    tls: Tls | None = None


class RedisSentinel(Section):
    """Redis behind Sentinels: the services ask them where the primary of `masterName` is, and follow a
    failover. `addresses`: the Sentinels, `host:port` each. `usePassword`: the Sentinels require the data
    nodes' credentials (those of `redis.url`) too, as the Valkey chart's `auth.sentinel` sets them up."""

    master_name: str
    addresses: list[str]
    use_password: bool = False
    # The Sentinels' own password in a file (the Valkey chart's default user's), when the services use Redis
    # as users of their own; without it they are asked with the data nodes' credentials.
    password_file: str | None = None


class RedisConfig(Section):
    url: str = "redis://127.0.0.1:6379/0"
    key_prefix: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_.:-]+$")] = "podherd"
    # With it, `url` gives only the database, user and password; the primary is the Sentinels' to name.
    # An ACL user (each service its own: `podherd config --redis-acl`) and the file holding its password (a
    # mounted Secret), read again for each new connection: a rotated password counts from the next one.
    # Never put a password in the URL of a ConfigMap.
    username: str | None = None
    password_file: str | None = None
    # TLS to Redis (and to its Sentinels): on with `tls` or a `rediss://` url. The server's certificate is
    # verified against `tls.ca` and its host name; `cert`/`key` only for a server that asks for one.
    tls: Tls | None = None
    sentinel: RedisSentinel | None = None
    # A write a safety property rests on (an admission, a replacement's claim) is acted on only once this
    # many replicas acknowledge it (WAIT), within `waitTimeout`; else it is not acted on and is tried again.
    # Default: 1 with `sentinel`, else 0 (a single Redis has no replica to wait for).
    wait_replicas: Annotated[int, msgspec.Meta(ge=0)] | None = None
    wait_timeout: Duration = "1s"

    @property
    def replicas_to_wait_for(self) -> int:
        if self.wait_replicas is not None:
            return self.wait_replicas
        return 1 if self.sentinel is not None else 0


class KubernetesConfig(Section):
    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool = False
    # Requests a replica sends the API server, as client-go's QPS and Burst (watches aside).
    qps: Annotated[float, msgspec.Meta(gt=0)] = 1000.0
    burst: Annotated[int, msgspec.Meta(ge=1)] = 2000


WATCHABLE_KINDS: Final = (
    "pods",
    "podmigrationjobs",
    "reservations",
    "poddisruptionbudgets",
    "deployments",
    "replicasets",
    "statefulsets",
    "nodes",
    "serviceaccounts",  # a deleted one's tokens are refused at once, not once their review's cache ends
)


class WatcherConfig(Section):
    """The watcher: what it follows, how it narrows it, and its timing."""

    kinds: list[str] = msgspec.field(default_factory=lambda: list(WATCHABLE_KINDS))
    workload_kinds: list[WorkloadKind] = msgspec.field(default_factory=default_workload_kinds)
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

    # `cheapestFirst` (the default): Koordinator's code (lower QoS and priority first, i.e. the cheapest pods
    # to disturb go first). `seed`: the PodMigrationJob proposal's order (higher QoS, higher priority first).
    sort_order: Literal["seed", "cheapestFirst"] = "cheapestFirst"
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


class RateLimit(Section):
    """A token bucket per requester that sends requests (per tracker replica): `qps` refilled, `burst` at
    once; qps 0 is off. Anonymous requests (`authorization: none`) and the intent stream are not limited."""

    qps: Annotated[float, msgspec.Meta(ge=0)] = 100.0
    burst: Annotated[int, msgspec.Meta(ge=1)] = 1000


class IntentsConfig(Section):
    """Who may send intents and drains (docs/operating/security.md, "Who may move what").

    `authorization`: `kubernetes` (a request carries its sender's ServiceAccount token for `audience`,
    verified by TokenReview and authorized by SubjectAccessReview as that user), `subject` (the NATS
    server's permissions on namespace-scoped subjects are the authorization), or `none` (anyone who can
    publish may move any pod: only by choice, and every service says so at start). `enforcement: audit`
    records what would be refused and lets it through, to turn authorization on without breaking anyone."""

    authorization: Literal["kubernetes", "subject", "none"] = "kubernetes"
    enforcement: Literal["enforce", "audit"] = "enforce"
    audience: Annotated[str, msgspec.Meta(min_length=1)] = "podherd"
    # A verified token's identity is reused for at most this long, and never past the token's expiry.
    token_cache_ttl: Duration = msgspec.field(default="1m", name="tokenCacheTTL")
    token_cache_size: Annotated[int, msgspec.Meta(ge=0)] = 10_000
    rate_limit: RateLimit = msgspec.field(default_factory=RateLimit)
    # The sending side (`podherd submit`, `drain`, `plan --apply`): the file holding the ServiceAccount token
    # its intents carry (a projected token rotates, so it is read at each send).
    token_file: str | None = None


class InterceptorConfig(Section):
    """What the gate does with an eviction of a pod opted in to evacuation: the job's mode (by default the
    configured defaultJobMode), and when that job failed, what the next eviction of the pod gets: `retry` (a
    new job, once `retryAfter` has passed since the failure; until then the failure, refused) or `evict`
    (the eviction goes through, under the pod's budgets as any eviction). `unmovable`: what an eviction of a
    pod no job could move gets (one that fails a filter: a single replica, `never evict`, a bare pod, an
    excluded namespace…): `allow` lets it through as if Podherd were not there, `refuse` answers 403 naming
    the rule."""

    mode: JobMode | None = None  # the jobs' mode; unset: migrationController.defaultJobMode
    on_failure: Literal["retry", "evict"] = "retry"
    retry_after: Duration = "1m"
    unmovable: Literal["allow", "refuse"] = "allow"


class GateConfig(Section):
    """The admission gate's webhook server (HTTPS, its certificate from files renewed in place) and who
    Podherd's own ServiceAccounts are: `system:serviceaccount:<namespace>:podherd-<service>`."""

    port: Port = 8443
    cert: str = "/var/run/secrets/podherd/gate/tls.crt"
    key: str = "/var/run/secrets/podherd/gate/tls.key"
    # The CA of the client certificate kube-apiserver presents to webhooks (its AdmissionConfiguration's
    # kubeConfigFile), and the names (CN or DNS SAN) one must carry; without both, no caller is verified.
    client_ca: str | None = msgspec.field(default=None, name="clientCA")
    client_names: list[str] = msgspec.field(default_factory=lambda: ["kube-apiserver"])
    # A review from a caller not verified so: `refuseWrites` answers it but starts no job for an eviction
    # (refused, saying why); `allow` trusts it (a NetworkPolicy must keep all but the API server off).
    unverified_callers: Literal["refuseWrites", "allow"] = "refuseWrites"
    namespace: Annotated[str, msgspec.Meta(min_length=1)] = "podherd"
    interceptor: InterceptorConfig = msgspec.field(default_factory=InterceptorConfig)

    def service_account(self, service: str) -> str:
        return f"system:serviceaccount:{self.namespace}:podherd-{service}"


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
    intents: IntentsConfig = msgspec.field(default_factory=IntentsConfig)
    gate: GateConfig = msgspec.field(default_factory=GateConfig)
    planner: PlannerConfig = msgspec.field(default_factory=PlannerConfig)
    http: HttpConfig = msgspec.field(default_factory=HttpConfig)
    logging: LoggingConfig = msgspec.field(default_factory=LoggingConfig)
    # The services' event loop: uvloop (libuv's, as network services on asyncio usually run), or asyncio's
    # own where uvloop cannot be installed.
    event_loop: Literal["uvloop", "asyncio"] = "uvloop"
    # This replica's identity: in leases, audit records and decisions.
    replica: str = msgspec.field(default_factory=_default_replica)
