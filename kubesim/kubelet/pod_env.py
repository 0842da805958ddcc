"""A container's environment, built by the kubelet's rules (pkg/kubelet/kubelet_pods.go
`makeEnvironmentVariables`, third_party/forked/golang/expansion):

- `envFrom` sources in order (a key that is no valid variable name is skipped), then `env` in order, each
  value with `$(VAR)` expanded from what is defined so far and the service links (`$$` is a literal `$`, an
  undefined reference stays as written); then the service-link variables that neither defined;
- `valueFrom`: `fieldRef` (the pod's downward API), `configMapKeyRef`, `secretKeyRef`; a missing object or key
  that is not `optional` fails the container with the kubelet's `CreateContainerConfigError` message.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubesim.options import ImageConfig

Lookup = Callable[[str, str, str], Mapping[str, Any] | None]  # (plural, namespace, name) -> object
_C_IDENTIFIER = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")


class ConfigError(Exception):
    """The container cannot be configured: the kubelet's CreateContainerConfigError."""


def expand(value: str, env: Mapping[str, str]) -> str:
    out: list[str] = []
    i = 0
    while i < len(value):
        if value[i] == "$" and i + 1 < len(value):
            nxt = value[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                end = value.find(")", i + 2)
                if end != -1:
                    name = value[i + 2 : end]
                    out.append(env[name] if name in env else value[i : end + 1])
                    i = end + 1
                    continue
        out.append(value[i])
        i += 1
    return "".join(out)


def field_value(pod: Mapping[str, Any], path: str) -> str:
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    subscript = _SUBSCRIPT.match(path)
    if subscript:
        return str((meta.get(subscript.group(1)) or {}).get(subscript.group(2), ""))
    if path in ("metadata.labels", "metadata.annotations"):
        values = meta.get(path.split(".")[1]) or {}
        return "\n".join(f'{k}="{v}"' for k, v in sorted(values.items()))
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.hostIP": status.get("hostIP"),
        "status.podIP": status.get("podIP"),
        "status.hostIPs": ",".join(i.get("ip", "") for i in status.get("hostIPs") or []),
        "status.podIPs": ",".join(i.get("ip", "") for i in status.get("podIPs") or []),
    }
    if path not in simple:
        raise ConfigError(f'unsupported fieldPath: "{path}"')
    return str(simple[path] or "")


def _data(plural: str, obj: Mapping[str, Any]) -> dict[str, str]:
    if plural == "secrets":
        return {k: base64.b64decode(v).decode(errors="replace") for k, v in (obj.get("data") or {}).items()}
    return {**(obj.get("binaryData") or {}), **(obj.get("data") or {})}


def _source(
    lookup: Lookup, plural: str, namespace: str, *, name: str, optional: bool
) -> dict[str, str] | None:
    obj = lookup(plural, namespace, name)
    if obj is None:
        if optional:
            return None
        raise ConfigError(f'{plural[:-1]} "{name}" not found')
    return _data(plural, obj)


def _key_ref(lookup: Lookup, plural: str, namespace: str, *, ref: Mapping[str, Any]) -> str | None:
    optional = bool(ref.get("optional"))
    data = _source(lookup, plural, namespace, name=ref.get("name", ""), optional=optional)
    if data is None:
        return None
    if ref["key"] not in data:
        if optional:
            return None
        kind = "Secret" if plural == "secrets" else "ConfigMap"
        raise ConfigError(f"couldn't find key {ref['key']} in {kind} {namespace}/{ref.get('name', '')}")
    return data[ref["key"]]


def container_env(
    pod: Mapping[str, Any], container: Mapping[str, Any], service_env: Mapping[str, str], *, lookup: Lookup
) -> dict[str, str]:
    namespace = pod["metadata"]["namespace"]
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix") or ""
        for plural, key in (("configmaps", "configMapRef"), ("secrets", "secretRef")):
            ref = source.get(key)
            if ref is None:
                continue
            data = _source(
                lookup, plural, namespace, name=ref.get("name", ""), optional=bool(ref.get("optional"))
            )
            for key_name, key_value in (data or {}).items():
                if _C_IDENTIFIER.match(prefix + key_name):
                    env[prefix + key_name] = key_value
    for var in container.get("env") or []:
        name, value_from = var["name"], var.get("valueFrom")
        if value_from is None:
            env[name] = expand(var.get("value") or "", {**service_env, **env})
            continue
        value: str | None = None
        if "fieldRef" in value_from:
            value = field_value(pod, value_from["fieldRef"]["fieldPath"])
        elif "configMapKeyRef" in value_from:
            value = _key_ref(lookup, "configmaps", namespace, ref=value_from["configMapKeyRef"])
        elif "secretKeyRef" in value_from:
            value = _key_ref(lookup, "secrets", namespace, ref=value_from["secretKeyRef"])
        else:
            raise ConfigError(f"kubesim does not resolve {', '.join(value_from)} for {name}")
        if value is not None:
            env[name] = value
    for name, value in service_env.items():
        env.setdefault(name, value)
    return env


def verify_run_as_non_root(pod: Mapping[str, Any], container: Mapping[str, Any], image: ImageConfig) -> None:
    """The kubelet's check of `runAsNonRoot` against the user the container would run as."""
    pod_context = pod["spec"].get("securityContext") or {}
    context = container.get("securityContext") or {}
    if not context.get("runAsNonRoot", pod_context.get("runAsNonRoot")):
        return
    meta = pod["metadata"]
    where = f'(pod: "{meta["name"]}_{meta["namespace"]}({meta["uid"]})", container: {container["name"]})'
    user = context.get("runAsUser", pod_context.get("runAsUser"))
    if user is not None:
        if int(user) == 0:
            raise ConfigError(f"container's runAsUser breaks non-root policy {where}")
        return
    if not image.user.isdigit():
        raise ConfigError(
            f"container has runAsNonRoot and image has non-numeric user ({image.user}), cannot verify user is"
            f" non-root {where}"
        )
    if int(image.user) == 0:
        raise ConfigError(f"container has runAsNonRoot and image will run as root {where}")


def command_line(container: Mapping[str, Any], image: ImageConfig, env: Mapping[str, str]) -> list[str]:
    """What the runtime execs: `command` replaces the image's ENTRYPOINT (and its CMD), `args` its CMD;
    `$(VAR)` expanded from the container's environment."""
    command, args = container.get("command"), container.get("args")
    if command:
        argv = [*command, *(args or [])]
    else:
        argv = [*image.entrypoint, *(args if args is not None else image.cmd)]
    return [expand(arg, env) for arg in argv]
