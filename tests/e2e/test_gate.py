"""The admission gate as deployed: `podherd run gate` as its own ServiceAccount, behind the webhook
configuration deploy/ ships (its caBundle the gate's CA), called by kubesim as kube-apiserver calls webhooks.
A PodMigrationJob that could not run is refused naming its field; one whose author may not evict its pod is
refused; an eviction of an opted-in pod becomes that pod's job."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from kubesim.apiserver.auth import ADMIN
from kubesim.sim import SimHandle
from podherd.harness.gate import Gate, remove_webhooks, start_gate, webhook_configuration
from podherd.install import service_kubeconfig
from services.gate.evacuation import IN_PROGRESS, OPT_IN, TRIGGERED, job_name
from shared.access.authority import Authority
from shared.api.annotations import EVICTION_IN_PROGRESS
from shared.api.names import ANNOTATION_REQUESTER
from shared.config.model import KubernetesConfig
from shared.kube.client import KubeClient
from tests.e2e.pipeline import podherd
from tests.kube import Kube, client_for, refusal, watch_until
from tests.kubesim.test_kubectl import KUBECTL

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
GROUP, VERSION = "scheduling.koordinator.sh", "v1alpha1"


@dataclass
class Gated:
    sim: SimHandle
    kube: Kube
    gate: Gate
    tmp: Path


@pytest.fixture
def gated(kubesim_factory: Callable[..., SimHandle], tmp_path: Path) -> Iterator[Gated]:
    """The gate before a cluster whose opted-in pods it has listed once it is ready (a pod labelled after,
    and evicted within milliseconds, would be known only once its watch event is in): in namespace `shop`,
    the StatefulSet `web`'s pods opted in, the one-replica StatefulSet `db`'s and the bare pod `lone` too,
    and `plain` not; in `opted`, opted in as a whole, the StatefulSet `a`'s pods, and `b` opted out."""
    sim = kubesim_factory("fragmented")
    kube = client_for(sim)
    namespace(kube, "shop")
    namespace(kube, "opted", {OPT_IN: "true"})
    stateful_set(kube, "shop", "web", 2, {OPT_IN: "true"})
    stateful_set(kube, "shop", "db", 1, {OPT_IN: "true"})
    stateful_set(kube, "opted", "a", 2)
    pod(kube, "shop", "lone", {OPT_IN: "true"})
    pod(kube, "shop", "plain")
    pod(kube, "opted", "b", {OPT_IN: "false"})
    for ns, names in (("shop", {"shop/web-0", "shop/db-0"}), ("opted", {"opted/a-0"})):
        watch_until(kube.core.list_namespaced_pod, names.issubset, namespace=ns)
    gate = start_gate(sim, tmp_path)
    try:
        yield Gated(sim, client_for(sim), gate, tmp_path)
    finally:
        gate.processes.stop_all()


def user_kube(gated: Gated, name: str, rules: list[dict[str, Any]], *, evict_in: str) -> Kube:
    """A ServiceAccount `default/name` with `rules` cluster-wide and the right to evict in `evict_in` alone,
    as a client of its own."""
    return account_kube(gated.kube, gated.tmp, name, rules, evict_in=evict_in)


