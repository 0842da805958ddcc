"""Loading Podherd's configuration (the schema is shared.config.model): defaults <- a YAML file
(Podherd's own, Koordinator's MigrationControllerArgs, or a descheduler profile) <- the environment
(`PODHERD_<SECTION>__<KEY>`, and the standard KUBECONFIG, NATS_URL, REDIS_URL); then what types alone
cannot say is validated."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec
import yaml

from shared.api.codec import error_location
from shared.api.eviction_gates import EVICTION_GATES, KOORDINATOR_GATES, PODHERD_GATES
from shared.api.selectors import parse_label_selector, selector_problem
from shared.api.workload_kinds import BUILTIN, WorkloadKind
from shared.config import windows
from shared.config.descheduler import normalised, parse_yaml
from shared.config.model import (
    WATCHABLE_KINDS,
    ConfigError,
    PodherdConfig,
    default_object_limiters,
    host_port,
    nats_servers,
)
from shared.core.durations import parse_duration
from shared.core.redact import without_credentials

log = logging.getLogger("shared.config.model")

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
    document = normalised(document)
    _apply_env(document, env)
    return config_from_dict(document)


def config_from_dict(document: Mapping[str, Any]) -> PodherdConfig:
    """Build and validate a config from a parsed document in Podherd's shape."""
    document = dict(document)
    nats = document.get("nats")
    if isinstance(nats, dict) and isinstance(nats.get("url"), list):  # a cluster's members, as a list
        document["nats"] = {**nats, "url": ",".join(str(u) for u in nats["url"])}
    try:
        config = msgspec.convert(document, type=PodherdConfig, str_keys=True)
    except msgspec.ValidationError as exc:
        key, reason = error_location(str(exc))
        raise ConfigError(key, reason) from exc
    validate(config)
    return config


def parse_config_text(text: str, env: Mapping[str, str] | None = None) -> PodherdConfig:
    """Load from YAML text (Podherd's shape, a bare MigrationControllerArgs, or a descheduler config)."""
    document = normalised(parse_yaml(text, "<text>"))
    _apply_env(document, {} if env is None else env)
    return config_from_dict(document)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError("", f"cannot read config file {path}: {exc.strerror}") from exc
    return parse_yaml(text, str(path))


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
        _set_path(document, parts, raw, var=name)
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


