"""Koordinator's and the descheduler's own documents, read as Podherd's configuration: a
MigrationControllerArgs, a DeschedulerConfiguration (its MigrationController's args for the pipeline, its
balance plugins' for the planner), or the ConfigMap that holds one; what Podherd does not read of them is
said in one warning."""

from __future__ import annotations

import logging
from typing import Any

import yaml

from shared.config.model import DESCHEDULER_KINDS, KOORDINATOR_KINDS, ConfigError
from shared.config.planner import POLICY_NAMES, RESOURCES

log = logging.getLogger("shared.config.model")
MIGRATION_PLUGIN = "MigrationController"


def parse_yaml(text: str, origin: str) -> dict[str, Any]:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError("", f"{origin} is not valid YAML: {exc}") from exc
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ConfigError("", f"{origin} must hold a mapping, got {type(document).__name__}")
    return document


def normalised(document: dict[str, Any]) -> dict[str, Any]:
    """Accept a Koordinator MigrationControllerArgs or DeschedulerConfiguration as they are, or the
    ConfigMap that holds one (Koordinator's shipped `descheduler-config.yaml`)."""
    if document.get("kind") == "ConfigMap":
        document = _from_config_map(document)
    kind = document.get("kind")
    if kind in KOORDINATOR_KINDS:
        return {"migrationController": document}
    if kind in DESCHEDULER_KINDS or ("profiles" in document and "migrationController" not in document):
        args = _migration_args_from_profiles(document.get("profiles"))
        planner, unread = planner_from_descheduler(document)
        _say_what_is_ignored(document, unread)
        return {"migrationController": args, **({"planner": planner} if planner else {})}
    return document


def _from_config_map(config_map: dict[str, Any]) -> dict[str, Any]:
    """The configuration a ConfigMap's `data` holds: the one value that is a Koordinator configuration."""
    data = config_map.get("data") or {}
    found = []
    for key, text in data.items() if isinstance(data, dict) else ():
        parsed = parse_yaml(str(text), f"data.{key}") if isinstance(text, str) else None
        if parsed and parsed.get("kind") in (*DESCHEDULER_KINDS, *KOORDINATOR_KINDS):
            found.append(parsed)
    if len(found) != 1:
        why = "none holds" if not found else f"{len(found)} hold"
        raise ConfigError("data", f"a ConfigMap is read for its one DeschedulerConfiguration; {why} one")
    return found[0]


def _migration_args_from_profiles(profiles: Any) -> dict[str, Any]:
    """The MigrationController's args: its pluginConfig, or Koordinator's defaults where a profile enables
    it without one. Podherd runs one controller, so profiles that configure it differently are refused."""
    if not isinstance(profiles, list):
        raise ConfigError("profiles", "expected a list of descheduler profiles")
    found: dict[str, dict[str, Any]] = {}
    for i, given in enumerate(profiles):
        profile = given or {}
        for j, plugin in enumerate(profile.get("pluginConfig") or []):
            if isinstance(plugin, dict) and plugin.get("name") == MIGRATION_PLUGIN:
                args = plugin.get("args") or {}
                if not isinstance(args, dict):
                    raise ConfigError(f"profiles[{i}].pluginConfig[{j}].args", "expected a mapping")
                if f"profiles[{i}]" in found:  # as Koordinator's validation refuses it
                    raise ConfigError(
                        f"profiles[{i}].pluginConfig[{j}]", "MigrationController configured twice"
                    )
                found[f"profiles[{i}]"] = args
        if f"profiles[{i}]" not in found and MIGRATION_PLUGIN in _enabled(profile):
            found[f"profiles[{i}]"] = {}
    if not found:
        raise ConfigError("profiles", "no profile enables or configures MigrationController")
    first, args = next(iter(found.items()))
    for where, other in found.items():
        if other != args:
            raise ConfigError(
                where, f"configures MigrationController otherwise than {first}: Podherd runs one controller"
            )
    return args


def _enabled(profile: dict[str, Any]) -> set[str]:
    stages = profile.get("plugins") or {}
    names: set[str] = set()
    for stage in stages.values() if isinstance(stages, dict) else ():
        enabled = (stage or {}).get("enabled") if isinstance(stage, dict) else None
        names.update(str(p.get("name")) for p in enabled or [] if isinstance(p, dict))
    return names


def _say_what_is_ignored(document: dict[str, Any], unread: list[str]) -> None:
    """One warning for what a DeschedulerConfiguration holds besides what Podherd reads of it (the
    MigrationController's args, the balance plugins' the planner takes): the descheduler process's own
    settings, the other plugins, and `unread`, the planner plugins' args it does not take."""
    settings = sorted(
        k for k in document if k not in ("apiVersion", "kind", "profiles") and k not in PLANNER_CAPS
    )
    plugins: set[str] = set()
    for profile in document.get("profiles") or []:
        if not isinstance(profile, dict):
            continue
        plugins.update(str(p.get("name")) for p in profile.get("pluginConfig") or [] if isinstance(p, dict))
        plugins.update(_enabled(profile))
    plugins.discard(MIGRATION_PLUGIN)
    plugins.discard("*")
    plugins.difference_update(PLANNER_PLUGINS)
    ignored = [f"the descheduler's own settings {', '.join(settings)}"] if settings else []
    ignored += [f"the plugins {', '.join(sorted(plugins))}"] if plugins else []
    ignored += unread
    if ignored:
        log.warning(
            "Koordinator's DeschedulerConfiguration: only the %s plugin's args and the planner's policies "
            "(%s) are read; ignored: %s",
            MIGRATION_PLUGIN,
            ", ".join(PLANNER_PLUGINS),
            "; ".join(ignored),
        )


# The descheduler's balance plugins the planner runs (`planner.policies`), the args of theirs it takes, and
# the descheduler's own caps it takes as the planner's.
PLANNER_PLUGINS = POLICY_NAMES
PLANNER_ARGS = ("thresholds", "targetThresholds", "numberOfNodes")
PLANNER_CAPS = ("maxNoOfPodsToEvictPerNode", "maxNoOfPodsToEvictPerNamespace", "maxNoOfPodsToEvictTotal")
PLANNER_RESOURCES = RESOURCES


def planner_from_descheduler(document: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The planner's section from a DeschedulerConfiguration (its balance plugins' args, in the order
    configured, and its caps; {} when it has none), and what of their args it does not read."""
    policies: list[dict[str, Any]] = []
    unread: list[str] = []
    for profile in document.get("profiles") or []:
        if not isinstance(profile, dict):
            continue
        configured = {
            str(p.get("name")): p.get("args") or {}
            for p in profile.get("pluginConfig") or []
            if isinstance(p, dict) and p.get("name") in PLANNER_PLUGINS
        }
        for name in [*configured, *sorted(_enabled(profile) & set(PLANNER_PLUGINS) - set(configured))]:
            args = configured.get(name) or {}
            policy: dict[str, Any] = {"name": name}
            for key in PLANNER_ARGS:
                value = args.get(key) if isinstance(args, dict) else None
                if isinstance(value, dict):
                    unread += [f"{name}.{key}.{r}" for r in value if r not in PLANNER_RESOURCES]
                    value = {r: v for r, v in value.items() if r in PLANNER_RESOURCES}
                if value is not None:
                    policy[key] = value
            unread += [
                f"{name}.{k}" for k in (args if isinstance(args, dict) else {}) if k not in PLANNER_ARGS
            ]
            if all(p["name"] != name for p in policies):
                policies.append(policy)
    caps = {key: document[key] for key in PLANNER_CAPS if key in document}
    planner = {**({"policies": policies} if policies else {}), **caps}
    return planner, unread