def account_kube(
    kube: Kube,
    tmp: Path,
    name: str,
    rules: list[dict[str, Any]],
    *,
    evict_in: str,
    namespace: str = "default",
    role: str | None = None,
) -> Kube:
    """A ServiceAccount `namespace/name` with `rules` cluster-wide (roles named `role`, else `name`) and the
    right to evict in `evict_in` alone, as a client of its own."""
    role = role or name
    kube.core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    rbac = kube.client("RbacAuthorizationV1Api")
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    evict = [{"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}]
    rbac.create_cluster_role({"metadata": {"name": role}, "rules": rules})
    rbac.create_cluster_role_binding(
        {"metadata": {"name": role}, "roleRef": _ref("ClusterRole", role), "subjects": subject}
    )
    rbac.create_namespaced_role(evict_in, {"metadata": {"name": role}, "rules": evict})
    binding = {"metadata": {"name": role}, "roleRef": _ref("Role", role), "subjects": subject}
    rbac.create_namespaced_role_binding(evict_in, binding)
    body = {"spec": {"expirationSeconds": 3600}}
    token = kube.core.create_namespaced_service_account_token(name, namespace, body).status.token
    path = kube.handle.kubeconfig_for(tmp / f"{name}.kubeconfig", token)
    return Kube(kube.handle, kubernetes.config.new_client_from_config(config_file=str(path)))


def _ref(kind: str, name: str) -> dict[str, str]:
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}


def namespace(kube: Kube, name: str, labels: dict[str, str] | None = None) -> None:
    kube.core.create_namespace({"metadata": {"name": name, "labels": labels or {}}})


def pod(kube: Kube, ns: str, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    body = {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [{"name": "app", "image": "app:1"}]},
    }
    made: dict[str, Any] = kube.api.sanitize_for_serialization(kube.core.create_namespaced_pod(ns, body))
    return made


def stateful_set(kube: Kube, ns: str, name: str, replicas: int, labels: dict[str, str] | None = None) -> None:
    """A StatefulSet whose pods (`name-0`…) carry `labels`, placed by a scheduler that honours
    Reservations."""
    template = {
        "metadata": {"labels": {"app": name, **(labels or {})}},
        "spec": {"schedulerName": "koord-scheduler", "containers": [{"name": "app", "image": "app:1"}]},
    }
    spec = {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": template}
    kube.client("AppsV1Api").create_namespaced_stateful_set(ns, {"metadata": {"name": name}, "spec": spec})


def evict(kube: Kube, ns: str, name: str, *, dry_run: bool = False) -> tuple[int, str]:
    """The Eviction API's answer: (201, "") or (code, message)."""
    body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}
    if dry_run:
        body["deleteOptions"] = {"dryRun": ["All"]}
    try:
        kube.core.create_namespaced_pod_eviction(name, ns, body)
    except kubernetes.client.ApiException as exc:
        return exc.status, str(refusal(exc).get("message"))
    return 201, ""


def job_body(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodMigrationJob",
        "metadata": {"name": name},
        "spec": spec,
    }


def create_job(kube: Kube, name: str, spec: dict[str, Any]) -> tuple[int, str]:
    try:
        kube.custom.create_cluster_custom_object(GROUP, VERSION, "podmigrationjobs", job_body(name, spec))
    except kubernetes.client.ApiException as exc:
        return exc.status, str(refusal(exc).get("message"))
    return 201, ""


def get_job(kube: Kube, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = kube.custom.get_cluster_custom_object(
            GROUP, VERSION, "podmigrationjobs", name
        )
    except kubernetes.client.ApiException as exc:
        assert exc.status == 404
        return None
    return found


def test_an_eviction_of_an_opted_in_pod_becomes_its_job_told_429_and_the_executor_passes(
    gated: Gated,
) -> None:
    kube = gated.kube
    web = kube.api.sanitize_for_serialization(kube.core.read_namespaced_pod("web-0", "shop"))
    opted = kube.api.sanitize_for_serialization(kube.core.read_namespaced_pod("a-0", "opted"))
    name = job_name(web["metadata"]["uid"])

    assert evict(kube, "shop", "plain") == (201, "")  # not opted in: an eviction as ever
    assert evict(kube, "opted", "b") == (201, "")  # opted out of its namespace's opt-in
    code, message = evict(kube, "shop", "web-0", dry_run=True)
    assert code == 429 and TRIGGERED in message
    assert "a PodMigrationJob would move it (dry run)" in message and name not in message, message
    assert get_job(kube, name) is None  # a dry run changes nothing
    assert EVICTION_IN_PROGRESS not in (
        kube.core.read_namespaced_pod("web-0", "shop").metadata.annotations or {}
    )

    code, message = evict(kube, "shop", "web-0")
    assert code == 429, message
    assert message.startswith('admission webhook "evictions.gate.podherd.io" denied the request: ')
    assert f'{TRIGGERED} of pod "shop/web-0": PodMigrationJob {name}' in message
    job = get_job(kube, name)
    assert job is not None
    assert job["spec"]["podRef"] == {
        "kind": "Pod",
        "namespace": "shop",
        "name": "web-0",
        "uid": web["metadata"]["uid"],
    }
    assert job["spec"]["mode"] == "ReservationFirst"
    assert job["metadata"]["annotations"][ANNOTATION_REQUESTER] == ADMIN
    assert EVICTION_IN_PROGRESS in kube.core.read_namespaced_pod("web-0", "shop").metadata.annotations

    # A replica that died between making the job and marking the pod: the next eviction marks it.
    unmark = {"metadata": {"annotations": {EVICTION_IN_PROGRESS: None}}}
    kube.core.patch_namespaced_pod("web-0", "shop", unmark)
    assert EVICTION_IN_PROGRESS not in (
        kube.core.read_namespaced_pod("web-0", "shop").metadata.annotations or {}
    )
    code, message = evict(kube, "shop", "web-0")  # the evicter's retry is told how its job stands
    assert code == 429 and f"{IN_PROGRESS}: PodMigrationJob {name} is Pending" in message
    assert EVICTION_IN_PROGRESS in kube.core.read_namespaced_pod("web-0", "shop").metadata.annotations
    jobs = kube.custom.list_cluster_custom_object(GROUP, VERSION, "podmigrationjobs")["items"]
    assert [j["metadata"]["name"] for j in jobs] == [name]  # one job, however often it is evicted

    code, message = evict(kube, "opted", "a-0")  # its namespace opted in for it
    assert code == 429 and TRIGGERED in message
    assert get_job(kube, job_name(opted["metadata"]["uid"])) is not None

    admin = KubeClient.from_config(KubernetesConfig(kubeconfig=str(gated.sim.kubeconfig)))
    path = service_kubeconfig(admin, gated.sim.kubeconfig, "executor", path=gated.tmp / "executor.kubeconfig")
    admin.close()
    executor = Kube(gated.sim, kubernetes.config.new_client_from_config(config_file=str(path)))
    assert evict(executor, "shop", "web-0") == (201, "")  # the move itself passes: no loop


def test_an_eviction_of_a_pod_no_job_could_move_is_let_through_or_refused_naming_the_rule(
    gated: Gated,
) -> None:
    """The one-replica StatefulSet `db` and the bare pod `lone`, opted in: a job for either would fail at
    once, so none is made and the evicter is never told "evacuation triggered". By default the eviction
    goes through as without Podherd; with `interceptor.unmovable: refuse`, it is refused naming the rule
    and what lifts it."""
    kube = gated.kube
    first = kube.core.read_namespaced_pod("db-0", "shop").metadata.uid
    assert evict(kube, "shop", "db-0") == (201, "")
    assert evict(kube, "shop", "lone") == (201, "")
    assert kube.custom.list_cluster_custom_object(GROUP, VERSION, "podmigrationjobs")["items"] == []

    gated.gate.processes.stop_all()
    admin = KubeClient.from_config(KubernetesConfig(kubeconfig=str(gated.sim.kubeconfig)))
    remove_webhooks(admin)
    admin.close()
    again = watch_until(
        kube.core.list_namespaced_pod,
        lambda pods: (pod := pods.get("shop/db-0")) is not None and pod.metadata.uid != first,
        namespace="shop",
    )["shop/db-0"]
    pod(kube, "shop", "lone", {OPT_IN: "true"})
    (gated.tmp / "refusing").mkdir()  # started after both pods are back: it lists them as it starts
    refusing = start_gate(gated.sim, gated.tmp / "refusing", interceptor={"unmovable": "refuse"})
    try:
        code, message = evict(kube, "shop", "db-0")
        assert code == 403, message
        assert (
            "Podherd will not move pod shop/db-0: ExpectedReplicas: workload StatefulSet/shop/db has a "
            "single replica. The eviction is refused (interceptor.unmovable: refuse); skipEvictionGates: "
            "[ExpectedReplicas] lifts it" in message
        ), message
        code, message = evict(kube, "shop", "lone")
        assert code == 403 and "BarePods: the pod has no controller" in message, message
        assert "evictAllBarePods is off" in message and "podherd.io/evacuate=false" in message, message
        assert kube.core.read_namespaced_pod("db-0", "shop").metadata.uid == again.metadata.uid
        assert kube.custom.list_cluster_custom_object(GROUP, VERSION, "podmigrationjobs")["items"] == []
    finally:
        refusing.processes.stop_all()


def test_an_executor_under_an_identity_the_gate_does_not_know_refuses_to_start_in_one_line(
    gated: Gated,
) -> None:
    """Beside a registered gate, an executor run with the admin's kubeconfig (one identity for every
    service) would have its own evictions intercepted: it ends at once, naming the setting and the way out."""
    config = gated.tmp / "shared-identity.yaml"
    document = {
        "kubernetes": {"kubeconfig": str(gated.sim.kubeconfig)},
        "nats": {"url": "nats://127.0.0.1:9"},
        "http": {"port": 0},
    }
    config.write_text(yaml.safe_dump(document))
    done = podherd(config, "run", "executor", timeout=60)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"podherd: configuration error at `gate.namespace`: the executor runs as {ADMIN}, but the admission "
        "gate (webhooks podherd-gate) lets through only system:serviceaccount:podherd:podherd-executor's "
    ), last
    assert "podherd sim --podherd-accounts DIR" in last, last


def kubectl_drain(gated: Gated, node: str, app: str) -> tuple[int, str]:
    """The real `kubectl drain` of `node`, for the pods of `app` alone (the others are not this test's)."""
    assert KUBECTL is not None
    argv = [KUBECTL, "--kubeconfig", str(gated.sim.kubeconfig), "drain", node, "--ignore-daemonsets"]
    argv += ["--pod-selector", f"app={app}", "--timeout=30s"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    return done.returncode, done.stdout + done.stderr


@pytest.mark.kubectl
@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")
def test_kubectl_drain_of_a_pod_no_job_could_move_is_never_told_evacuation(gated: Gated) -> None:
    """kubectl drain of the node holding the one-replica StatefulSet's pod: evicted as without Podherd,
    the warning naming why Podherd left it alone, no job; with `unmovable: refuse`, the drain stops on it
    with the rule named."""
    kube = gated.kube
    first = kube.core.read_namespaced_pod("db-0", "shop")
    code, output = kubectl_drain(gated, first.spec.node_name, "db")
    assert code == 0, output
    assert "Podherd will not move pod shop/db-0 (ExpectedReplicas" in output, output
    assert "Eviction triggered evacuation" not in output, output
    assert kube.custom.list_cluster_custom_object(GROUP, VERSION, "podmigrationjobs")["items"] == []

    again = watch_until(
        kube.core.list_namespaced_pod,
        lambda pods: (
            (pod := pods.get("shop/db-0")) is not None
            and pod.metadata.uid != first.metadata.uid
            and bool(pod.spec.node_name)
        ),
        namespace="shop",
    )["shop/db-0"]
    gated.gate.processes.stop_all()
    admin = KubeClient.from_config(KubernetesConfig(kubeconfig=str(gated.sim.kubeconfig)))
    remove_webhooks(admin)
    admin.close()
    (gated.tmp / "refusing").mkdir()
    refusing = start_gate(gated.sim, gated.tmp / "refusing", interceptor={"unmovable": "refuse"})
    try:
        code, output = kubectl_drain(gated, again.spec.node_name, "db")
    finally:
        refusing.processes.stop_all()
    assert code != 0 and "ExpectedReplicas: workload StatefulSet/shop/db has a single replica" in output
    assert kube.core.read_namespaced_pod("db-0", "shop").metadata.uid == again.metadata.uid


def use_webhooks(kube: Kube, document: dict[str, Any]) -> None:
    hooks = kube.client("AdmissionregistrationV1Api")
    held = hooks.read_validating_webhook_configuration("podherd-gate").to_dict()["metadata"]
    hooks.replace_validating_webhook_configuration("podherd-gate", {**document, "metadata": held})


def test_while_no_gate_answers_opted_in_namespaces_hold_their_evictions_and_jobs_wait(gated: Gated) -> None:
    """What deploy/'s failurePolicy promises, whether the gate cannot be trusted (a caBundle that is not its
    CA), answers too slowly (stopped, past timeoutSeconds) or is down: in a namespace opted in, evictions
    fail closed (never a move without room); elsewhere, where that webhook hears every eviction, a pod
    opted in by its own label is evicted as without Podherd (fails open); no job is made unchecked."""
    kube = gated.kube
    namespace(kube, "down", {OPT_IN: "true"})
    for name in ("untrusted", "slow", "stopped"):
        pod(kube, "down", name)
        pod(kube, "shop", f"labelled-{name}", {OPT_IN: "true"})
    in_namespace = 'failed calling webhook "evictions-in-namespaces.gate.podherd.io"'

    use_webhooks(kube, webhook_configuration(Authority.new("someone-else").pem))
    code, message = create_job(
        kube, "untrusted", {"podRef": {"kind": "Pod", "namespace": "down", "name": "x"}}
    )
    assert code == 500 and 'failed calling webhook "podmigrationjobs.gate.podherd.io"' in message, message
    code, message = evict(kube, "down", "untrusted")
    assert code == 500 and in_namespace in message and "x509" in message, message
    assert evict(kube, "shop", "labelled-untrusted") == (201, "")

    slow = webhook_configuration(gated.gate.ca)
    for hook in slow["webhooks"]:
        hook["timeoutSeconds"] = 1
    use_webhooks(kube, slow)
    stopped = [r.process for r in gated.gate.replicas]
    for process in stopped:
        process.send_signal(signal.SIGSTOP)
    try:
        code, message = evict(kube, "down", "slow")
        assert code == 500 and in_namespace in message and "context deadline exceeded" in message, message
        assert evict(kube, "shop", "labelled-slow") == (201, "")
    finally:
        for process in stopped:
            process.send_signal(signal.SIGCONT)

    gated.gate.processes.stop_all()
    code, message = create_job(kube, "down", {"podRef": {"kind": "Pod", "namespace": "down", "name": "x"}})
    # The mutating webhook (the job's requester) is called first, and fails closed too.
    assert code == 500 and 'failed calling webhook "requester.gate.podherd.io"' in message, message
    code, message = evict(kube, "down", "stopped")
    assert code == 500 and in_namespace in message and "connection refused" in message, message
    assert evict(kube, "shop", "labelled-stopped") == (201, "")
    assert sorted(p.metadata.name for p in kube.core.list_namespaced_pod("down").items) == [
        "slow",
        "stopped",
        "untrusted",
    ]
    # A stopped replica, resumed, finishes the review it was sent: the job for that eviction is made (room
    # first, as the evicter asked), though the evicter was told the webhook failed. No job for the others.
    made = kube.custom.list_cluster_custom_object(GROUP, VERSION, "podmigrationjobs")["items"]
    assert {j["spec"]["podRef"]["name"] for j in made} <= {"slow"}
