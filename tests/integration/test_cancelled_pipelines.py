"""A pipeline that carries a script asks Redis whether the script is loaded before it sends anything else,
outside the part of the send that hands its connection back. Cancelled there (the service stopped, or
killed, while Redis is slow to answer), it must still hand the connection back: kept, it is one fewer for
the rest of the service, and it is reported as an unclosed session when collected."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import pytest
import redis.asyncio as aioredis

from services.arbitrator.fact_store import FactStore
from services.arbitrator.keys import ArbitratorKeys
from services.arbitrator.pod_events import PodEvents
from shared.api.messages import EventHead, PodInfo, WorkloadRef
from shared.ledger.store import Ledger

pytestmark = pytest.mark.integration


class Silent:
    """A server that takes every connection and answers nothing: Redis at its slowest."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()  # something asked about scripts
        self.server: asyncio.Server | None = None
        self.taken: list[asyncio.StreamWriter] = []

    async def _take(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.taken.append(writer)
        while data := await reader.read(65536):
            if b"SCRIPT" in data.upper():
                self.asked.set()

    async def close(self) -> None:
        """Its connections closed too, before the test's loop ends (not left to the collector)."""
        assert self.server is not None
        self.server.close()
        for writer in self.taken:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
        await self.server.wait_closed()

    async def client(self) -> aioredis.Redis:
        self.server = await asyncio.start_server(self._take, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        # One connection in all; RESP2 and no driver name: nothing said on connecting, nothing to answer.
        return aioredis.Redis(port=port, max_connections=1, driver_info=None, protocol=2)


@pytest.fixture
async def silent() -> AsyncIterator[tuple[Silent, aioredis.Redis]]:
    server = Silent()
    client = await server.client()
    yield server, client
    await client.aclose()
    await server.close()


def _pod() -> tuple[EventHead, PodInfo]:
    web = WorkloadRef(kind="ReplicaSet", namespace="default", name="web")
    pod = PodInfo(uid="u1", namespace="default", name="web-1", workload=web)
    return EventHead(kind="Pod", type="MODIFIED", name="web-1", resource_version="7"), pod


def _calls(client: aioredis.Redis) -> dict[str, Callable[[], Coroutine[Any, Any, object]]]:
    ledger = Ledger(client, "t", 600.0)
    events = PodEvents(client, FactStore(client, "t"), ledger_prefix=ledger.prefix, keys=ArbitratorKeys("t"))
    head, pod = _pod()
    return {
        "pod facts": lambda: events.apply([(head, pod)]),
        "background evictions": lambda: events.evicting([(pod, False)]),
        "jobs queued": lambda: ledger.queue.enqueue_many([("job-1", "k")]),
    }


@pytest.mark.parametrize("call", ["pod facts", "background evictions", "jobs queued"])
async def test_a_pipeline_cancelled_before_its_script_is_found_hands_its_connection_back(
    silent: tuple[Silent, aioredis.Redis], call: str
) -> None:
    server, client = silent
    sending = asyncio.create_task(_calls(client)[call]())
    async with asyncio.timeout(10):
        await server.asked.wait()
    sending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sending
    # The pool's only connection is free again (kept, this raises "Too many connections").
    connection = await client.connection_pool.get_connection()  # type: ignore[no-untyped-call]
    await client.connection_pool.release(connection)
