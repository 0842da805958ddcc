"""kubesim's kubelet probes a container over a real connection, and closes it however the probe ends: a
server that accepts and never answers times the probe out, and the connection is closed, not left for the
garbage collector (an unclosed socket outlives its event loop and warns)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesim.kubelet.pod_status import Container
from kubesim.kubelet.probes import Prober

pytestmark = pytest.mark.integration


async def _noop(_: str) -> None:
    return None


def prober() -> Prober:
    container = Container(spec={"name": "main", "ports": [{"name": "http", "containerPort": 1}]})
    return Prober(container, None, "127.0.0.1", changed=lambda: None, unhealthy=lambda _: None, kill=_noop)


async def silent_server(answer: bytes | None) -> tuple[asyncio.Server, int, asyncio.Queue[bytes]]:
    """A server that reads a request, answers `answer` (None: never), and puts what the client sent before
    closing its side on `seen` once the client closed."""
    seen: asyncio.Queue[bytes] = asyncio.Queue()

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n") if answer is not None else b""
        if answer is not None:
            writer.write(answer)
            await writer.drain()
        rest = await reader.read()  # b"" once the prober closed its side
        await seen.put(request + rest)
        writer.close()

    server = await asyncio.start_server(accepted, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], seen


@pytest.mark.parametrize("kind", ["httpGet", "tcpSocket"])
async def test_a_probe_that_times_out_closes_its_connection(kind: str) -> None:
    server, port, closed = await silent_server(None)
    probe: dict[str, Any] = {kind: {"port": port, "path": "/readyz"}, "timeoutSeconds": 1}
    try:
        ok, why = await prober().once(probe)
        if kind == "httpGet":
            assert not ok
            assert why == "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
        else:
            assert ok, why
        async with asyncio.timeout(5):  # the prober closed its side: the server reads EOF
            await closed.get()
    finally:
        server.close()
        await server.wait_closed()


async def test_an_http_probe_reads_the_status_and_closes() -> None:
    server, port, closed = await silent_server(b"HTTP/1.1 503 Service Unavailable\r\n\r\n")
    try:
        ok, why = await prober().once({"httpGet": {"port": port, "path": "/readyz"}})
        assert (ok, why) == (False, "HTTP probe failed with statuscode: 503")
        async with asyncio.timeout(5):
            request = await closed.get()
        assert request.startswith(b"GET /readyz HTTP/1.1\r\n")
        assert b"User-Agent: kube-probe/1.32\r\n" in request
    finally:
        server.close()
        await server.wait_closed()
