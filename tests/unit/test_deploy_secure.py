"""deploy/ secure by default, checked from its files: NATS only over TLS with each service as the user its
certificate names, every certificate a Deployment mounts made by cert-manager (or `podherd certs`) for the
user the shipped accounts know, and NetworkPolicies in front of the NATS and Valkey charts' pods."""

from __future__ import annotations

import base64
import hashlib
import re
import stat
from pathlib import Path
from typing import Any

import yaml

from podherd.certs import make
from podherd.install import DEPLOY
from shared.config.loader import load_config
from shared.nats import bus
from shared.nats.permissions import accounts


def docs(*parts: str) -> list[dict[str, Any]]:
    found = []
    for part in parts:
        for name in yaml.safe_load((DEPLOY / part / "kustomization.yaml").read_text())["resources"]:
            if name.endswith(".yaml"):
                found += [d for d in yaml.safe_load_all((DEPLOY / part / name).read_text()) if d]
    return found


def test_each_service_talks_to_nats_over_tls_as_its_own_certificate() -> None:
    for config in ("config.yaml", "ha/config.yaml"):
        loaded = load_config(DEPLOY / config, env={})
        nats, redis = loaded.nats, loaded.redis
        assert all(url.startswith("tls://") for url in re.split(r",\s*", nats.url)), nats.url
        assert nats.tls is not None and nats.tls.cert and nats.tls.key and nats.tls.ca
        # Redis over TLS too, its server's certificate from the same CA (valkey-server-tls)
        assert redis.url.startswith("rediss://") and redis.tls is not None and redis.tls.ca == nats.tls.ca
    mounted = {}
    for d in docs("base"):
        if d["kind"] == "Deployment":
            volumes = {v["name"]: v for v in d["spec"]["template"]["spec"]["volumes"]}
            mounted[d["metadata"]["name"]] = volumes.get("nats-tls", {}).get("secret", {}).get("secretName")
    assert mounted == {
        **{
            f"podherd-{s}": f"podherd-{s}-nats"
            for s in ("watcher", "arbitrator", "executor", "tracker", "planner")
        },
        "podherd-gate": None,  # the gate speaks to the API server alone: no NATS user
    }


def test_every_nats_user_has_its_certificate_from_cert_manager_and_podherd_certs() -> None:
    certificates = {
        d["spec"]["secretName"]: d["spec"]["commonName"]
        for d in docs("cert-manager")
        if d["kind"] == "Certificate"
    }
    users = {u["user"] for u in accounts(bus.Subjects("podherd"))["PODHERD"]["users"]}
    assert {f"CN={cn}" for secret, cn in certificates.items() if secret.endswith("-nats")} == users
    assert all(certificates[f"{cn.removeprefix('CN=')}-nats"] == cn.removeprefix("CN=") for cn in users)
    assert {"nats-server-tls", "valkey-server-tls", "podherd-gate-tls"} <= set(certificates)
    made = {s["metadata"]["name"] for s in yaml.safe_load_all(make("podherd").yaml)}
    assert made == set(certificates) - {"podherd-ca"} | {"podherd-arbitrator-redis", "podherd-tracker-redis"}


