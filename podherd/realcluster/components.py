"""What each component of the real engine is started with: its command line and configuration files, as
plain data (the processes are `processes`'s)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podherd.credentials import admission_configuration, webhook_client_kubeconfig

SERVICE_CIDR = "10.96.0.0/16"  # addresses the API server allocates to Services; nothing is sent to them
POD_CIDR = "10.244.0.0/16"  # kwok's pod addresses: written into pod status, never reached
ISSUER = "https://kubernetes.default.svc.cluster.local"
KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
SCHEDULERS = ("koord-scheduler", "default-scheduler")
# Koordinator's CRDs installed whatever the profile: koord-scheduler waits, silently, for a Device informer.
KOORDINATOR_CRDS = (
    "scheduling.koordinator.sh_reservations.yaml",
    "scheduling.koordinator.sh_podmigrationjobs.yaml",
    "scheduling.koordinator.sh_devices.yaml",
)


@dataclass(frozen=True)
class Ports:
    etcd: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    scheduler_services: int  # koord-scheduler's plain-HTTP services (its own 10251 by default)
    kwok: int


@dataclass(frozen=True)
class Layout:
    """Where one control plane keeps its files: `work` (its own) and `built` (make controlplane's)."""

    work: Path
    built: Path

    def bin(self, name: str) -> str:
        return str(self.built / "bin" / name)

    def file(self, name: str) -> Path:
        return self.work / name

    def kubeconfig(self, component: str) -> Path:
        return self.work / f"{component}.kubeconfig"

    @property
    def crds(self) -> list[Path]:
        return [self.built / "crds" / name for name in KOORDINATOR_CRDS]

    @property
    def kwok_stages(self) -> list[Path]:
        return sorted((self.built / "kwok-stages").glob("*.yaml"))


def etcd(layout: Layout, ports: Ports) -> list[str]:
    peer = f"http://127.0.0.1:{ports.etcd_peer}"
    client = f"http://127.0.0.1:{ports.etcd}"
    return [
        layout.bin("etcd"),
        f"--data-dir={layout.file('etcd')}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=default={peer}",
        "--listen-metrics-urls=",
        # A test cluster's data is thrown away with it: no fsync per write.
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def apiserver(layout: Layout, ports: Ports) -> list[str]:
    f = layout.file
    return [
        layout.bin("kube-apiserver"),
        f"--etcd-servers=http://127.0.0.1:{ports.etcd}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={ports.apiserver}",
        f"--tls-cert-file={f('apiserver.crt')}",
        f"--tls-private-key-file={f('apiserver.key')}",
        f"--client-ca-file={f('ca.crt')}",
        f"--token-auth-file={f('tokens.csv')}",
        "--authorization-mode=RBAC",
        "--anonymous-auth=false",
        f"--service-account-issuer={ISSUER}",
        f"--service-account-key-file={f('sa.pub')}",
        f"--service-account-signing-key-file={f('sa.key')}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        # The `kubernetes` Service's endpoint would be 127.0.0.1, which Endpoints refuse: none is kept.
        "--endpoint-reconciler-type=none",
        # The front proxy's CA, as kubeadm configures it: components read it to authenticate their callers.
        f"--requestheader-client-ca-file={f('ca.crt')}",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        "--allow-privileged=true",
        # Who did what, as the API server decided it: the ServiceAccounts' requests (Podherd's services'),
        # read back to show each worked within its role (`audit`).
        f"--audit-policy-file={f('audit-policy.yaml')}",
        f"--audit-log-path={f('audit.log')}",
        "--audit-log-format=json",
        "--audit-log-mode=batch",
        "--audit-log-batch-max-wait=200ms",
        # The client certificate it presents to every admission webhook (`admission_config`).
        f"--admission-control-config-file={f('admission.yaml')}",
        "--profiling=false",
        "--v=1",
    ]


def admission_config(layout: Layout) -> tuple[dict[str, Any], dict[str, Any]]:
    """kube-apiserver's AdmissionConfiguration for both webhook plugins, and the kubeconfig it names: a user
    `*` (any webhook) presenting the webhook client certificate. As the security guide configures it."""
    f = layout.file
    kubeconfig = webhook_client_kubeconfig(str(f("webhook-client.crt")), str(f("webhook-client.key")), "*")
    return admission_configuration(str(f("webhook-client.kubeconfig"))), kubeconfig


def audit_policy() -> dict[str, Any]:
    """Every ServiceAccount's request at Metadata level (who, which verb on what, the decision), nothing
    else: the components' own traffic stays out of the log."""
    return {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived", "ResponseStarted"],
        "rules": [
            {"level": "Metadata", "userGroups": ["system:serviceaccounts"]},
            {"level": "None"},
        ],
    }


def _serving(kubeconfig: Path, port: int, certs: Path) -> list[str]:
    """A component's own HTTPS endpoint (its /healthz) on loopback, its callers checked with `kubeconfig`."""
    return [
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={certs}",
        "--v=1",
    ]


def controller_manager(layout: Layout, ports: Ports) -> list[str]:
    f = layout.file
    kubeconfig = layout.kubeconfig("kube-controller-manager")
    return [
        layout.bin("kube-controller-manager"),
        f"--kubeconfig={kubeconfig}",
        *_serving(kubeconfig, ports.controller_manager, f("kcm-certs")),
        f"--service-account-private-key-file={f('sa.key')}",
        f"--root-ca-file={f('ca.crt')}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--leader-elect=false",
        "--use-service-account-credentials=false",
        # Nodes are kwok's: no cloud, no routes, no CIDRs to hand out.
        "--controllers=*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller",
        "--profiling=false",
    ]


def scheduler(layout: Layout, ports: Ports) -> list[str]:
    kubeconfig = layout.kubeconfig("koord-scheduler")
    return [
        layout.bin("koord-scheduler"),
        f"--config={layout.file('koord-scheduler.yaml')}",
        *_serving(kubeconfig, ports.scheduler, layout.file("scheduler-certs")),
        "--address=127.0.0.1",
        f"--port={ports.scheduler_services}",
    ]


def kwok(layout: Layout, ports: Ports) -> list[str]:
    key, value = KWOK_NODE_ANNOTATION
    return [
        layout.bin("kwok"),
        f"--kubeconfig={layout.kubeconfig('kwok')}",
        f"--config={layout.file('kwok.yaml')}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={key}={value}",
        f"--server-address=127.0.0.1:{ports.kwok}",
        f"--cidr={POD_CIDR}",
        "--node-lease-duration-seconds=40",
    ]


def _reservation_plugins() -> dict[str, Any]:
    """A profile's plugins: Reservation at every point Koordinator's own configuration puts it (bind before
    the DefaultBinder), kube-scheduler's defaults beside it."""
    reservation = [{"name": "Reservation"}]
    return {
        "preFilter": {"enabled": reservation},
        "filter": {"enabled": reservation},
        "postFilter": {"enabled": reservation},
        "preScore": {"enabled": reservation},
        "score": {"enabled": [{"name": "Reservation", "weight": 5000}]},
        "reserve": {"enabled": reservation},
        "preBind": {"enabled": reservation},
        "bind": {"disabled": [{"name": "*"}], "enabled": [*reservation, {"name": "DefaultBinder"}]},
    }


def scheduler_config(kubeconfig: Path) -> dict[str, Any]:
    """koord-scheduler's KubeSchedulerConfiguration: the `koord-scheduler` profile and a `default-scheduler`
    one, so that pods naming no scheduler (and Reservations whose template names none) are placed too."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 200, "burst": 400},
        "profiles": [{"schedulerName": name, "plugins": _reservation_plugins()} for name in SCHEDULERS],
    }


def graceful_delete_stage() -> dict[str, Any]:
    """A pod being deleted goes once its grace period has passed (its deletionTimestamp) and no finalizer
    holds it, as a kubelet confirms it; kwok's own delete stages end it at once or at a random time."""
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": "pod-delete-after-grace"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchExpressions": [
                    {"key": ".metadata.deletionTimestamp", "operator": "Exists"},
                    {"key": ".metadata.finalizers", "operator": "DoesNotExist"},
                ]
            },
            "delay": {
                "durationMilliseconds": 0,
                "durationFrom": {"expressionFrom": ".metadata.deletionTimestamp"},
            },
            "next": {"delete": True},
        },
    }
