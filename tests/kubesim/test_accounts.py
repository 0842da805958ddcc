"""What a real control plane gives every namespace and pod, so that in-cluster clients work: the `default`
ServiceAccount, the `kube-root-ca.crt` ConfigMap, the `kubernetes` Service, and the ServiceAccount admission
plugin's projected `kube-api-access-*` volume mounted in every container."""

from __future__ import annotations

import kubernetes
import pytest

from kubesim.apiserver.serving import KUBERNETES_SERVICE_IP
from tests.kube import Kube, refusal

pytestmark = pytest.mark.integration
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def bare_pod(name: str, **spec: object) -> dict[str, object]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "x"}], **spec}}


def test_every_namespace_gets_its_default_account_and_the_root_ca(kube: Kube) -> None:
    kube.core.create_namespace({"metadata": {"name": "team"}})
    for namespace in ("default", "team"):
        assert kube.core.read_namespaced_service_account("default", namespace).metadata.name == "default"
        ca = kube.core.read_namespaced_config_map("kube-root-ca.crt", namespace).data["ca.crt"]
        assert ca == kube.handle.ca_pem.decode()
    kube.core.delete_namespaced_config_map("kube-root-ca.crt", "team")
    kube.core.read_namespaced_config_map("kube-root-ca.crt", "team")  # published again at once
    master = kube.core.read_namespaced_service("kubernetes", "default")
    assert master.spec.cluster_ip == KUBERNETES_SERVICE_IP and master.spec.ports[0].port == 443


def test_pods_get_the_projected_service_account_volume(kube: Kube) -> None:
    pod = kube.core.create_namespaced_pod("default", bare_pod("p"))
    assert pod.spec.service_account_name == "default"
    (volume,) = pod.spec.volumes
    assert volume.name.startswith("kube-api-access-") and len(volume.name) == len("kube-api-access-") + 5
    sources = volume.projected.sources
    assert sources[0].service_account_token.expiration_seconds == 3607
    assert sources[1].config_map.name == "kube-root-ca.crt"
    assert sources[2].downward_api.items[0].field_ref.field_path == "metadata.namespace"
    (mount,) = pod.spec.containers[0].volume_mounts
    assert (mount.name, mount.mount_path, mount.read_only) == (volume.name, SA_DIR, True)

    off = kube.core.create_namespaced_pod("default", bare_pod("q", automountServiceAccountToken=False))
    assert not off.spec.volumes and not off.spec.containers[0].volume_mounts


def test_a_simulated_pod_has_no_log_and_says_why(kube: Kube) -> None:
    kube.core.create_namespaced_pod("default", bare_pod("quiet"))
    with pytest.raises(kubernetes.client.ApiException) as caught:
        kube.core.read_namespaced_pod_log("quiet", "default")
    status = refusal(caught.value)
    assert (status["code"], status["reason"]) == (400, "BadRequest")
    assert status["message"] == 'container "c" in pod "quiet" is waiting to start: ContainerCreating'
    with pytest.raises(kubernetes.client.ApiException) as caught:
        kube.core.read_namespaced_pod_log("quiet", "default", container="other")
    assert refusal(caught.value)["message"] == "container other is not valid for pod quiet"
