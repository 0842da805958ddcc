"""The files a kubelet gives a pod that runs as processes: its volumes, written as the kubelet's atomic
writer lays them out (`..data` pointing at a timestamped directory, each key a link into it), and the
kubelet-managed /etc/hosts, /etc/hostname and /etc/resolv.conf."""

from __future__ import annotations

import base64
import datetime
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kubesim.kubelet.pod_env import ConfigError, Lookup, field_value

Token = Callable[[str, int, str], str]  # (service account, expirationSeconds, audience) -> token
DEFAULT_MODE = 0o644
CLUSTER_DOMAIN = "cluster.local"


class MountError(Exception):
    """A volume cannot be set up: the kubelet's `MountVolume.SetUp failed` event says why."""


class VolumeError(Exception):
    """A volume of the pod failed to mount: the kubelet's `FailedMount` event message."""


def write_volumes(directory: Path, pod: Mapping[str, Any], lookup: Lookup, *, token: Token) -> None:
    """Each volume of the pod under `directory/<name>` (hostPath ones are the host's own)."""
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        target = directory / volume["name"]
        try:
            if "emptyDir" in volume:
                target.mkdir(parents=True, exist_ok=True)
            elif "hostPath" not in volume:
                atomic_write(target, volume_files(pod, volume, lookup, token=token))
        except (MountError, ConfigError) as exc:
            raise VolumeError(f'MountVolume.SetUp failed for volume "{volume["name"]}" : {exc}') from exc


def write_etc(directory: Path, pod: Mapping[str, Any], pod_ip: str, *, services: Mapping[str, str]) -> None:
    """The kubelet-managed hosts, hostname and resolv.conf files of the pod."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "hosts").write_text(hosts_file(pod, pod_ip, services))
    (directory / "hostname").write_text(hostname(pod) + "\n")
    (directory / "resolv.conf").write_text(resolv_conf(pod["metadata"]["namespace"]))


def atomic_write(directory: Path, files: Mapping[str, tuple[bytes, int]]) -> None:
    """`files` (relative path -> content, mode) under `directory`, swapped in at once as the kubelet does."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("..%Y_%m_%d_%H_%M_%S.%f")
    payload = directory / stamp
    payload.mkdir()
    for relative, (content, mode) in files.items():
        path = payload / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        path.chmod(mode)
    link = directory / "..data_tmp"
    link.unlink(missing_ok=True)
    link.symlink_to(stamp)
    old = os.readlink(directory / "..data") if (directory / "..data").is_symlink() else None
    os.replace(link, directory / "..data")
    for top in {relative.split("/")[0] for relative in files}:
        if not (directory / top).is_symlink():
            (directory / top).symlink_to(f"..data/{top}")
    if old:
        shutil.rmtree(directory / old, ignore_errors=True)


def _keyed(
    plural: str, source: Mapping[str, Any], namespace: str, *, lookup: Lookup, default_mode: int
) -> dict[str, tuple[bytes, int]]:
    name = source.get("name") or source.get("secretName") or ""
    obj = lookup(plural, namespace, name)
    if obj is None:
        if source.get("optional"):
            return {}
        raise MountError(f'{plural[:-1]} "{name}" not found')
    data: dict[str, bytes] = {k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()}
    for key, value in (obj.get("data") or {}).items():
        data[key] = base64.b64decode(value) if plural == "secrets" else str(value).encode()
    items = source.get("items")
    if not items:
        return {key: (value, default_mode) for key, value in data.items()}
    files: dict[str, tuple[bytes, int]] = {}
    for item in items:
        if item["key"] not in data:
            if source.get("optional"):
                continue
            kind = "secret" if plural == "secrets" else "configmap"
            raise MountError(
                f"configmap references non-existent config key: {item['key']}".replace("configmap", kind, 1)
            )
        files[item["path"]] = (data[item["key"]], int(item.get("mode") or default_mode))
    return files


def _downward(
    pod: Mapping[str, Any], items: list[dict[str, Any]], default_mode: int
) -> dict[str, tuple[bytes, int]]:
    files: dict[str, tuple[bytes, int]] = {}
    for item in items:
        if "fieldRef" not in item:
            raise MountError(f"kubesim writes no {', '.join(k for k in item if k != 'path')} into a volume")
        files[item["path"]] = (
            field_value(pod, item["fieldRef"]["fieldPath"]).encode(),
            int(item.get("mode") or default_mode),
        )
    return files


