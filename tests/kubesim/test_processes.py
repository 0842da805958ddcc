"""kubesim's kubelet runs a pod whose image it was told about as real processes, with what a kubelet gives
a container: the environment (service links, downward API, ConfigMaps, `$(VAR)`), volumes at their absolute
paths in the pod's own mount namespace, the projected ServiceAccount token and CA an in-cluster client
reads, a loopback pod IP in the pod's own network namespace, probes, restarts and SIGTERM-then-SIGKILL."""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubesim.options import ImageConfig
from kubesim.sim import SimHandle
from tests.kube import Kube, client_for, pod_ready, watch_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.xdist_group("pod-processes"),  # one worker runs every test whose pods are real processes
    pytest.mark.skipif(os.geteuid() != 0, reason="pods run as processes in their own namespaces: needs root"),
]
IMAGE = "kubesim.test/python"
PROGRAM = str(Path(__file__).resolve().parents[1] / "data" / "pod_program.py")
NODE = {"nodes": [{"name": "node-1", "capacity": {"cpu": "4", "memory": "8Gi", "pods": "20"}}]}


@pytest.fixture
def kube(kubesim_factory: Callable[..., SimHandle]) -> Kube:
    image = ImageConfig((sys.executable, PROGRAM), env={"PATH": "/usr/bin:/bin"}, working_dir="/tmp")
    return client_for(kubesim_factory(NODE, images={IMAGE: image}))


def pod(name: str, out: Path, env: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": f"{IMAGE}:1",
        "env": env or [],
        "ports": [{"name": "http", "containerPort": 8080}],
        "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 1},
        "volumeMounts": [{"name": "out", "mountPath": "/mnt/out"}, *spec.pop("mounts", [])],
    }
    volumes = [{"name": "out", "hostPath": {"path": str(out)}}, *spec.pop("volumes", [])]
    return {
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"containers": [container], "volumes": volumes, **spec},
    }


def wait_pod(kube: Kube, name: str, predicate: Callable[[Any], bool], timeout: float = 20.0) -> Any:
    try:
        state = watch_until(
            kube.core.list_namespaced_pod,
            lambda s: predicate(s[f"default/{name}"]),
            timeout,
            namespace="default",
        )
    except TimeoutError as exc:
        status = kube.core.read_namespaced_pod(name, "default").status
        events = [f"{e.reason}: {e.message}" for e in events_of(kube, name)]
        raise AssertionError(f"pod {name}: {status.container_statuses}; events {events}") from exc
    return state[f"default/{name}"]


def events_of(kube: Kube, name: str) -> list[Any]:
    return [e for e in kube.core.list_namespaced_event("default").items if e.involved_object.name == name]


def report(out: Path, start: int = 0) -> dict[str, Any]:
    return dict(json.loads((out / f"report-{start}.json").read_text()))


def test_a_pod_gets_what_a_kubelet_gives_it(kube: Kube, tmp_path: Path) -> None:
    kube.core.create_namespaced_config_map(
        "default",
        {"metadata": {"name": "settings"}, "data": {"level": "debug", "config.yaml": "a: 1\n", "1st": "x"}},
    )
    kube.core.create_namespaced_service(
        "default",
        {"metadata": {"name": "backend"}, "spec": {"clusterIP": "10.0.0.7", "ports": [{"port": 81}]}},
    )
    env: list[dict[str, Any]] = [
        {"name": "MODE", "value": "serve"},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "level"}}},
        {"name": "GREETING", "value": "$(POD_NAME) at $(BACKEND_SERVICE_HOST), $$(POD_NAME), $(UNSET)"},
        {
            "name": "READ",
            "value": f"/etc/app/config.yaml,/etc/app,{'/var/run/secrets/kubernetes.io/serviceaccount'}",
        },
        {"name": "LOOKUP", "value": "kubernetes.default.svc,app-1"},
    ]
    body = pod(
        "app-1",
        tmp_path,
        env,
        mounts=[{"name": "config", "mountPath": "/etc/app", "readOnly": True}],
        volumes=[
            {
                "name": "config",
                "configMap": {"name": "settings", "items": [{"key": "config.yaml", "path": "config.yaml"}]},
            }
        ],
    )
    body["spec"]["containers"][0]["envFrom"] = [
        {"configMapRef": {"name": "settings"}, "prefix": "CM_"},
        {"configMapRef": {"name": "settings"}},
    ]
    kube.core.create_namespaced_pod("default", body)
    running = wait_pod(kube, "app-1", pod_ready)

    ip = running.status.pod_ip
    assert ip.startswith("127.244.") and running.status.host_ip == "127.0.0.1"
    seen = report(tmp_path)
    env_seen = seen["env"]
    assert env_seen["POD_NAME"] == "app-1" and env_seen["POD_IP"] == ip and env_seen["LEVEL"] == "debug"
    assert env_seen["GREETING"] == "app-1 at 10.0.0.7, $(POD_NAME), $(UNSET)"
    assert env_seen["CM_level"] == "debug" and env_seen["CM_config.yaml"] == "a: 1\n"
    assert env_seen["CM_1st"] == "x"
    assert env_seen["level"] == "debug" and "1st" not in env_seen  # no variable name: skipped
    assert env_seen["BACKEND_PORT_81_TCP"] == "tcp://10.0.0.7:81"
    assert (
        env_seen["KUBERNETES_SERVICE_HOST"] == "127.96.0.1" and env_seen["KUBERNETES_SERVICE_PORT"] == "443"
    )
    assert env_seen["HOSTNAME"] == "app-1" and "PYTEST_CURRENT_TEST" not in env_seen  # nothing of ours leaks
    assert seen["hostname"] == "app-1" and seen["cwd"] == "/tmp"
    assert seen["files"]["/etc/app/config.yaml"] == "a: 1\n"
    stamp, *links = seen["files"]["/etc/app"]  # the kubelet's atomic writer: ..<time>/, ..data, config.yaml
    assert stamp.startswith("..20") and links == ["..data", "config.yaml"]
    assert seen["files"]["/var/run/secrets/kubernetes.io/serviceaccount"][-3:] == [
        "ca.crt",
        "namespace",
        "token",
    ]
    assert seen["lookups"] == {"kubernetes.default.svc": "127.96.0.1", "app-1": ip}
    # The in-cluster client reached the API server through the Service address, verified it with the
    # projected CA and was authenticated as the pod's ServiceAccount (which may not list ConfigMaps).
    assert seen["api"]["status"] == 403, seen["api"]
    assert "system:serviceaccount:default:default" in seen["api"]["body"]["message"]
    assert not Path("/etc/app").exists()  # mounted in the pod's namespace only

    with urllib.request.urlopen(f"http://{ip}:8080/", timeout=5) as answer:  # the pod IP, from the host
        assert answer.read() == b"ok"


