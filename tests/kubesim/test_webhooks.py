"""kubesim calls admission webhooks as kube-apiserver does: over HTTPS verified against their caBundle, an
AdmissionReview v1 for what the request is about; a denial passed on with the webhook's code and its name
in the message; a webhook that cannot be asked refusing the request (failurePolicy Fail) or skipped
(Ignore); a mutating webhook's JSONPatch taken; a dry run sent as one; configurations defaulted and
validated."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import ssl
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from aiohttp import web

from kubesim.apiserver.webhook_rules import Request, matches
from kubesim.sim import SimHandle
from shared.access.authority import Authority
from tests.kube import Kube, client_for, pod_ready, watch_until

pytestmark = pytest.mark.integration
Answer = Callable[[dict[str, Any]], dict[str, Any]]
SERVICE_NAME = "gate.podherd.svc"  # the name the API server verifies a Service's webhook by


class WebhookServer:
    """An HTTPS admission webhook on loopback, in a thread of its own: each path answers with a function
    of the AdmissionReview's request; every review it was sent is kept."""

    def __init__(self) -> None:
        self.authority = Authority.new("webhook-ca")
        self.answers: dict[str, Answer] = {}
        self.reviews: list[dict[str, Any]] = []
        self.delay = 0.0
        self.delays: dict[str, float] = {}  # by path, over `delay`
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self._ready.wait(10)

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.authority.pem).decode()

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        cert, key = self.authority.leaf("webhook", names=("localhost", SERVICE_NAME), ips=("127.0.0.1",))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        with tempfile.TemporaryDirectory() as directory:
            (Path(directory) / "c").write_bytes(cert)
            (Path(directory) / "k").write_bytes(key)
            context.load_cert_chain(Path(directory) / "c", Path(directory) / "k")
        app = web.Application()
        app.router.add_post("/{path:.*}", self._handle)
        runner = self._runner = web.AppRunner(app)
        self._loop.run_until_complete(runner.setup())
        self._loop.run_until_complete(
            web.TCPSite(runner, "127.0.0.1", self.port, ssl_context=context).start()
        )
        self._ready.set()
        self._loop.run_forever()

    async def _handle(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.reviews.append(review)
        delay = self.delays.get(request.path, self.delay)
        if delay:
            await asyncio.sleep(delay)  # a slow webhook: what is measured is the caller's timeout
        answer = self.answers[request.path](review["request"])
        response = {"uid": review["request"]["uid"], **answer}
        return web.json_response(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
        )

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()  # its own sockets too: nothing is left for the collector to warn of


@pytest.fixture(scope="module")
def server() -> Iterator[WebhookServer]:
    running = WebhookServer()
    yield running
    running.stop()


@pytest.fixture
def kube(kubesim_factory: Callable[..., SimHandle], server: WebhookServer) -> Kube:
    server.answers.clear()
    server.reviews.clear()
    server.delay = 0.0
    server.delays.clear()
    return client_for(kubesim_factory("fragmented"))


def webhook(name: str, url: str, ca: str, *, resources: list[str], **more: Any) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": {"url": url, "caBundle": ca},
        "rules": [
            {"operations": ["CREATE"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": resources}
        ],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        **more,
    }


def configure(kube: Kube, *webhooks: dict[str, Any], mutating: bool = False) -> None:
    api = kube.client("AdmissionregistrationV1Api")
    kind = "MutatingWebhookConfiguration" if mutating else "ValidatingWebhookConfiguration"
    body = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": "tests"},
        "webhooks": list(webhooks),
    }
    if mutating:
        api.create_mutating_webhook_configuration(body)
    else:
        api.create_validating_webhook_configuration(body)


def refusal(call: Callable[[], object]) -> tuple[int, dict[str, Any]]:
    with pytest.raises(kubernetes.client.ApiException) as caught:
        call()
    return caught.value.status, json.loads(caught.value.body or "{}")


def config_map(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}


def test_a_denial_is_passed_on_with_the_webhooks_code_and_name(kube: Kube, server: WebhookServer) -> None:
    server.answers["/deny"] = lambda r: {"allowed": False, "status": {"code": 403, "message": "not here"}}
    configure(
        kube, webhook("deny.example.com", server.url("/deny"), server.ca_bundle, resources=["configmaps"])
    )
    code, status = refusal(lambda: kube.core.create_namespaced_config_map("default", config_map("c")))
    assert code == 403
    assert status["message"] == 'admission webhook "deny.example.com" denied the request: not here'
    [review] = server.reviews
    asked = review["request"]
    assert (review["apiVersion"], review["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    assert asked["operation"] == "CREATE" and asked["namespace"] == "default" and asked["name"] == "c"
    assert asked["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert asked["object"]["data"] == {"k": "v"} and asked["userInfo"]["username"] == "kubernetes-admin"
    assert kube.core.list_namespaced_config_map("default", label_selector="x").items == []


def test_of_webhooks_that_all_deny_the_first_in_order_says_why_whichever_answers_first(
    kube: Kube, server: WebhookServer
) -> None:
    def denying(why: str) -> Answer:
        return lambda request: {"allowed": False, "status": {"message": why}}

    server.answers["/first"], server.answers["/second"] = denying("first"), denying("second")
    server.delays["/first"] = 0.3
    configure(
        kube,
        webhook("a.example.com", server.url("/first"), server.ca_bundle, resources=["configmaps"]),
        webhook("b.example.com", server.url("/second"), server.ca_bundle, resources=["configmaps"]),
    )
    code, status = refusal(lambda: kube.core.create_namespaced_config_map("default", config_map("c")))
    assert (code, status["message"]) == (400, 'admission webhook "a.example.com" denied the request: first')
    assert len(server.reviews) == 2  # both were asked, at once


def test_an_eviction_is_a_create_of_pods_eviction_and_a_429_comes_back_as_it_was(
    kube: Kube, server: WebhookServer
) -> None:
    pod = kube.core.list_namespaced_pod("default").items[0].metadata
    server.answers["/evict"] = lambda r: {
        "allowed": False,
        "status": {"code": 429, "reason": "TooManyRequests", "message": "Eviction triggered evacuation"},
    }
    configure(
        kube,
        webhook("evict.example.com", server.url("/evict"), server.ca_bundle, resources=["pods/eviction"]),
    )
    body = {"metadata": {"name": pod.name, "namespace": "default"}}
    code, status = refusal(lambda: kube.core.create_namespaced_pod_eviction(pod.name, "default", body))
    assert (code, status["reason"]) == (429, "TooManyRequests")
    assert (
        status["message"]
        == 'admission webhook "evict.example.com" denied the request: Eviction triggered evacuation'
    )
    asked = server.reviews[-1]["request"]
    assert asked["kind"] == {"group": "policy", "version": "v1", "kind": "Eviction"}
    assert (asked["resource"]["resource"], asked["subResource"], asked["name"]) == (
        "pods",
        "eviction",
        pod.name,
    )
    assert kube.core.read_namespaced_pod(pod.name, "default").metadata.deletion_timestamp is None
    kube.core.create_namespaced_config_map("default", config_map("untouched"))  # `pods/eviction` only


def test_a_mutating_webhooks_patch_is_taken(kube: Kube, server: WebhookServer) -> None:
    patch = [{"op": "add", "path": "/metadata/labels/stamped", "value": "yes"}]
    server.answers["/stamp"] = lambda r: {
        "allowed": True,
        "patchType": "JSONPatch",
        "patch": base64.b64encode(json.dumps(patch).encode()).decode(),
    }
    configure(
        kube,
        webhook("stamp.example.com", server.url("/stamp"), server.ca_bundle, resources=["configmaps"]),
        mutating=True,
    )
    kube.core.create_namespaced_config_map("default", config_map("c", team="a"))
    assert kube.core.read_namespaced_config_map("c", "default").metadata.labels == {
        "team": "a",
        "stamped": "yes",
    }


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
@pytest.mark.parametrize("fault", ["refused", "wrong CA", "slow"])
def test_a_webhook_that_cannot_be_asked_refuses_or_is_skipped_by_its_failure_policy(
    kube: Kube, server: WebhookServer, policy: str, fault: str
) -> None:
    server.answers["/ok"] = lambda r: {"allowed": True}
    url, ca, why = server.url("/ok"), server.ca_bundle, ""
    if fault == "refused":
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            url = f"https://127.0.0.1:{probe.getsockname()[1]}/ok"
        why = "connect: connection refused"
    elif fault == "wrong CA":
        ca, why = (
            base64.b64encode(Authority.new("other").pem).decode(),
            "x509: certificate signed by unknown authority",
        )
    else:
        server.delay, why = 1.5, "context deadline exceeded"
    configure(
        kube,
        webhook(
            "flaky.example.com", url, ca, resources=["configmaps"], failurePolicy=policy, timeoutSeconds=1
        ),
    )

    def create() -> None:
        kube.core.create_namespaced_config_map("default", config_map("c"))

    if policy == "Ignore":
        create()
        assert kube.core.read_namespaced_config_map("c", "default").data == {"k": "v"}
        return
    code, status = refusal(create)
    assert (code, status["reason"]) == (500, "InternalError")
    called = 'Internal error occurred: failed calling webhook "flaky.example.com": failed to call webhook'
    prefix = f'{called}: Post "{url}?timeout=1s": '
    assert status["message"].startswith(prefix) and status["message"].endswith(why), status["message"]


def test_a_dry_run_reaches_webhooks_told_it_is_one(kube: Kube, server: WebhookServer) -> None:
    server.answers["/ok"] = lambda r: {"allowed": True}
    careful = webhook("careful.example.com", server.url("/ok"), server.ca_bundle, resources=["configmaps"])
    configure(kube, {**careful, "sideEffects": "NoneOnDryRun"})
    kube.core.create_namespaced_config_map("default", config_map("c"), dry_run="All")
    assert server.reviews[-1]["request"]["dryRun"] is True
    assert kube.core.list_namespaced_config_map("default", field_selector="metadata.name=c").items == []


def request_for(resource: str, subresource: str = "", namespace: str = "ns", **more: Any) -> Request:
    return Request("CREATE", "", "v1", resource, "Pod", subresource=subresource, namespace=namespace, **more)


@pytest.mark.parametrize(
    ("wanted", "resource", "subresource", "called"),
    [
        ("pods", "pods", "", True),
        ("*", "pods", "", True),
        ("*", "pods", "eviction", False),  # `*` is every resource, no subresource
        ("*/*", "pods", "eviction", True),
        ("pods/*", "pods", "eviction", True),
        ("*/eviction", "pods", "eviction", True),
        ("pods/eviction", "pods", "", False),
        ("pods/status", "pods", "eviction", False),
    ],
)
def test_rules_match_resources_and_subresources(
    wanted: str, resource: str, subresource: str, called: bool
) -> None:
    hook = {"rules": [{"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": [wanted]}]}
    assert matches(hook, request_for(resource, subresource), {}) is called


def test_selectors_see_the_namespaces_labels_and_the_objects_own() -> None:
    rule = {"operations": ["CREATE"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*", "*"]}
    outside = {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["podherd"]}
        ]
    }
    hook = {"rules": [rule], "namespaceSelector": outside}
    assert matches(hook, request_for("pods", namespace="default"), {})
    assert not matches(hook, request_for("pods", namespace="podherd"), {})  # its own namespace is exempt
    assert matches(hook, request_for("nodes", namespace=""), None)  # cluster-scoped: no namespace to select
    opted = {"rules": [rule], "objectSelector": {"matchLabels": {"podherd.io/evacuate": "true"}}}
    eviction = {"metadata": {"name": "web-0"}}  # an Eviction carries no labels of the pod's
    assert not matches(opted, request_for("pods", "eviction", obj=eviction), {})
    labelled = {"metadata": {"labels": {"podherd.io/evacuate": "true"}}}
    assert matches(opted, request_for("pods", obj=labelled), {})
    assert not matches(
        {"rules": [rule]},
        Request(
            "CREATE",
            "admissionregistration.k8s.io",
            "v1",
            "validatingwebhookconfigurations",
            "ValidatingWebhookConfiguration",
        ),
        None,
    )


def test_a_configuration_is_defaulted_and_one_that_cannot_work_is_refused_naming_each_field(
    kube: Kube,
) -> None:
    api = kube.client("AdmissionregistrationV1Api")
    good = webhook("ok.example.com", "https://127.0.0.1:1/ok", "", resources=["pods"])
    configure(kube, good)
    [stored] = api.read_validating_webhook_configuration("tests").webhooks
    assert (stored.failure_policy, stored.match_policy, stored.timeout_seconds) == ("Fail", "Equivalent", 10)
    assert stored.rules[0].scope == "*" and stored.namespace_selector is not None
    bad = [
        {**good, "name": "short.name", "sideEffects": "Some"},
        {**good, "name": "ok.example.com", "admissionReviewVersions": ["v2"], "timeoutSeconds": 31},
        {**good, "name": "ok.example.com", "clientConfig": {"url": "http://127.0.0.1:1/ok"}},
    ]
    body = {"metadata": {"name": "bad"}, "webhooks": bad}
    code, status = refusal(lambda: api.create_validating_webhook_configuration(body))
    assert (code, status["reason"]) == (422, "Invalid")
    fields = [cause["field"] for cause in status["details"]["causes"]]
    assert fields == [
        "webhooks[0].name",
        "webhooks[0].sideEffects",
        "webhooks[1].admissionReviewVersions",
        "webhooks[1].timeoutSeconds",
        "webhooks[2].name",
        "webhooks[2].clientConfig.url",
    ]
    assert (
        'webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"'
        in status["message"]
    )


def test_a_webhook_behind_a_service_is_reached_at_its_backends_and_verified_by_the_services_name(
    kubesim_factory: Callable[..., SimHandle], server: WebhookServer
) -> None:
    server.answers["/check"] = lambda r: {"allowed": False, "status": {"message": "seen"}}
    kube = client_for(
        kubesim_factory("fragmented", services={"podherd/gate:8443": [f"127.0.0.1:{server.port}"]})
    )
    service = {"namespace": "podherd", "name": "gate", "path": "/check", "port": 8443}
    hook = webhook("gate.podherd.io", "", server.ca_bundle, resources=["configmaps"])
    hook["clientConfig"] = {"service": service, "caBundle": server.ca_bundle}
    configure(kube, hook)
    code, status = refusal(lambda: kube.core.create_namespaced_config_map("default", config_map("c")))
    assert (code, status["message"]) == (400, 'admission webhook "gate.podherd.io" denied the request: seen')
    hook["clientConfig"]["service"] = {**service, "name": "nobody", "port": 443}
    kube.client("AdmissionregistrationV1Api").patch_validating_webhook_configuration(
        "tests", {"webhooks": [hook]}
    )
    code, status = refusal(lambda: kube.core.create_namespaced_config_map("default", config_map("d")))
    assert code == 500 and status["message"].endswith(
        'Post "https://nobody.podherd.svc:443/check?timeout=10s": no endpoints available for service "nobody"'
    ), status["message"]


def test_a_collection_deleted_asks_for_each_object_and_keeps_those_refused(
    kube: Kube, server: WebhookServer
) -> None:
    for name in ("keep", "drop"):
        kube.core.create_namespaced_config_map("default", config_map(name, app="x"))
    server.answers["/delete"] = lambda r: {"allowed": r["name"] != "keep", "status": {"message": "kept"}}
    hook = webhook("keeper.example.com", server.url("/delete"), server.ca_bundle, resources=["configmaps"])
    hook["rules"][0]["operations"] = ["DELETE"]
    configure(kube, hook)
    code, status = refusal(
        lambda: kube.core.delete_collection_namespaced_config_map("default", label_selector="app=x")
    )
    assert (code, status["message"]) == (
        400,
        'admission webhook "keeper.example.com" denied the request: kept',
    )
    left = kube.core.list_namespaced_config_map("default", label_selector="app=x").items
    assert [c.metadata.name for c in left] == ["keep"]
    asked = {review["request"]["name"]: review["request"] for review in server.reviews}
    assert asked["keep"]["operation"] == "DELETE" and asked["keep"]["oldObject"]["metadata"]["name"] == "keep"
    assert asked["keep"]["object"] is None


def test_a_services_backends_are_its_ready_pods_at_their_target_port(kube: Kube) -> None:
    web = kube.core.list_namespaced_pod("default", label_selector="app=web").items
    ports = [{"name": "https", "port": 443, "targetPort": 8443}]
    kube.core.create_namespaced_service(
        "default", {"metadata": {"name": "gate"}, "spec": {"selector": {"app": "web"}, "ports": ports}}
    )
    ready = watch_until(
        kube.core.list_namespaced_pod,
        lambda s: len(s) == len(web) and all(p.status.pod_ip and pod_ready(p) for p in s.values()),
        namespace="default",
        label_selector="app=web",
    )
    found = kube.handle.call(
        lambda sim: sim.api.resources.admitting.admission.backends("default", "gate", 443)
    )
    assert sorted(found) == sorted((p.status.pod_ip, 8443) for p in ready.values()) and len(found) == len(web)
    assert (
        kube.handle.call(lambda sim: sim.api.resources.admitting.admission.backends("default", "gate", 80))
        == []
    )


def test_match_conditions_decide_who_a_webhook_is_called_for_and_one_kubesim_cannot_read_is_refused(
    kube: Kube, server: WebhookServer
) -> None:
    server.answers["/deny"] = lambda r: {"allowed": False, "status": {"code": 403, "message": "not you"}}
    admin_only = "request.userInfo.username in ['kubernetes-admin'] && object.metadata.name.startsWith('c')"
    conditions = [{"name": "admins-c", "expression": admin_only}]
    hook = webhook(
        "deny.example.com",
        server.url("/deny"),
        server.ca_bundle,
        resources=["configmaps"],
        matchConditions=conditions,
    )
    configure(kube, hook)
    code, _ = refusal(lambda: kube.core.create_namespaced_config_map("default", config_map("c1")))
    assert code == 403 and len(server.reviews) == 1
    kube.core.create_namespaced_config_map("default", config_map("d1"))  # the condition false: not called
    assert len(server.reviews) == 1
    api = kube.client("AdmissionregistrationV1Api")
    unreadable = {
        **hook,
        "name": "cel.example.com",
        "matchConditions": [{"name": "x", "expression": "size(object) > 1"}],
    }
    body = {"metadata": {"name": "cel"}, "webhooks": [unreadable]}
    code, status = refusal(lambda: api.create_validating_webhook_configuration(body))
    assert code == 422
    assert [c["field"] for c in status["details"]["causes"]] == ["webhooks[0].matchConditions[0].expression"]
    failing = {
        **hook,
        "name": "missing.example.com",
        "matchConditions": [{"name": "y", "expression": "object.nope == 1"}],
    }
    api.create_validating_webhook_configuration({"metadata": {"name": "missing"}, "webhooks": [failing]})
    code, status = refusal(lambda: kube.core.create_namespaced_config_map("default", config_map("e1")))
    assert code == 500 and "failed to evaluate match condition: no such key: nope" in status["message"]
