"""The environment a kubelet gives every container for the Services it can see ("service links"), built by
the kubelet's rules (pkg/kubelet/kubelet_pods.go `getServiceEnvVarMap`, pkg/kubelet/envvars `FromServices`):

- the Services of the pod's namespace when `enableServiceLinks` is true (the default), and always the master
  Service `kubernetes` of the `default` namespace; Services without a cluster IP (`None` or empty) never;
- for each: `<SVC>_SERVICE_HOST`, `<SVC>_SERVICE_PORT` (its first port), `<SVC>_SERVICE_PORT_<NAME>` per
  named port, then the Docker-link names `<SVC>_PORT` (the first port's URL) and per port
  `<SVC>_PORT_<n>_<PROTO>` with `_PROTO`, `_PORT` and `_ADDR`; `<SVC>` and `<NAME>` upper-cased with `-`
  turned into `_`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

MASTER_SERVICES = frozenset({"kubernetes"})


def env_name(name: str) -> str:
    return name.replace("-", "_").upper()


def _cluster_ip(service: Mapping[str, Any]) -> str:
    return str((service.get("spec") or {}).get("clusterIP") or "")


def from_services(services: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for service in services:
        ip = _cluster_ip(service)
        ports = (service.get("spec") or {}).get("ports") or []
        if ip in ("", "None") or not ports:
            continue
        svc = env_name(service["metadata"]["name"])
        env[f"{svc}_SERVICE_HOST"] = ip
        env[f"{svc}_SERVICE_PORT"] = str(ports[0]["port"])
        for port in ports:
            if port.get("name"):
                env[f"{svc}_SERVICE_PORT_{env_name(port['name'])}"] = str(port["port"])
        for i, port in enumerate(ports):
            protocol = port.get("protocol") or "TCP"
            host = f"[{ip}]" if ":" in ip else ip
            url = f"{protocol.lower()}://{host}:{port['port']}"
            if i == 0:
                env[f"{svc}_PORT"] = url
            prefix = f"{svc}_PORT_{port['port']}_{protocol.upper()}"
            env[prefix] = url
            env[f"{prefix}_PROTO"] = protocol.lower()
            env[f"{prefix}_PORT"] = str(port["port"])
            env[f"{prefix}_ADDR"] = ip
    return env


def service_env(pod: Mapping[str, Any], services: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The service-link variables of `pod`, given every Service in the cluster."""
    namespace = (pod.get("metadata") or {}).get("namespace") or "default"
    links = (pod.get("spec") or {}).get("enableServiceLinks", True)
    seen: dict[str, Mapping[str, Any]] = {}
    for service in services:
        if _cluster_ip(service) in ("", "None"):
            continue
        meta = service.get("metadata") or {}
        name, ns = meta.get("name", ""), meta.get("namespace") or "default"
        if ns == "default" and name in MASTER_SERVICES:
            seen.setdefault(name, service)
        elif ns == namespace and links:
            seen[name] = service
    return from_services(seen.values())
