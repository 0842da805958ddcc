"""Service links: the variables a kubelet gives every container for the Services of its namespace, and
Podherd's configuration, which reads PODHERD_* variables, beside them (kubesim/kubelet/service_links.py
follows the kubelet's rules; deploy/ turns them off for Podherd's pods, and the config ignores exactly their
names)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from kubesim.kubelet.service_links import from_services, service_env
from shared.config.loader import is_service_link, load_config
from shared.config.model import ConfigError, PodherdConfig

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def service(name: str, ip: str, *ports: dict[str, Any], namespace: str = "podherd") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterIP": ip, "ports": list(ports)},
    }


def deployed() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """deploy/'s Services (given cluster IPs, as the API server would) and pod templates."""
    docs = [d for d in yaml.safe_load_all((DEPLOY / "base" / "services.yaml").read_text()) if d]
    services = [
        {
            **d,
            "metadata": {**d["metadata"], "namespace": "podherd"},
            "spec": {**d["spec"], "clusterIP": f"10.96.0.{i}"},
        }
        for i, d in enumerate(d for d in docs if d["kind"] == "Service")
    ]
    pods = [
        {"metadata": {"namespace": "podherd"}, "spec": d["spec"]["template"]["spec"]}
        for d in docs
        if d["kind"] == "Deployment"
    ]
    return services, pods


MASTER = service("kubernetes", "10.96.0.1", {"name": "https", "port": 443}, namespace="default")


def test_a_service_yields_the_kubelets_variables() -> None:
    svc = service("podherd-watcher", "10.96.0.10", {"name": "http", "port": 8080, "protocol": "TCP"})
    assert from_services([svc]) == {
        "PODHERD_WATCHER_SERVICE_HOST": "10.96.0.10",
        "PODHERD_WATCHER_SERVICE_PORT": "8080",
        "PODHERD_WATCHER_SERVICE_PORT_HTTP": "8080",
        "PODHERD_WATCHER_PORT": "tcp://10.96.0.10:8080",
        "PODHERD_WATCHER_PORT_8080_TCP": "tcp://10.96.0.10:8080",
        "PODHERD_WATCHER_PORT_8080_TCP_PROTO": "tcp",
        "PODHERD_WATCHER_PORT_8080_TCP_PORT": "8080",
        "PODHERD_WATCHER_PORT_8080_TCP_ADDR": "10.96.0.10",
    }


def test_unnamed_first_port_other_protocols_and_ipv6() -> None:
    svc = service("dns", "fd00::a", {"port": 53, "protocol": "UDP"}, {"name": "dns-tcp", "port": 53})
    env = from_services([svc])
    assert env["DNS_SERVICE_PORT"] == "53" and "DNS_SERVICE_PORT_" not in "".join(
        k + " " for k in env if k == "x"
    )
    assert env["DNS_SERVICE_PORT_DNS_TCP"] == "53"
    assert env["DNS_PORT"] == "udp://[fd00::a]:53"
    assert env["DNS_PORT_53_UDP_PROTO"] == "udp" and env["DNS_PORT_53_TCP_PROTO"] == "tcp"


def test_which_services_a_pod_sees() -> None:
    headless = service("podherd-nats", "None", {"port": 4222})
    mine = service("podherd-tracker", "10.96.0.20", {"name": "http", "port": 8080})
    other = service("elsewhere", "10.96.0.30", {"port": 80}, namespace="other")
    pod = {"metadata": {"namespace": "podherd"}, "spec": {}}
    seen = service_env(pod, [MASTER, headless, mine, other])
    assert {k.split("_SERVICE_HOST")[0] for k in seen if k.endswith("_SERVICE_HOST")} == {
        "KUBERNETES",
        "PODHERD_TRACKER",
    }
    off = service_env({**pod, "spec": {"enableServiceLinks": False}}, [MASTER, headless, mine, other])
    assert off == from_services([MASTER])  # the master Service's variables are always given


def test_podherds_pods_start_with_the_environment_a_kubelet_gives_them() -> None:
    services, pods = deployed()
    assert len(services) == len(pods) == 4
    for pod in pods:
        assert pod["spec"]["enableServiceLinks"] is False
        assert not [k for k in service_env(pod, [MASTER, *services]) if k.startswith("PODHERD_")]
        # Even where the links are on (a cluster whose admission sets them): configuration loads.
        env = service_env({**pod, "spec": {**pod["spec"], "enableServiceLinks": True}}, [MASTER, *services])
        assert "PODHERD_WATCHER_PORT_8080_TCP_ADDR" in env
        config = load_config(DEPLOY / "config.yaml", env={**env, "PODHERD_REPLICA": "podherd-tracker-0"})
        assert config.replica == "podherd-tracker-0"


@pytest.mark.parametrize("name", ["PODHERD_NATS_URL", "PODHERD_WATCHER_SERVICEHOST", "PODHERD_HTTP__PORTS"])
def test_every_other_unknown_podherd_name_is_still_refused(name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        load_config(None, env={name: "x"})


def config_names(struct: type[msgspec.Struct] = PodherdConfig, prefix: str = "PODHERD") -> list[str]:
    names = []
    info = msgspec.inspect.type_info(struct)
    assert isinstance(info, msgspec.inspect.StructType)
    for f in info.fields:
        name = (
            f"{prefix}_{f.encode_name.upper()}"
            if prefix == "PODHERD"
            else f"{prefix}__{f.encode_name.upper()}"
        )
        names.append(name)
        inner = f.type.cls if isinstance(f.type, msgspec.inspect.StructType) else None
        if inner is not None:
            names += config_names(inner, name)
    return names


def test_no_configuration_name_looks_like_a_service_link() -> None:
    names = config_names()
    assert "PODHERD_HTTP__PORT" in names and "PODHERD_NATS__URL" in names
    assert [n for n in names if is_service_link(n)] == []
