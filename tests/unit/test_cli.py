"""The CLI: errors are one line and a non-zero exit, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from podherd.cli import main


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out.startswith("podherd ")


def test_config_prints_effective_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("kind: MigrationControllerArgs\nmaxMigratingPerNode: 5\n")
    monkeypatch.setenv("NATS_URL", "nats://elsewhere:4222")
    assert main(["config", "--config", str(path)]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert shown["migrationController"]["maxMigratingPerNode"] == 5
    assert shown["nats"]["url"] == "nats://elsewhere:4222"


def test_config_never_prints_a_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://podherd:s3cret@redis:6379/0")
    monkeypatch.setenv("NATS_URL", "nats://svc:pa55@nats-0:4222,nats://svc:pa55@nats-1:4222")
    assert main(["config"]) == 0
    out = capsys.readouterr().out
    assert "s3cret" not in out and "pa55" not in out
    shown = yaml.safe_load(out)
    assert shown["redis"]["url"] == "redis://podherd:***@redis:6379/0"
    assert shown["nats"]["url"] == "nats://svc:***@nats-0:4222,nats://svc:***@nats-1:4222"


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "cannot read config file"),
        ("evictionPolicy: Evict\nkind: MigrationControllerArgs", "evictionPolicy"),
    ],
)
def test_config_errors_are_one_line(tmp_path: Path, content: str | None, needle: str) -> None:
    path = tmp_path / "c.yaml"
    if content is not None:
        path.write_text(content)
    result = subprocess.run(
        [sys.executable, "-m", "podherd", "config", "--config", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and needle in result.stderr
    assert "Traceback" not in result.stderr


TOKEN = {"PODHERD_INTENTS__TOKENFILE": "/dev/null"}  # read only once a request is sent


def podherd(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    base = {k: v for k, v in os.environ.items() if not k.startswith(("PODHERD_", "NATS_", "REDIS_", "KUBE"))}
    return subprocess.run(
        [sys.executable, "-m", "podherd", *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={**base, **(env or {})},
    )


def unreachable_kubeconfig(tmp_path: Path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters: [{name: x, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: x, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: x, user: x}}]\n"
    )
    return str(path)


@pytest.mark.parametrize(
    ("argv", "env", "needle", "code"),
    [
        (["submit", "no-slash"], {}, "is not NAMESPACE/POD", 2),
        (["submit", "default/p", "--target-node", "Not A Node"], {}, "is not a node name", 2),
        (["submit", "default/p", "--mode", "Fast"], {}, "invalid choice", 2),
        (["submit"], {}, "required", 2),
        (["audit"], {}, "required", 2),
        (["run", "everything"], {}, "invalid choice", 2),
        (
            ["submit", "default/p"],
            {"NATS_URL": "nats://someone:s3cret@127.0.0.1:1", **TOKEN},
            "cannot reach NATS at nats://127.0.0.1:1",  # the URL's credentials are never printed
            1,
        ),
        (["submit", "default/p"], {}, "--token-file", 1),  # intents carry a token by default
        (["audit", "tail"], {"NATS_URL": "nats://127.0.0.1:1"}, "cannot reach NATS", 1),
        (["drain", "Node_1"], {}, "is not a node name", 2),
        (["drain", "node-1", "--timeout", "soon"], {}, "'soon' is not a duration", 2),
        (["drain", "node-1"], {"NATS_URL": "nats://127.0.0.1:1", **TOKEN}, "cannot reach NATS", 1),
        (["drain"], {}, "required", 2),
        (["jobs"], {"PODHERD_KUBERNETES__KUBECONFIG": "/nonexistent/kubeconfig"}, "no usable kubeconfig", 1),
        (["jobs"], {"PODHERD_MIGRATIONCONTROLLER__EVICTIONPOLICY": "Evict"}, "evictionPolicy", 1),
    ],
)
def test_every_bad_argument_and_unreachable_server_is_one_line(
    argv: list[str], env: dict[str, str], needle: str, code: int
) -> None:
    result = podherd(*argv, env=env)
    assert result.returncode == code, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert needle in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("argv", [["jobs"], ["plan"]])
def test_an_unreachable_kubernetes_api_is_one_line(tmp_path: Path, argv: list[str]) -> None:
    result = podherd(*argv, env={"KUBECONFIG": unreachable_kubeconfig(tmp_path)})
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert "cannot reach the Kubernetes API at http://127.0.0.1:1" in result.stderr


@pytest.mark.parametrize(
    "service",
    ["podherd/nats=127.0.0.1:4222", "podherd/nats:4222=", "podherd/nats:4222=host:port", "nats:1=a:1"],
)
def test_sim_refuses_a_malformed_service_in_one_line(
    service: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sim", "--run-podherd", "--service", service]) != 0
    err = capsys.readouterr().err
    assert err == f"podherd: --service {service!r}: expected NS/NAME:PORT=HOST:PORT[,HOST:PORT]\n"


def test_demo_in_cluster_takes_deploy_as_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--in-cluster", "--prefix", "other"]) != 0
    assert "--in-cluster runs deploy/ as it is on kubesim" in capsys.readouterr().err
