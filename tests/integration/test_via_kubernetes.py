"""`podherd submit` and `podherd drain` with `--via kubernetes`: through the API server with a person's own
kubeconfig, whichever way it authenticates (a bearer token, a client certificate, an exec plugin). The API
server's RBAC decides; the jobs name who the API server says the credentials are, as claimed; a person
without the rights writes nothing. A drain written this way is carried out by the services."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesim.apiserver.auth import DEFAULT_AUDIENCE
from kubesim.sim import SimHandle
from podherd import cli
from podherd.harness.gate import start_gate
from podherd.harness.servers import Server
from shared.api.names import ANNOTATION_CLAIMED_REQUESTER, ANNOTATION_NODE_DRAIN, ANNOTATION_REQUESTER
from tests.e2e.pipeline import GROUP, PLURAL, VERSION, pipeline, pipeline_config
from tests.e2e.test_lifecycle import cluster, start, web_pods
from tests.kube import Kube, requester

pytestmark = pytest.mark.integration

MOVER = [
    {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["create", "get"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},  # what the gate asks for
]
DRAINER = [
    *MOVER,
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
]


def bind_user(kube: Kube, user: str, rules: list[dict[str, Any]]) -> None:
    rbac = kube.client("RbacAuthorizationV1Api")
    rbac.create_cluster_role({"metadata": {"name": f"user-{user}"}, "rules": rules})
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"user-{user}"}
    subject = {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}
    rbac.create_cluster_role_binding(
        {"metadata": {"name": f"user-{user}"}, "roleRef": ref, "subjects": [subject]}
    )


def exec_kubeconfig(handle: SimHandle, path: Path, token: str) -> Path:
    """A kubeconfig whose user is an exec plugin (as cloud and OIDC logins are) that prints a token."""
    plugin = path.with_suffix(".py")
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": token},
    }
    plugin.write_text(f"print({json.dumps(json.dumps(credential))})\n")
    document = yaml.safe_load(handle.kubeconfig_for(path, token).read_text())
    document["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(plugin)],
            "interactiveMode": "Never",
        }
    }
    path.write_text(yaml.safe_dump(document))
    return path


def kubeconfig_of(kind: str, kube: Kube, tmp_path: Path) -> tuple[Path, str]:
    """A kubeconfig of `kind` whose user may create PodMigrationJobs, and that user's name."""
    handle = kube.handle
    if kind == "client-certificate":
        bind_user(kube, "alice", MOVER)
        return handle.kubeconfig_with_cert(tmp_path / "alice", "alice", ("movers",)), "alice"
    token = requester(kube, f"by-{kind}", MOVER, audience=DEFAULT_AUDIENCE)
    path = tmp_path / kind
    if kind == "exec-plugin":
        return exec_kubeconfig(handle, path, token), f"system:serviceaccount:default:by-{kind}"
    return handle.kubeconfig_for(path, token), f"system:serviceaccount:default:by-{kind}"


def config_file(tmp_path: Path, kubeconfig: Path, **more: Any) -> str:
    path = tmp_path / f"config-{kubeconfig.name}.yaml"
    path.write_text(yaml.safe_dump({"kubernetes": {"kubeconfig": str(kubeconfig)}, **more}))
    return str(path)


def job(kube: Kube, name: str) -> dict[str, Any]:
    found: dict[str, Any] = kube.custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    return found


@pytest.mark.parametrize("kind", ["bearer-token", "client-certificate", "exec-plugin"])
def test_submit_through_the_api_server_with_each_kind_of_kubeconfig(
    kind: str, kubesim_factory: Callable[..., SimHandle], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kube = start(kubesim_factory, cluster(web=1))
    kubeconfig, user = kubeconfig_of(kind, kube, tmp_path)
    (pod,) = web_pods(kube)
    # The key given: the default one changes each minute, and the two runs may straddle one.
    config = config_file(tmp_path, kubeconfig)
    argv = ["submit", f"default/{pod}", "--key", f"{kind}-{pod}", "--via", "kubernetes", "--config", config]
    assert cli.main(argv) == 0
    first = capsys.readouterr().out
    assert first.startswith("job podherd-") and first.rstrip().endswith("created"), first
    name = first.split()[1]
    annotations = job(kube, name)["metadata"]["annotations"]
    # Podherd verified no one: the API server authorized the write, and the admission gate (not installed
    # here) records its author. Nothing the client wrote names anyone.
    assert ANNOTATION_CLAIMED_REQUESTER not in annotations and ANNOTATION_REQUESTER not in annotations
    assert user
    assert cli.main(argv) == 0
    assert capsys.readouterr().out.split() == ["job", name, "exists"]  # the same intent names the same job
    missing = ["submit", "default/no-such-pod", "--via", "kubernetes", "--config", config]
    assert cli.main(missing) == 1
    assert capsys.readouterr().err == 'podherd: pods "no-such-pod" not found in namespace default\n'
    jobs = kube.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
    assert [j["metadata"]["name"] for j in jobs] == [name]  # none made for it


@pytest.mark.denials_expected
def test_a_person_without_the_right_writes_nothing(
    kubesim_factory: Callable[..., SimHandle], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kube = start(kubesim_factory, cluster(web=1))
    mallory = kube.handle.kubeconfig_with_cert(tmp_path / "mallory", "mallory")
    (pod,) = web_pods(kube)
    config = config_file(tmp_path, mallory)
    assert cli.main(["submit", f"default/{pod}", "--via", "kubernetes", "--config", config]) == 1
    error = capsys.readouterr().err
    assert "the API server refused" in error and 'User "mallory" cannot create resource' in error, error
    assert cli.main(["drain", "node-1", "--via", "kubernetes", "--config", config]) == 1
    assert 'User "mallory" cannot get resource "nodes"' in capsys.readouterr().err
    assert kube.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"] == []
    assert not kube.core.read_node("node-1").spec.unschedulable


@pytest.mark.e2e
async def test_a_drain_written_through_the_api_server_is_carried_out_by_the_services(
    kubesim_factory: Callable[..., SimHandle],
    nats_srv: Server,
    redis_srv: Server,
    test_id: str,
    tmp_path: Path,
) -> None:
    kube = start(kubesim_factory, cluster(web=2))
    bind_user(kube, "ops", DRAINER)
    kubeconfig = kube.handle.kubeconfig_with_cert(tmp_path / "ops", "ops", ("operators",))
    node = next(iter(web_pods(kube).values())).spec.node_name
    config = pipeline_config(kube.handle, nats_srv, redis_srv, test_id)
    argv = [
        "drain",
        node,
        "--via",
        "kubernetes",
        "--timeout",
        "60s",
        "--config",
        config_file(tmp_path, kubeconfig),
    ]
    # The admission gate before the jobs: each effect of the drain's jobs asked of RBAC as the person.
    gate = await asyncio.to_thread(start_gate, kube.handle, tmp_path / "gate")
    try:
        async with pipeline(config):  # the CLI as a person runs it, in a process of its own
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "podherd",
                *argv,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            out = (await process.communicate())[0].decode()
    finally:
        gate.processes.stop_all()
    assert process.returncode == 0, out
    jobs = kube.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
    assert jobs and {j["metadata"]["annotations"][ANNOTATION_REQUESTER] for j in jobs} == {"ops"}
    assert f"node/{node} drained" in out
    drained = kube.core.read_node(node)
    assert drained.spec.unschedulable
    assert json.loads(drained.metadata.annotations[ANNOTATION_NODE_DRAIN])["requester"] == "ops"
    assert not [p for p in web_pods(kube).values() if p.spec.node_name == node]
