"""The kubelet's rules kubesim's runtime follows, without processes: a container's environment, the files
of its volumes, the managed hosts file, runAsNonRoot, image references."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest

from kubesim.kubelet.pod_env import (
    ConfigError,
    command_line,
    container_env,
    expand,
    field_value,
    verify_run_as_non_root,
)
from kubesim.kubelet.pod_files import MountError, atomic_write, hosts_file, service_names, volume_files
from kubesim.kubelet.pod_status import MESSAGE_LOG_BYTES, MESSAGE_LOG_LINES, restart_delay, terminated
from kubesim.kubelet.runtime import repository
from kubesim.options import ImageConfig, SimOptions, podherd_image
from shared.config.model import nats_servers

POD: dict[str, Any] = {
    "metadata": {"name": "p", "namespace": "ns", "uid": "u-1", "labels": {"app": "a", "tier": "web"}},
    "spec": {"nodeName": "node-1", "serviceAccountName": "sa", "containers": [{"name": "c"}]},
    "status": {"podIP": "127.244.0.3", "hostIP": "127.0.0.1", "podIPs": [{"ip": "127.244.0.3"}]},
}
OBJECTS: dict[tuple[str, str, str], dict[str, Any]] = {
    ("configmaps", "ns", "cm"): {"data": {"k": "v", "x": "1"}},
    ("secrets", "ns", "s"): {"data": {"password": base64.b64encode(b"hunter2").decode()}},
}


def lookup(plural: str, namespace: str, name: str) -> dict[str, Any] | None:
    return OBJECTS.get((plural, namespace, name))


@pytest.mark.parametrize(
    ("value", "expanded"),
    [
        ("$(A)-$(B)", "1-two"),
        ("$$(A)", "$(A)"),  # escaped
        ("$(MISSING) stays", "$(MISSING) stays"),
        ("$(A", "$(A"),  # unterminated: as written
        ("a$b$", "a$b$"),
    ],
)
def test_expansion_follows_the_kubelets_rules(value: str, expanded: str) -> None:
    assert expand(value, {"A": "1", "B": "two"}) == expanded


def test_downward_api_fields() -> None:
    assert field_value(POD, "metadata.name") == "p"
    assert field_value(POD, "metadata.labels['tier']") == "web"
    assert field_value(POD, "metadata.labels") == 'app="a"\ntier="web"'
    assert field_value(POD, "status.podIPs") == "127.244.0.3"
    with pytest.raises(ConfigError, match=r'unsupported fieldPath: "spec\.priority"'):
        field_value(POD, "spec.priority")


def test_env_order_precedence_and_service_links() -> None:
    container = {
        "envFrom": [{"configMapRef": {"name": "cm"}}, {"secretRef": {"name": "s"}, "prefix": "S_"}],
        "env": [
            {"name": "k", "value": "own"},  # env wins over envFrom
            {"name": "SVC_SERVICE_HOST", "value": "mine"},  # and over service links
            {"name": "REF", "value": "$(k)@$(SVC_SERVICE_PORT)"},
            {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {
                "name": "GONE",
                "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "x", "optional": True}},
            },
        ],
    }
    links = {"SVC_SERVICE_HOST": "10.0.0.1", "SVC_SERVICE_PORT": "80"}
    env = container_env(POD, container, links, lookup=lookup)
    assert env == {
        "k": "own",
        "x": "1",
        "S_password": "hunter2",
        "SVC_SERVICE_HOST": "mine",
        "REF": "own@80",
        "NODE": "node-1",
        "SVC_SERVICE_PORT": "80",
    }


@pytest.mark.parametrize(
    ("value_from", "message"),
    [
        ({"configMapKeyRef": {"name": "absent", "key": "x"}}, 'configmap "absent" not found'),
        ({"configMapKeyRef": {"name": "cm", "key": "nope"}}, "couldn't find key nope in ConfigMap ns/cm"),
        ({"secretKeyRef": {"name": "s", "key": "user"}}, "couldn't find key user in Secret ns/s"),
    ],
)
def test_a_missing_reference_is_a_config_error(value_from: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        container_env(POD, {"env": [{"name": "V", "valueFrom": value_from}]}, {}, lookup=lookup)
    assert str(caught.value) == message


def test_atomic_write_lays_out_files_as_the_kubelet(tmp_path: Path) -> None:
    atomic_write(tmp_path / "v", {"a.yaml": (b"1", 0o644), "dir/b": (b"2", 0o600)})
    first = os.readlink(tmp_path / "v" / "..data")
    assert (tmp_path / "v" / "a.yaml").read_text() == "1"
    assert os.readlink(tmp_path / "v" / "a.yaml") == "..data/a.yaml"
    assert (tmp_path / "v" / "dir" / "b").stat().st_mode & 0o777 == 0o600
    atomic_write(tmp_path / "v", {"a.yaml": (b"3", 0o644), "dir/b": (b"2", 0o600)})
    assert (tmp_path / "v" / "a.yaml").read_text() == "3"
    assert os.readlink(tmp_path / "v" / "..data") != first and not (tmp_path / "v" / first).exists()


def test_projected_volume_files() -> None:
    volume = {
        "projected": {
            "defaultMode": 0o644,
            "sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                {"configMap": {"name": "cm", "items": [{"key": "k", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]
                    }
                },
            ],
        }
    }
    asked: list[tuple[str, int, str]] = []

    def token(account: str, seconds: int, audience: str) -> str:
        asked.append((account, seconds, audience))
        return "tok"

    files = volume_files(POD, volume, lookup, token=token)
    assert files == {"token": (b"tok", 0o644), "ca.crt": (b"v", 0o644), "namespace": (b"ns", 0o644)}
    assert asked == [("sa", 3607, "")]
    with pytest.raises(MountError, match="configmap references non-existent config key: nope"):
        volume_files(
            POD, {"configMap": {"name": "cm", "items": [{"key": "nope", "path": "x"}]}}, lookup, token=token
        )
    with pytest.raises(MountError, match='secret "absent" not found'):
        volume_files(POD, {"secret": {"secretName": "absent"}}, lookup, token=token)
    assert (
        volume_files(POD, {"secret": {"secretName": "absent", "optional": True}}, lookup, token=token) == {}
    )


def test_hosts_file_is_the_kubelets_then_the_cluster_dns_names() -> None:
    text = hosts_file(POD, "127.244.0.3", {"127.96.1.1": service_names("podherd", "nats", "ns")})
    lines = text.splitlines()
    assert lines[0] == "# Kubernetes-managed hosts file."
    assert "127.244.0.3\tp" in lines
    assert lines[-1] == "127.96.1.1\tnats.podherd.svc.cluster.local nats.podherd.svc nats.podherd"
    assert service_names("podherd", "nats", "podherd").endswith(" nats")  # the short name, same namespace


def test_run_as_non_root_is_checked_as_the_kubelet_does() -> None:
    pod = {**POD, "spec": {**POD["spec"], "securityContext": {"runAsNonRoot": True}}}
    root_image = ImageConfig(("x",))
    with pytest.raises(ConfigError, match=r'image will run as root \(pod: "p_ns\(u-1\)", container: c\)'):
        verify_run_as_non_root(pod, {"name": "c"}, root_image)
    with pytest.raises(ConfigError, match="runAsUser breaks non-root policy"):
        verify_run_as_non_root(pod, {"name": "c", "securityContext": {"runAsUser": 0}}, podherd_image())
    verify_run_as_non_root(pod, {"name": "c"}, podherd_image())  # USER 10001
    verify_run_as_non_root(pod, {"name": "c", "securityContext": {"runAsUser": 10001}}, root_image)


def test_image_references_and_service_options() -> None:
    assert repository("ghcr.io/podherd/podherd:0.1.0") == "ghcr.io/podherd/podherd"
    assert repository("localhost:5000/podherd@sha256:abc") == "localhost:5000/podherd"
    assert repository("localhost:5000/podherd") == "localhost:5000/podherd"
    options = SimOptions(services={"podherd/nats:4222": ["127.0.0.1:1", "127.0.0.1:2"]})
    assert options.service_backends() == [("podherd", "nats", 4222)]
    assert options.backends("podherd", "nats", 4222) == [("127.0.0.1", 1), ("127.0.0.1", 2)]
    assert nats_servers("nats://a:1, nats://b:2,") == ["nats://a:1", "nats://b:2"]


def test_crash_back_off_doubles_to_five_minutes() -> None:
    assert [restart_delay(n) for n in range(1, 9)] == [0, 10, 20, 40, 80, 160, 300, 300]


def test_command_and_args_replace_the_images_entrypoint_and_cmd() -> None:
    image = ImageConfig(("podherd",), ("--help",))
    env = {"NAME": "watcher"}
    assert command_line({}, image, env) == ["podherd", "--help"]
    assert command_line({"args": ["run", "$(NAME)"]}, image, env) == ["podherd", "run", "watcher"]
    assert command_line({"args": []}, image, env) == ["podherd"]
    assert command_line({"command": ["sh"], "args": ["-c", "$$(x)"]}, image, env) == ["sh", "-c", "$(x)"]
    assert command_line({"command": ["sh"]}, image, env) == ["sh"]


@pytest.mark.parametrize(
    ("policy", "code", "message"),
    [
        ("FallbackToLogsOnError", 1, "tail"),
        ("FallbackToLogsOnError", -9, "tail"),  # SIGKILLed: 137, a failure too
        ("FallbackToLogsOnError", 0, None),  # only a failed container's log becomes its message
        ("File", 1, None),  # the default: the termination message file (kubesim's containers write none)
        (None, 1, None),
    ],
)
def test_a_failed_containers_message_is_its_logs_tail_only_when_its_policy_says_so(
    tmp_path: Path, policy: str | None, code: int, message: str | None
) -> None:
    log = tmp_path / "c.log"
    written = [f"line {i:03} {'x' * 30}\n" for i in range(200)]  # 80 of them are more than 2048 bytes
    log.write_text("".join(written))
    spec = {"name": "c", **({"terminationMessagePolicy": policy} if policy else {})}
    state = terminated(code, "2026-01-01T00:00:00Z", log, spec=spec)
    assert state["exitCode"] == (code if code >= 0 else 128 - code)
    if message is None:
        assert "message" not in state
        return
    # The kubelet's readLastStringFromContainerLogs: the last 80 lines, of those the last 2048 bytes.
    assert state["message"] == "".join(written[-MESSAGE_LOG_LINES:])[-MESSAGE_LOG_BYTES:]
    assert state["message"].startswith("x") and len(state["message"]) == 2048  # cut inside a line
    assert state["message"].endswith(f"line 199 {'x' * 30}\n")
