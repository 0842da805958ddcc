"""The production topology's deployment: deploy/helm's values for the NATS and Valkey charts, checked against
each chart's own defaults (and Valkey's values.schema.json; the NATS chart ships no schema), and deploy/ha,
Podherd's kustomization for that topology, applied with the real kubectl.

The charts' values files and Valkey's schema are the charts' own, unchanged (tests/data/charts/README.md);
`helm template` renders both where a helm binary is on PATH."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from kubesim.apiserver.patch import merge_patch
from kubesim.sim import SimHandle
from podherd.harness.servers import find_nats_binary, free_port
from podherd.install import DEPLOY
from shared.config.loader import load_config
from shared.config.model import nats_servers
from tests.kubesim.test_kubectl import KUBECTL, kubectl

pytestmark = pytest.mark.integration

CHARTS = Path(__file__).parents[1] / "data" / "charts"
NATS_CHART, VALKEY_CHART = CHARTS / "nats-2.14.2", CHARTS / "valkey-4.0.2"
HELM_VALUES = DEPLOY / "helm"
HA = DEPLOY / "ha"
HELM = shutil.which("helm")


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def coalesce(defaults: Any, values: Any) -> Any:
    """The values a chart renders with: helm coalesces them as a JSON merge patch does (maps merged key by
    key, anything else replaced, a null removing the default)."""
    return merge_patch(defaults, values)


def strays(defaults: Mapping[str, Any], values: Mapping[str, Any], path: str = "") -> Iterator[str]:
    """Keys of `values` the chart does not have, and values of another type than its default: a misspelt key
    is silently ignored by a chart's templates. Below a key whose default is an empty map (free-form, like
    `config.merge`) anything goes."""
    for key, value in values.items():
        where = f"{path}{key}"
        if key not in defaults:
            yield f"{where}: not a key of the chart"
            continue
        default = defaults[key]
        if isinstance(default, Mapping):
            if not isinstance(value, Mapping):
                yield f"{where}: a map in the chart, {type(value).__name__} here"
            elif default:
                yield from strays(default, value, where + ".")
        elif default is not None and default != "" and type(default) is not type(value):
            yield f"{where}: {type(default).__name__} in the chart, {type(value).__name__} here"


def validate(values: Any) -> None:
    """Against Valkey's schema, whose `$schema` names no draft: helm reads it as draft 7."""
    schema = json.loads((VALKEY_CHART / "values.schema.json").read_text())
    jsonschema.Draft7Validator(schema).validate(values)


def test_the_valkey_values_pass_the_charts_schema_and_name_only_its_keys() -> None:
    defaults, ours = _yaml(VALKEY_CHART / "values.yaml"), _yaml(HELM_VALUES / "valkey.values.yaml")
    validate(coalesce(defaults, ours))
    assert list(strays(defaults, ours)) == []
    merged = coalesce(defaults, ours)
    assert merged["architecture"] == "replication" and merged["sentinel"]["enabled"] is True
    assert merged["replica"]["replicaCount"] == 3 and merged["sentinel"]["quorum"] == 2
    assert merged["auth"]["enabled"] is True and merged["auth"]["sentinel"] is True
    assert {"min-replicas-to-write 1", "min-replicas-max-lag 5", "appendonly yes"} <= set(
        merged["commonConfiguration"].splitlines()
    )


def test_the_nats_values_name_only_the_charts_keys() -> None:
    defaults, ours = _yaml(NATS_CHART / "values.yaml"), _yaml(HELM_VALUES / "nats.values.yaml")
    assert not (NATS_CHART / "values.schema.json").exists()  # the chart has none: its defaults are the check
    assert list(strays(defaults, ours)) == []
    merged = coalesce(defaults, ours)
    assert merged["config"]["cluster"] == {**defaults["config"]["cluster"], "enabled": True, "replicas": 3}
    jetstream = merged["config"]["jetstream"]
    assert (
        jetstream["enabled"]
        and jetstream["fileStore"]["enabled"]
        and jetstream["fileStore"]["pvc"]["enabled"]
    )
    assert merged["config"]["merge"] == {"00$include": "accounts.conf"}


def test_the_checks_catch_a_misspelt_key_and_a_wrong_value() -> None:
    defaults = _yaml(VALKEY_CHART / "values.yaml")
    typo = {"sentinel": {"masterSet": "podherd", "quorum": "2"}, "architecture": "cluster"}
    assert list(strays(defaults, typo)) == [
        "sentinel.masterSet: not a key of the chart",
        "sentinel.quorum: int in the chart, str here",
    ]
    with pytest.raises(jsonschema.ValidationError, match="'cluster' is not one of"):
        validate(coalesce(defaults, typo))


