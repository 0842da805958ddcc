"""The defaulting functions of Kubernetes 1.32 that its OpenAPI schemas do not carry (pkg/apis/core/v1 and
pkg/apis/apps/v1 `SetDefaults_*`, and the DefaultTolerationSeconds admission plugin), for what kubesim
stores: every pod spec (a pod's, or a workload's template), its containers, ports, probes and volumes, and
the workloads themselves. Each fills in only what the object leaves unset."""

from __future__ import annotations

from typing import Any

from kubesim.apiserver.records import Obj

FILE_MODE = 0o644
TOLERATION_SECONDS = 300
NOT_READY, UNREACHABLE = "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"


def pod_spec(spec: Obj) -> None:
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for kind in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(kind) or []:
            _container(container, host_network=bool(spec.get("hostNetwork")))
    for volume in spec.get("volumes") or []:
        _volume(volume)


def pod_only(spec: Obj) -> None:
    """What SetDefaults_Pod adds to a pod's spec and not to a template's."""
    spec.setdefault("enableServiceLinks", True)


def default_tolerations(spec: Obj) -> None:
    """DefaultTolerationSeconds: a pod tolerates its node being not ready or unreachable for 300 s, unless
    it says otherwise for either."""
    tolerations = spec.setdefault("tolerations", [])
    for key in (NOT_READY, UNREACHABLE):
        if not any(
            t.get("key") in (key, "", None) and t.get("effect") in ("NoExecute", "", None)
            for t in tolerations
        ):
            added = {"key": key, "operator": "Exists", "effect": "NoExecute"}
            tolerations.append({**added, "tolerationSeconds": TOLERATION_SECONDS})


def _tolerates(toleration: Obj, key: str) -> bool:
    """Whether a toleration covers `key`'s NoExecute taint (an empty key or effect covers every one)."""
    return toleration.get("key") in (key, "", None) and toleration.get("effect") in ("NoExecute", "", None)


def _container(container: Obj, *, host_network: bool) -> None:
    if not container.get("imagePullPolicy"):
        latest = _tag(str(container.get("image") or "")) == "latest"
        container["imagePullPolicy"] = "Always" if latest else "IfNotPresent"
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    container.setdefault("resources", {})
    for port in container.get("ports") or []:
        port.setdefault("protocol", "TCP")
        if host_network and "hostPort" not in port:
            port["hostPort"] = port.get("containerPort")
    for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
        if isinstance(probe := container.get(kind), dict):
            _probe(probe)


def _tag(image: str) -> str:
    """The tag an image reference names: `latest` when it names neither a tag nor a digest."""
    if "@" in image:
        return ""
    last = image.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else "latest"


def _probe(probe: Obj) -> None:
    probe.setdefault("timeoutSeconds", 1)
    probe.setdefault("periodSeconds", 10)
    probe.setdefault("successThreshold", 1)
    probe.setdefault("failureThreshold", 3)
    if isinstance(http := probe.get("httpGet"), dict):
        http.setdefault("path", "/")
        http.setdefault("scheme", "HTTP")


def _volume(volume: Obj) -> None:
    sources = set(volume) - {"name"}
    if not sources:
        volume["emptyDir"] = {}
    for kind in ("secret", "configMap", "downwardAPI", "projected"):
        if isinstance(source := volume.get(kind), dict):
            source.setdefault("defaultMode", FILE_MODE)


def workload(kind: str, spec: Obj) -> None:
    """apps/v1's SetDefaults for a Deployment, StatefulSet, DaemonSet or ReplicaSet, its template included."""
    if kind != "DaemonSet":
        spec.setdefault("replicas", 1)
    if kind != "ReplicaSet":
        spec.setdefault("revisionHistoryLimit", 10)
    if kind == "Deployment":
        spec.setdefault("progressDeadlineSeconds", 600)
    if kind == "StatefulSet":
        strategy = spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
        if strategy.get("type") == "RollingUpdate":
            strategy.setdefault("rollingUpdate", {"partition": 0})
        retention = spec.setdefault("persistentVolumeClaimRetentionPolicy", {})
        retention.setdefault("whenDeleted", "Retain")
        retention.setdefault("whenScaled", "Retain")
    if kind == "DaemonSet":
        strategy = spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
        if strategy.get("type") == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            rolling.setdefault("maxUnavailable", 1)
            rolling.setdefault("maxSurge", 0)
    template: Any = spec.get("template")
    if isinstance(template, dict) and isinstance(template.get("spec"), dict):
        pod_spec(template["spec"])
