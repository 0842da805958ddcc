"""A Service as the API server stores it: its defaults (SetDefaults_Service), a cluster IP allocated from the
service range (kubesim's is loopback, 127.96.0.0/16, above the addresses it gives the Services it was told
about), node ports for NodePort and LoadBalancer Services, an empty load balancer status; on update, what
was allocated is kept and may not change."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

from kubesim.apiserver.errors import FieldError, invalid_fields
from kubesim.apiserver.records import Obj

SERVICE_RANGE = ipaddress.ip_network("127.96.0.0/16")
FIRST_ALLOCATED = int(ipaddress.ip_address("127.96.2.0"))
NODE_PORTS = range(30000, 32768)
HEADLESS = "None"


def defaulted(service: Obj, old: Obj | None, existing: Iterable[Obj]) -> None:
    """Fill in `service` (new, or replacing `old`) given the Services that exist."""
    spec = service.setdefault("spec", {})
    kind = spec.setdefault("type", "ClusterIP")
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        if kind != "ExternalName":
            port.setdefault("targetPort", port.get("port"))
    if kind == "ExternalName":
        return
    spec.setdefault("sessionAffinity", "None")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    if kind in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if kind == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)
    taken = list(existing)
    before = (old or {}).get("spec") or {}
    _cluster_ip(service, before, taken)
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")
    if kind in ("NodePort", "LoadBalancer"):
        _node_ports(spec, before, taken)
    service.setdefault("status", {"loadBalancer": {}})


def _cluster_ip(service: Obj, before: Obj, taken: list[Obj]) -> None:
    spec, name = service["spec"], service["metadata"].get("name", "")
    kept = before.get("clusterIP")
    wanted = spec.get("clusterIP") or (spec.get("clusterIPs") or [None])[0]
    if kept and wanted and wanted != kept:
        error = FieldError("FieldValueInvalid", "spec.clusterIPs[0]", wanted, "may not change once set")
        raise invalid_fields("Service", "", name, errors=[error])
    address = wanted or kept or _free_ip(taken)
    spec["clusterIP"], spec["clusterIPs"] = address, [address]


def _free_ip(taken: list[Obj]) -> str:
    used = {(s.get("spec") or {}).get("clusterIP") for s in taken}
    for number in range(FIRST_ALLOCATED, int(SERVICE_RANGE.broadcast_address)):
        candidate = str(ipaddress.ip_address(number))
        if candidate not in used:
            return candidate
    raise RuntimeError("the service IP range is full")


def _node_ports(spec: Obj, before: Obj, taken: list[Obj]) -> None:
    used = {p.get("nodePort") for s in taken for p in (s.get("spec") or {}).get("ports") or []}
    kept = {p.get("port"): p.get("nodePort") for p in before.get("ports") or [] if p.get("nodePort")}
    free = (n for n in NODE_PORTS if n not in used)
    for port in spec.get("ports") or []:
        if not port.get("nodePort"):
            port["nodePort"] = kept.get(port.get("port")) or next(free)


def services_but(existing: Iterable[Obj], service: Obj) -> list[Any]:
    """The other Services: what is allocated to them."""
    meta = service["metadata"]
    key = (meta.get("namespace"), meta.get("name"))
    return [s for s in existing if (s["metadata"].get("namespace"), s["metadata"].get("name")) != key]