def test_a_clustered_nats_server_accepts_the_accounts_the_values_include(tmp_path: Path) -> None:
    """What the chart renders for these values, reduced to what matters: a clustered JetStream server that
    includes accounts.conf from its config directory (`00$include`)."""
    binary = find_nats_binary()
    if binary is None:
        pytest.skip("no nats-server binary")
    shutil.copy(DEPLOY / "nats" / "accounts.conf", tmp_path / "accounts.conf")
    route = free_port()
    conf = tmp_path / "nats.conf"
    conf.write_text(
        "include accounts.conf;\n"
        f'server_name: nats-0\nport: {free_port()}\njetstream: {{store_dir: "{tmp_path / "data"}"}}\n'
        f"cluster: {{name: nats, port: {route}, routes: [nats://127.0.0.1:{route}]}}\n"
    )
    check = subprocess.run([binary, "-t", "-c", str(conf)], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stderr


@pytest.mark.skipif(HELM is None, reason="helm is not on PATH (the checks above read the charts' own files)")
@pytest.mark.parametrize(
    ("chart", "values"),
    [
        ("nats/nats --version 2.14.2", "nats.values.yaml"),
        ("oci://registry-1.docker.io/bitnamicharts/valkey --version 4.0.2", "valkey.values.yaml"),
    ],
)
def test_helm_template_renders_the_values(chart: str, values: str) -> None:
    argv = [HELM or "helm", "template", "podherd-check", *chart.split(), "-f", str(HELM_VALUES / values)]
    rendered = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
    assert rendered.returncode == 0, rendered.stderr
    kinds = {d["kind"] for d in yaml.safe_load_all(rendered.stdout) if d}
    assert "StatefulSet" in kinds


def test_the_ha_configuration_reads_its_password_from_a_file_and_speaks_tls() -> None:
    config = load_config(HA / "config.yaml", env={})
    assert config.nats.replicas == 3 and len(nats_servers(config.nats.url)) == 3
    assert config.redis.sentinel is not None and config.redis.sentinel.use_password
    assert (
        config.redis.sentinel.master_name
        == _yaml(HELM_VALUES / "valkey.values.yaml")["sentinel"]["primarySet"]
    )
    assert config.redis.replicas_to_wait_for == 1
    assert config.redis.password_file and "@" not in config.redis.url  # never a password in the ConfigMap
    assert config.redis.sentinel.password_file  # the chart's, for the Sentinels
    assert config.redis.url.startswith("rediss://") and config.redis.tls is not None
    tls = _yaml(HELM_VALUES / "valkey.values.yaml")["tls"]
    assert tls["enabled"] and tls["existingSecret"] == "valkey-server-tls"


@pytest.mark.kubectl
@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")
def test_kubectl_applies_the_ha_overlay(kubesim_factory: Callable[..., SimHandle]) -> None:
    sim = kubesim_factory()
    base = [d for d in yaml.safe_load_all(kubectl(sim, "kustomize", str(DEPLOY))) if d]
    applied = kubectl(sim, "apply", "-k", str(HA))
    assert applied.count(" created") == len(base) == 46, applied
    deployments = json.loads(kubectl(sim, "get", "deploy", "-n", "podherd", "-o", "json"))["items"]
    assert len(deployments) == 6  # the four services, the gate and the planner (no replica until scaled)
    passwords: dict[str, tuple[Any, ...]] = {}
    for d in deployments:
        spec = d["spec"]["template"]["spec"]
        env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"] if "REDIS" in e["name"]}
        volumes = {v["name"]: v for v in spec["volumes"]}
        if env or "redis-password" in volumes:
            secrets = (volumes["redis-password"]["secret"], volumes["sentinel-password"]["secret"])
            passwords[d["metadata"]["name"]] = (env, *secrets)
    # Only the two services that use Valkey: each as its own user, its password and the chart's (for the
    # Sentinels) as files, none in the environment.
    # (defaultMode 420: the API server's default for a secret volume)
    chart = {
        "secretName": "valkey",
        "items": [{"key": "valkey-password", "path": "password"}],
        "defaultMode": 420,
    }
    assert passwords == {
        f"podherd-{s}": (
            {"PODHERD_REDIS__USERNAME": f"podherd-{s}"},
            {"secretName": f"podherd-{s}-redis", "defaultMode": 420},
            chart,
        )
        for s in ("arbitrator", "tracker")
    }
    ha = [d for d in yaml.safe_load_all(kubectl(sim, "kustomize", str(HA))) if d]
    roles = [d for d in base if d["kind"] in ("ClusterRole", "ClusterRoleBinding", "ServiceAccount")]
    assert roles == [d for d in ha if d["kind"] in ("ClusterRole", "ClusterRoleBinding", "ServiceAccount")]
    config = next(c for c in ha if c["kind"] == "ConfigMap")["data"]["config.yaml"]
    assert yaml.safe_load(config) == _yaml(HA / "config.yaml")