def volume_files(
    pod: Mapping[str, Any], volume: Mapping[str, Any], lookup: Lookup, *, token: Token
) -> dict[str, tuple[bytes, int]]:
    """The files of a configMap, secret, downwardAPI or projected volume."""
    namespace = pod["metadata"]["namespace"]
    for plural, key in (("configmaps", "configMap"), ("secrets", "secret")):
        if key in volume:
            source = volume[key]
            return _keyed(
                plural,
                source,
                namespace,
                lookup=lookup,
                default_mode=int(source.get("defaultMode") or DEFAULT_MODE),
            )
    if "downwardAPI" in volume:
        source = volume["downwardAPI"]
        return _downward(pod, source.get("items") or [], int(source.get("defaultMode") or DEFAULT_MODE))
    if "projected" not in volume:
        kinds = ", ".join(k for k in volume if k != "name")
        raise MountError(f"kubesim's kubelet mounts no {kinds} volume")
    projected = volume["projected"]
    mode = int(projected.get("defaultMode") or DEFAULT_MODE)
    files: dict[str, tuple[bytes, int]] = {}
    account = (pod.get("spec") or {}).get("serviceAccountName") or "default"
    for source in projected.get("sources") or []:
        if "serviceAccountToken" in source:
            ref = source["serviceAccountToken"]
            value = token(account, int(ref.get("expirationSeconds") or 3600), ref.get("audience") or "")
            files[ref["path"]] = (value.encode(), int(ref.get("mode") or mode))
        elif "configMap" in source:
            files.update(
                _keyed("configmaps", source["configMap"], namespace, lookup=lookup, default_mode=mode)
            )
        elif "secret" in source:
            files.update(_keyed("secrets", source["secret"], namespace, lookup=lookup, default_mode=mode))
        elif "downwardAPI" in source:
            files.update(_downward(pod, source["downwardAPI"].get("items") or [], mode))
        else:
            raise MountError(f"kubesim projects no {', '.join(source)}")
    return files


def hostname(pod: Mapping[str, Any]) -> str:
    """The pod's host name: `spec.hostname`, else its name."""
    return str((pod.get("spec") or {}).get("hostname") or pod["metadata"]["name"])


def hosts_file(pod: Mapping[str, Any], pod_ip: str, services: Mapping[str, str]) -> str:
    """The kubelet-managed /etc/hosts, then `services` (address -> names): kubesim's cluster DNS."""
    spec = pod.get("spec") or {}
    hostname = spec.get("hostname") or pod["metadata"]["name"]
    names = hostname
    if spec.get("subdomain"):
        names = (
            f"{hostname}.{spec['subdomain']}.{pod['metadata']['namespace']}.svc.{CLUSTER_DOMAIN}\t{hostname}"
        )
    lines = [
        "# Kubernetes-managed hosts file.",
        "127.0.0.1\tlocalhost",
        "::1\tlocalhost ip6-localhost ip6-loopback",
        "fe00::0\tip6-localnet",
        "fe00::0\tip6-mcastprefix",
        "fe00::1\tip6-allnodes",
        "fe00::2\tip6-allrouters",
        f"{pod_ip}\t{names}",
    ]
    aliases = spec.get("hostAliases") or []
    if aliases:
        lines += ["", "# Entries added by HostAliases."]
        lines += [f"{a['ip']}\t{chr(9).join(a.get('hostnames') or [])}" for a in aliases]
    if services:
        lines += ["", "# kubesim's cluster DNS: the Services it carries to servers it was told about."]
        lines += [f"{address}\t{names}" for address, names in services.items()]
    return "\n".join(lines) + "\n"


def service_names(namespace: str, service: str, pod_namespace: str) -> str:
    """The names a pod resolves a Service by, the short one only from the Service's own namespace."""
    names = [
        f"{service}.{namespace}.svc.{CLUSTER_DOMAIN}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}",
    ]
    if namespace == pod_namespace:
        names.append(service)
    return " ".join(names)


def resolv_conf(namespace: str) -> str:
    search = f"{namespace}.svc.{CLUSTER_DOMAIN} svc.{CLUSTER_DOMAIN} {CLUSTER_DOMAIN}"
    return f"search {search}\noptions ndots:5\n"