def _set_path(document: dict[str, Any], parts: list[str], raw: str, *, var: str) -> None:
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
    problem = selector_problem(args.label_selector) if args.label_selector is not None else None
    if problem is not None:
        raise ConfigError(f"{prefix}labelSelector.{problem[0]}", problem[1])
    if args.flow_control_qps is not None:
        try:
            float(args.flow_control_qps)
        except ValueError:
            raise ConfigError(
                prefix + "flowControlQPS", f"expected a number, got {args.flow_control_qps!r}"
            ) from None
    if args.namespaces and args.namespaces.include and args.namespaces.exclude:
        raise ConfigError(prefix + "namespaces", "only one of include and exclude can be set")
    # 0: jobs without a ttl of their own get no deadline, as Koordinator's 0 stamps none.
    if parse_duration(args.default_job_ttl) < 0:
        raise ConfigError(prefix + "defaultJobTTL", f"must not be negative, got {args.default_job_ttl!r}")
    if args.min_pod_age is not None:
        _positive_duration(prefix + "minPodAge", args.min_pod_age)
    _positive_duration(prefix + "arbitrationArgs.interval", args.arbitration_args.interval)
    if not args.object_limiters.items():
        args.object_limiters = default_object_limiters()
    for name, limiter in args.object_limiters.items():  # 0: that limiter is off, as in Koordinator
        if parse_duration(limiter.duration) < 0:
            raise ConfigError(
                f"{prefix}objectLimiters.{name}.duration", f"must not be negative, got {limiter.duration!r}"
            )
    for i, gate in enumerate(args.skip_eviction_gates):
        if gate not in EVICTION_GATES:
            raise ConfigError(f"{prefix}skipEvictionGates[{i}]", unknown_gate(gate))
    try:
        parse_label_selector(args.node_selector)
    except ValueError as exc:
        raise ConfigError(
            prefix + "nodeSelector", f"{args.node_selector!r} is not a label selector: {exc}"
        ) from None
    for i, window in enumerate(args.disruption_windows):
        problem = windows.check(window)
        if problem is not None:
            raise ConfigError(f"{prefix}disruptionWindows[{i}].{problem[0]}", problem[1])
    if not args.scheduler_names:
        raise ConfigError(prefix + "schedulerNames", "must name at least one scheduler")
    for key, urls, schemes in (
        ("nats.url", nats_servers(config.nats.url) or [""], ("nats://", "tls://", "ws://", "wss://")),
        ("redis.url", [config.redis.url], ("redis://", "rediss://", "unix://")),
    ):
        for url in urls:
            if not url.startswith(schemes):
                raise ConfigError(
                    key,
                    f"expected a URL starting with one of {', '.join(schemes)}, "
                    f"got {without_credentials(url)!r}",
                )
    for key, tls in (("nats.tls", config.nats.tls), ("redis.tls", config.redis.tls)):
        if tls is not None and bool(tls.cert) != bool(tls.key):
            raise ConfigError(key, "a client certificate (cert) and its key (key) go together")
    if config.redis.tls is not None and config.redis.url.startswith("unix://"):
        raise ConfigError("redis.tls", "TLS needs a TCP address (redis:// or rediss://), not a unix socket")
    sentinel = config.redis.sentinel
    if sentinel is not None:
        if not sentinel.addresses:
            raise ConfigError("redis.sentinel.addresses", "must name at least one Sentinel (host:port)")
        for i, address in enumerate(sentinel.addresses):
            if host_port(address) is None:
                raise ConfigError(f"redis.sentinel.addresses[{i}]", f"expected host:port, got {address!r}")
        if (
            sentinel.use_password
            and urlsplit(config.redis.url).password is None
            and config.redis.password_file is None
            and sentinel.password_file is None
        ):
            raise ConfigError(
                "redis.sentinel.usePassword",
                "neither redis.passwordFile nor redis.url gives a password to send the Sentinels",
            )
    for i, kind in enumerate(config.watcher.kinds):
        if kind not in WATCHABLE_KINDS:
            raise ConfigError(
                f"watcher.kinds[{i}]", f"unknown kind {kind!r}; known: {', '.join(WATCHABLE_KINDS)}"
            )
    _check_workload_kinds(config.watcher.workload_kinds)
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
        ("redis.waitTimeout", config.redis.wait_timeout),
    ):
        _positive_duration(key, value)


def _positive_duration(key: str, value: str) -> None:
    if parse_duration(value) <= 0:
        raise ConfigError(key, f"must be a positive duration, got {value!r}")


def unknown_gate(gate: str) -> str:
    """Why `gate` is refused, with the name meant where it is near one (Koordinator's plurals, Podherd's own
    gates without their prefix)."""

    def key(name: str) -> str:
        return name.removeprefix("podherd.io/").lower().rstrip("s")

    meant = [known for known in sorted(EVICTION_GATES) if key(known) == key(gate)]
    if meant:
        return f"unknown gate {gate!r}; did you mean {meant[0]!r}?"
    return f"unknown gate {gate!r}; known: {', '.join(KOORDINATOR_GATES + PODHERD_GATES)}"


def _check_workload_kinds(kinds: list[WorkloadKind]) -> None:
    seen: set[str] = set()
    for i, kind in enumerate(kinds):
        where = f"watcher.workloadKinds[{i}]"
        for field, value in (("kind", kind.kind), ("resource", kind.resource), ("version", kind.version)):
            if not value:
                raise ConfigError(f"{where}.{field}", "must not be empty")
        if kind.name in BUILTIN or kind.name in seen:
            said = "is read from its own objects" if kind.name in BUILTIN else "is listed twice"
            raise ConfigError(f"{where}.kind", f"{kind.name} {said}")
        seen.add(kind.name)
