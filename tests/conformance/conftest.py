"""The engine the conformance set meets: a kubesim of each test's own (`make test`), or one real control plane
for the whole run (`make test-real`, `--engine real`), each test in a namespace and on nodes of its own."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from kubesim.sim import SimHandle
from podherd.harness.gate import Gate, remove_webhooks, start_gate
from podherd.realcluster.audit import AuditTrail
from shared.config.model import KubernetesConfig
from shared.kube.client import KubeClient
from tests.conformance.engines import SCOPE_LABEL, scoped
from tests.e2e.pipeline import GROUP, VERSION
from tests.kube import Kube, client_for, with_crds

PODHERD_ACCOUNTS = "system:serviceaccount:podherd:"


@dataclass
class Scoped:
    """The official client on the test's cluster, and the names the test's scenario got."""

    kube: Kube
    scope: str
    engine: str

    @property
    def namespace(self) -> str:
        return self.scope

    def job_name(self, name: str) -> str:
        return f"{self.scope}-{name}"


@pytest.fixture(scope="session")
def real_engine(request: pytest.FixtureRequest) -> Iterator[SimHandle | None]:
    if request.config.getoption("engine") != "real":
        yield None
        return
    from podherd.realcluster import build, engine

    try:
        handle = engine.start()
    except build.ControlPlaneUnavailable as exc:
        pytest.exit(f"the real engine cannot be had: {exc}", returncode=2)
    yield handle
    handle.stop()


@pytest.fixture
def engine_cluster(
    real_engine: SimHandle | None,
    kubesim_factory: Callable[..., SimHandle],
    test_id: str,
    request: pytest.FixtureRequest,
) -> Iterator[Callable[[dict[str, Any]], Scoped]]:
    made: list[Scoped] = []

    def start(document: dict[str, Any]) -> Scoped:
        scenario = scoped(document, test_id)
        if real_engine is None:
            kube = with_crds(client_for(kubesim_factory(scenario)))
            made.append(Scoped(kube, test_id, "kubesim"))
        else:
            from podherd.realcluster.engine import load

            load(real_engine, scenario)
            made.append(Scoped(client_for(real_engine), test_id, "real"))
        return made[-1]

    trail = None if real_engine is None else AuditTrail(Path(real_engine.kubeconfig).parent / "audit.log")
    before = len(trail.denials) if trail else 0
    yield start
    for cluster in made:
        if cluster.engine == "real":
            _clean(cluster)
        cluster.kube.api.close()
    # As kubesim's authorizer does for `make test`: what kube-apiserver refused Podherd's services (read from
    # its audit log) fails the test, unless the test provokes it.
    denied = [d for d in (trail.denials[before:] if trail else []) if d.startswith(PODHERD_ACCOUNTS)]
    if request.node.get_closest_marker("denials_expected") is None:
        assert not denied, f"RBAC denied Podherd's services: {denied}"


def _clean(cluster: Scoped) -> None:
    """What the test made on the shared control plane, deleted: its jobs (those for its namespace's pods),
    their Reservations and its own, its namespaces (`<scope>`, `<scope>-…`) and its nodes."""
    kube = cluster.kube

    def delete(plural: str, name: str) -> None:
        with contextlib.suppress(kubernetes.client.ApiException):
            kube.custom.delete_cluster_custom_object(GROUP, VERSION, plural, name)

    jobs = kube.custom.list_cluster_custom_object(GROUP, VERSION, "podmigrationjobs")["items"]
    mine = {j["metadata"]["name"] for j in jobs if j["spec"]["podRef"].get("namespace") == cluster.scope}
    for name in mine:
        delete("podmigrationjobs", name)
    for item in kube.custom.list_cluster_custom_object(GROUP, VERSION, "reservations")["items"]:
        name = item["metadata"]["name"]
        if name in mine or name.startswith(cluster.scope):
            delete("reservations", name)
    for namespace in kube.core.list_namespace().items:
        name = namespace.metadata.name
        if name == cluster.scope or name.startswith(f"{cluster.scope}-"):
            # Its budgets first: the namespace's deletion takes its pods past them, which the next test's
            # watchdog (it watches the whole cluster) would count against them.
            kube.policy.delete_collection_namespaced_pod_disruption_budget(name)
            with contextlib.suppress(kubernetes.client.ApiException):
                kube.core.delete_namespace(name)
    for node in kube.core.list_node(label_selector=f"{SCOPE_LABEL}={cluster.scope}").items:
        with contextlib.suppress(kubernetes.client.ApiException):
            kube.core.delete_node(node.metadata.name)


@contextlib.contextmanager
def gate_before(cluster: Scoped, workdir: Path, arguments: dict[str, Any] | None = None) -> Iterator[Gate]:
    """The admission gate as deployed before the test's cluster (the engine's admission chain calls it),
    judging evictions by the pipeline's `arguments`; its webhooks taken away after, so that the shared
    control plane's next test meets none."""
    gate = start_gate(cluster.kube.handle, workdir, arguments=arguments)
    try:
        yield gate
    finally:
        gate.processes.stop_all()
        admin = KubeClient.from_config(KubernetesConfig(kubeconfig=str(cluster.kube.handle.kubeconfig)))
        try:
            remove_webhooks(admin)
        finally:
            admin.close()