def test_restarts_follow_the_policy_and_deletion_waits_for_the_grace(kube: Kube, tmp_path: Path) -> None:
    body = pod("flaky", tmp_path, [{"name": "MODE", "value": "crash-once"}], restartPolicy="OnFailure")
    kube.core.create_namespaced_pod("default", body)
    ready = wait_pod(kube, "flaky", pod_ready)
    status = ready.status.container_statuses[0]
    assert status.restart_count == 1
    assert status.last_state.terminated.exit_code == 3 and status.last_state.terminated.reason == "Error"
    assert report(tmp_path, 1)["pid"] != report(tmp_path, 0)["pid"]
    assert kube.core.read_namespaced_pod_log("flaky", "default") == "start 1\n"  # kubectl logs
    assert kube.core.read_namespaced_pod_log("flaky", "default", previous=True) == "start 0\n"

    kube.core.delete_namespaced_pod("flaky", "default", grace_period_seconds=5)
    watch_until(kube.core.list_namespaced_pod, lambda s: "default/flaky" not in s, 20, namespace="default")
    assert (tmp_path / "stopped").exists()  # SIGTERM: it ended on its own, well within the grace


def test_a_container_ignoring_sigterm_is_killed_after_the_grace(kube: Kube, tmp_path: Path) -> None:
    kube.core.create_namespaced_pod(
        "default", pod("stubborn", tmp_path, [{"name": "MODE", "value": "stubborn"}])
    )
    wait_pod(kube, "stubborn", pod_ready)
    pid = report(tmp_path)["pid"]
    started = time.monotonic()
    kube.core.delete_namespaced_pod("stubborn", "default", grace_period_seconds=1)
    watch_until(kube.core.list_namespaced_pod, lambda s: "default/stubborn" not in s, 20, namespace="default")
    assert time.monotonic() - started >= 1.0
    assert not (tmp_path / "stopped").exists()
    assert not Path(f"/proc/{pid}").exists()


def test_a_failing_liveness_probe_restarts_the_container(kube: Kube, tmp_path: Path) -> None:
    body = pod("sick", tmp_path, [{"name": "MODE", "value": "serve"}])
    body["spec"]["containers"][0]["livenessProbe"] = {
        "tcpSocket": {"port": 9999},
        "periodSeconds": 1,
        "failureThreshold": 2,
    }
    kube.core.create_namespaced_pod("default", body)
    restarted = wait_pod(
        kube,
        "sick",
        lambda p: (
            (p.status.container_statuses or [None])[0] is not None
            and p.status.container_statuses[0].restart_count >= 1
        ),
    )
    assert restarted.status.container_statuses[0].last_state.terminated.exit_code == 0  # SIGTERM, handled
    events = events_of(kube, "sick")
    assert any(e.reason == "Unhealthy" and e.message.startswith("Liveness probe failed") for e in events)
    assert any(e.reason == "Killing" for e in events)


def test_a_missing_config_map_is_the_kubelets_error(kube: Kube, tmp_path: Path) -> None:
    env = [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "x"}}}]
    kube.core.create_namespaced_pod("default", pod("unconfigured", tmp_path, env))
    waiting = wait_pod(
        kube,
        "unconfigured",
        lambda p: (
            bool(p.status.container_statuses)
            and p.status.container_statuses[0].state.waiting is not None
            and p.status.container_statuses[0].state.waiting.reason == "CreateContainerConfigError"
        ),
    )
    assert waiting.status.container_statuses[0].state.waiting.message == 'configmap "absent" not found'

    volume = [{"name": "cfg", "configMap": {"name": "absent"}}]
    kube.core.create_namespaced_pod("default", pod("unmounted", tmp_path, volumes=volume))

    def failed_mount(state: dict[str, Any]) -> bool:
        return any(
            e.involved_object.name == "unmounted" and e.reason == "FailedMount" for e in state.values()
        )

    watch_until(kube.core.list_namespaced_event, failed_mount, 20, namespace="default")
    events = events_of(kube, "unmounted")
    assert next(e.message for e in events if e.reason == "FailedMount") == (
        'MountVolume.SetUp failed for volume "cfg" : configmap "absent" not found'
    )
    assert kube.core.read_namespaced_pod("unmounted", "default").status.phase == "Pending"
