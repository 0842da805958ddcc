"""`kubectl create` as a new user types it: kubectl sends these bodies in protobuf. kubesim decodes them as
kube-apiserver does: what kubectl meant is stored (its own `--dry-run=client` object, field for field), and
on `--engine real` the object kubesim stored is the one the real API server stored, once what each server
makes up itself (uids, a Service's address) is set aside."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubesim.options import SimOptions
from kubesim.sim import SimHandle, start_in_thread
from tests.kubesim.test_kubectl import KUBECTL

pytestmark = [pytest.mark.integration, pytest.mark.kubectl]

# (what is created, and how it is read back); NAME is the test's scope, for the cluster-wide kinds.
COMMANDS: list[tuple[list[str], str]] = [
    (["secret", "generic", "s1", "--from-literal=a=b", "--from-literal=c=dd"], "secret/s1"),
    (["secret", "docker-registry", "d1", "--docker-username=u", "--docker-password=p"], "secret/d1"),
    (["job", "j1", "--image=busybox", "--", "date"], "job/j1"),
    (["cronjob", "cj1", "--image=busybox", "--schedule=*/5 * * * *"], "cronjob/cj1"),
    (["serviceaccount", "sa1"], "serviceaccount/sa1"),
    (["role", "r1", "--verb=get,list", "--resource=pods"], "role/r1"),
    (["rolebinding", "rb1", "--role=r1", "--serviceaccount=NAME:sa1"], "rolebinding/rb1"),
    (["service", "clusterip", "svc1", "--tcp=80:8080"], "service/svc1"),
    (["service", "nodeport", "svc2", "--tcp=80:8080"], "service/svc2"),
    (["configmap", "cm1", "--from-literal=x=y"], "configmap/cm1"),
    (["poddisruptionbudget", "pdb1", "--selector=app=x", "--min-available=1"], "poddisruptionbudget/pdb1"),
    (["clusterrole", "NAME-cr", "--verb=get", "--resource=nodes"], "clusterrole/NAME-cr"),
    (
        ["clusterrolebinding", "NAME-crb", "--clusterrole=NAME-cr", "--user=alice"],
        "clusterrolebinding/NAME-crb",
    ),
    (["priorityclass", "NAME-pc", "--value=100"], "priorityclass/NAME-pc"),
]
# What each server makes up for itself: set aside before the two are compared.
SERVER_MADE = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation")
UID_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid")


@pytest.fixture
def kubectl(request: pytest.FixtureRequest) -> str:
    if request.config.getoption("engine") == "real":
        from podherd.realcluster import build

        return str(build.built() / "bin" / "kubectl")  # v1.35: within the real engine's version skew
    if KUBECTL is None:
        pytest.skip("kubectl is not on PATH")
    return KUBECTL


@pytest.fixture
def kubesim() -> Iterator[SimHandle]:
    """A cluster of the API server alone: no controller adds to what is compared."""
    handle = start_in_thread(SimOptions(scheduler=False, workloads=False, kubelet=False, pdb=False))
    yield handle
    handle.stop()


def run(kubectl: str, kubeconfig: Path, *argv: str) -> str:
    done = subprocess.run(
        [kubectl, "--kubeconfig", str(kubeconfig), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, (argv, done.stderr)
    return done.stdout


def stored(kubectl: str, kubeconfig: Path, namespace: str, what: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(run(kubectl, kubeconfig, "get", what, "-n", namespace, "-o", "json"))
    meta = found["metadata"]
    for key in SERVER_MADE:
        meta.pop(key, None)
    meta.pop("namespace", None)
    found.pop("status", None)
    return found


def held_within(sent: Any, kept: Any, path: str = "") -> list[str]:
    """Where what kubectl sent is not what was stored (each field it set, as it set it)."""
    if isinstance(sent, dict) and isinstance(kept, dict):
        return [
            p for k, v in sent.items() if v is not None for p in held_within(v, kept.get(k), f"{path}.{k}")
        ]
    if isinstance(sent, list) and isinstance(kept, list) and len(sent) == len(kept):
        return [
            p
            for i, (a, b) in enumerate(zip(sent, kept, strict=True))
            for p in held_within(a, b, f"{path}[{i}]")
        ]
    return (
        []
        if sent == kept or (sent in ({}, []) and kept is None)
        else [f"{path}: sent {sent!r}, stored {kept!r}"]
    )


def without_server_choices(obj: dict[str, Any]) -> dict[str, Any]:
    """A Job's uid labels and a Service's addresses are each server's own choice (kubesim's Services get
    loopback addresses its pod processes can reach: listed in docs/design/kubesim.md)."""
    text = json.dumps(obj)
    for label in UID_LABELS:
        for holder in (obj.get("metadata", {}).get("labels") or {},):
            if label in holder:
                text = text.replace(holder[label], "<uid>")
    out: dict[str, Any] = json.loads(text)
    spec = out.get("spec") or {}
    spec.pop("clusterIP", None)
    spec.pop("clusterIPs", None)
    for port in spec.get("ports") or []:
        if out.get("kind") == "Service":
            port.pop("nodePort", None)
    return out


def test_what_kubectl_creates_is_stored_as_kube_apiserver_stores_it(
    kubectl: str, kubesim: SimHandle, request: pytest.FixtureRequest, test_id: str, tmp_path: Path
) -> None:
    clusters = {"kubesim": kubesim.kubeconfig}
    real = request.getfixturevalue("real_engine")
    if real is not None:
        clusters["real"] = real.kubeconfig
    objects: dict[str, dict[str, dict[str, Any]]] = {}
    try:
        for engine, kubeconfig in clusters.items():
            run(kubectl, kubeconfig, "create", "namespace", test_id)
            for command, what in COMMANDS:
                argv = [a.replace("NAME", test_id) for a in command]
                flags = ["-n", test_id]  # before the arguments: a job's command follows `--`
                meant = json.loads(
                    run(kubectl, kubeconfig, "create", *flags, "--dry-run=client", "-o=json", *argv)
                )
                run(kubectl, kubeconfig, "create", *flags, *argv)
                kept = stored(kubectl, kubeconfig, test_id, what.replace("NAME", test_id))
                meant["metadata"].pop("namespace", None)
                meant.pop("status", None)
                assert held_within(meant, kept) == [], (engine, argv)
                objects.setdefault(what, {})[engine] = without_server_choices(kept)
    finally:
        if real is not None:
            for _, what in COMMANDS:
                if what.startswith(("clusterrole", "priorityclass")):
                    name = what.replace("NAME", test_id)
                    subprocess.run(
                        [kubectl, "--kubeconfig", str(real.kubeconfig), "delete", name], check=False
                    )
            run(kubectl, real.kubeconfig, "delete", "namespace", test_id, "--wait=false")
    if real is not None:
        differ = {what: by for what, by in objects.items() if by["kubesim"] != by["real"]}
        assert differ == {}, json.dumps(differ, indent=1)