def test_only_podherd_reaches_the_nats_and_valkey_pods_and_the_api_server_the_gate() -> None:
    policies = {d["metadata"]["name"]: d["spec"] for d in docs("base") if d["kind"] == "NetworkPolicy"}
    assert policies["nats"]["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "nats"}}
    assert policies["valkey"]["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "valkey"}}
    gate = policies.pop("podherd-gate")
    assert gate["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "podherd-gate"}}
    webhook = gate["ingress"][0]
    assert [list(source) for source in webhook["from"]] == [["ipBlock"]] and webhook["ports"][0][
        "port"
    ] == "https"
    for spec in policies.values():
        assert spec["policyTypes"] == ["Ingress"]
        clients = spec["ingress"][0]["from"]
        assert {"podSelector": {"matchLabels": {"app.kubernetes.io/part-of": "podherd"}}} in clients


def test_podherd_certs_gives_deploy_ha_the_valkey_users_with_their_passwords_hashed(tmp_path: Path) -> None:
    made = {s["metadata"]["name"]: s for s in yaml.safe_load_all(make("podherd", keep=str(tmp_path)).yaml)}
    conf = (tmp_path / "valkey.common.conf").read_text()
    chart = yaml.safe_load((DEPLOY / "helm" / "valkey.values.yaml").read_text())["commonConfiguration"]
    assert conf.startswith(chart.rstrip("\n"))  # the chart's own lines kept
    for service in ("arbitrator", "tracker"):
        password = base64.b64decode(made[f"podherd-{service}-redis"]["data"]["password"]).decode()
        assert f"user podherd-{service} on " in conf and password not in conf
        assert f"#{hashlib.sha256(password.encode()).hexdigest()}" in conf
    ha = load_config(DEPLOY / "ha" / "config.yaml", env={"PODHERD_REDIS__USERNAME": "podherd-tracker"})
    assert ha.redis.sentinel is not None and ha.redis.sentinel.password_file and ha.redis.password_file


def test_the_gate_serves_the_certificate_its_webhooks_trust_and_fails_as_documented() -> None:
    base = {d["metadata"]["name"]: d for d in docs("base") if d["kind"] == "Deployment"}
    volumes = base["podherd-gate"]["spec"]["template"]["spec"]["volumes"]
    assert {"name": "serving-tls", "secret": {"secretName": "podherd-gate-tls"}} in volumes
    [certificate] = [d for d in docs("cert-manager") if d["metadata"]["name"] == "podherd-gate"]
    [hooks] = [d for d in docs("base") if d["kind"] == "ValidatingWebhookConfiguration"]
    assert hooks["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "podherd/podherd-gate"
    assert certificate["spec"]["secretName"] == "podherd-gate-tls"
    for hook in hooks["webhooks"]:
        service = hook["clientConfig"]["service"]
        assert f"{service['name']}.{service['namespace']}.svc" in certificate["spec"]["dnsNames"]
        # Fails open only where it hears every eviction of the cluster (a pod opted in by its own label).
        policy = "Ignore" if hook["name"] == "evictions.gate.podherd.io" else "Fail"
        assert hook["failurePolicy"] == policy and hook["timeoutSeconds"] <= 10
        exempt = {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["podherd", "kube-system"],
        }
        assert "namespaceSelector" not in hook or exempt in hook["namespaceSelector"]["matchExpressions"]


def test_podherd_certs_keeps_the_gates_certificate_files_for_a_gate_outside_the_cluster(
    tmp_path: Path,
) -> None:
    made = {s["metadata"]["name"]: s for s in yaml.safe_load_all(make("podherd", keep=str(tmp_path)).yaml)}
    gate = tmp_path / "gate"
    for file in ("ca.crt", "tls.crt", "tls.key"):
        assert (gate / file).read_bytes() == base64.b64decode(made["podherd-gate-tls"]["data"][file])
    assert stat.S_IMODE((gate / "tls.key").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "redis-acl.txt").stat().st_mode) == 0o600


def test_podherd_certs_run_again_with_its_dir_prints_the_same_secrets(tmp_path: Path) -> None:
    """Re-run with the same --dir, it changes nothing that exists (`kubectl apply` finds all unchanged); a
    part asked for later is issued by the same CA."""
    first = make("podherd", ("nats", "redis-passwords"), keep=str(tmp_path)).yaml
    assert make("podherd", ("nats", "redis-passwords"), keep=str(tmp_path)).yaml == first
    ca = (tmp_path / "ca.crt").read_bytes()
    later = {
        s["metadata"]["name"]: s
        for s in yaml.safe_load_all(make("podherd", ("gate",), keep=str(tmp_path)).yaml)
    }
    assert set(later) == {"podherd-gate-tls"}
    assert base64.b64decode(later["podherd-gate-tls"]["data"]["ca.crt"]) == ca
    everything = make("podherd", keep=str(tmp_path)).yaml
    assert all(doc in list(yaml.safe_load_all(everything)) for doc in yaml.safe_load_all(first))
    assert make("podherd", keep=str(tmp_path)).yaml == everything
    fresh = make("podherd").yaml  # no --dir: a CA of its own, told apart
    assert base64.b64encode(ca).decode() not in fresh
