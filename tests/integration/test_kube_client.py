"""The Kubernetes adapter's requests from the event loop (aiohttp with the official client's configuration):
credentials, bodies, errors, and a kept-alive connection the server closed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import msgspec
import pytest
from kubernetes.client import ApiClient, Configuration, V1ConfigMap, V1ObjectMeta

from kubesim.sim import SimHandle
from shared.config.model import KubernetesConfig
from shared.kube.client import KubeClient, KubeError

pytestmark = pytest.mark.integration
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


async def test_requests_from_the_loop_authenticate_send_json_and_raise_the_servers_status(
    kubesim_factory: Callable[..., SimHandle],
) -> None:
    handle = kubesim_factory("small")
    kube = KubeClient.from_config(KubernetesConfig(kubeconfig=str(handle.kubeconfig)))
    try:
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plain"}, "data": {"a": "1"}}
        created = msgspec.json.decode(await kube.arequest("POST", CONFIGMAPS, body=body))
        assert created["data"] == {"a": "1"} and created["metadata"]["uid"]
        model = V1ConfigMap(metadata=V1ObjectMeta(name="model"), data={"b": "2"})  # the client's own types
        await kube.arequest("POST", CONFIGMAPS, body=model)
        patch = {"data": {"a": "3"}}
        await kube.arequest(
            "PATCH", f"{CONFIGMAPS}/plain", body=patch, content_type="application/merge-patch+json"
        )
        listed = await kube.list_items(CONFIGMAPS, "")
        data = {i["metadata"]["name"]: i["data"] for i in listed}
        assert data["plain"] == {"a": "3"} and data["model"] == {"b": "2"}
        assert await kube.get_json(f"{CONFIGMAPS}/missing") is None
        with pytest.raises(KubeError) as conflict:
            await kube.arequest("POST", CONFIGMAPS, body=body)
        assert (conflict.value.status, conflict.value.reason) == (409, "AlreadyExists")
        assert 'configmaps "plain" already exists' in conflict.value.message
        asked = handle.call(lambda sim: dict(sim.api.requests_by_verb))
        assert asked[("kubernetes-admin", "create", "configmaps")] == 3  # as the kubeconfig's user
        await kube.aclose()
        # Closed, it opens again on the next request.
        assert (await kube.get_json(f"{CONFIGMAPS}/plain") or {})["data"] == {"a": "3"}
    finally:
        await kube.aclose()


async def test_a_get_on_a_connection_the_server_closed_is_sent_again_and_a_post_is_not() -> None:
    """A server that answers each connection's first request and then drops the connection without a word,
    as an API server restarting or an idle timeout does to a kept-alive connection."""
    served: list[bytes] = []

    async def answer_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        served.append(head.split(b" ", 2)[1])
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
        await writer.drain()
        await reader.read(1)  # the client's next request on this connection, or its close
        writer.close()

    server = await asyncio.start_server(answer_once, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    configuration = Configuration(host=f"http://127.0.0.1:{port}")
    kube = KubeClient(ApiClient(configuration))
    try:
        assert await kube.arequest("GET", "/api/v1/nodes/a") == b"{}"
        assert await kube.arequest("GET", "/api/v1/nodes/b") == b"{}"  # again, on a new connection
        assert served == [b"/api/v1/nodes/a", b"/api/v1/nodes/b"]
        with pytest.raises(Exception, match="disconnected"):  # a create may have been done: not sent again
            await kube.arequest("POST", CONFIGMAPS, body={"metadata": {"name": "x"}})
        assert served == [b"/api/v1/nodes/a", b"/api/v1/nodes/b"]
    finally:
        await kube.aclose()
        server.close()
        await server.wait_closed()


def test_one_client_serves_one_event_loop_after_another(kubesim_factory: Callable[..., SimHandle]) -> None:
    """As the CLI does: each `asyncio.run` has a loop of its own; the client's requests follow it."""
    handle = kubesim_factory("small")
    kube = KubeClient.from_config(KubernetesConfig(kubeconfig=str(handle.kubeconfig)))
    nodes = "/api/v1/nodes"
    try:
        first = asyncio.run(kube.list_items(nodes, ""))
        second = asyncio.run(kube.list_items(nodes, ""))  # the first loop is closed by now
        assert [n["metadata"]["name"] for n in first] == [n["metadata"]["name"] for n in second] != []
    finally:
        kube.close()


async def test_credentials_are_asked_of_the_official_client_again_once_they_have_served_their_time() -> None:
    """The token the client's configuration hands out (its refresh hook re-reads a rotated one) is reused for
    `credentials_for` seconds, then asked for again."""
    sent: list[str] = []

    async def record(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while not reader.at_eof():
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                break
            lines = head.decode().split("\r\n")[1:]
            fields = {k.lower(): v for k, _, v in (line.partition(": ") for line in lines)}
            sent.append(fields.get("authorization", ""))
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(record, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    configuration = Configuration(host=f"http://127.0.0.1:{port}")
    configuration.api_key = {"BearerToken": "first"}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    held = KubeClient(ApiClient(configuration))  # the default: minutes before a token's end, seconds
    asks_each_time = KubeClient(ApiClient(configuration), credentials_for=0.0)
    try:
        for kube in (held, asks_each_time):
            await kube.arequest("GET", "/api/v1/nodes/a")
        configuration.api_key = {"BearerToken": "rotated"}
        for kube in (held, asks_each_time):
            await kube.arequest("GET", "/api/v1/nodes/a")
        assert sent == ["Bearer first", "Bearer first", "Bearer first", "Bearer rotated"]
    finally:
        for kube in (held, asks_each_time):
            await kube.aclose()
        server.close()
        await server.wait_closed()


async def test_requests_over_the_replicas_budget_wait_their_turn(
    kubesim_factory: Callable[..., SimHandle],
) -> None:
    handle = kubesim_factory("small")
    config = KubernetesConfig(kubeconfig=str(handle.kubeconfig), qps=20.0, burst=2)
    kube = KubeClient.from_config(config)
    loop = asyncio.get_running_loop()
    try:
        started = loop.time()
        found = await asyncio.gather(*(kube.get_json(f"{CONFIGMAPS}/missing-{i}") for i in range(6)))
        assert found == [None] * 6  # every one answered
        # Two at once, then the other four a twentieth of a second apart: never sooner.
        assert loop.time() - started >= 4 / 20
    finally:
        await kube.aclose()
