"""The readiness endpoint over real HTTP: a check that hangs (Redis stopped, not gone) makes the service
not ready, saying so, instead of hanging the probe; the other checks still answer."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from shared.config.model import HttpConfig
from shared.service.ops import OpsServer

pytestmark = [pytest.mark.integration]


async def test_a_check_that_never_answers_says_not_ready() -> None:
    ops = OpsServer(HttpConfig(host="127.0.0.1", port=0), check_deadline=0.2)
    hang = asyncio.Event()

    async def stuck() -> str | None:
        await hang.wait()  # never set
        return None

    async def fine() -> str | None:
        return None

    async def down() -> str | None:
        return "not connected to NATS"

    ops.add_check("ledger", stuck)
    ops.add_check("nats", fine)
    await ops.start()
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{ops.port}/readyz") as answer:
                assert answer.status == 503
                assert await answer.text() == "ledger: no answer within 0.2s\n"
            ops.add_check("nats", down)
            async with http.get(f"http://127.0.0.1:{ops.port}/readyz") as answer:
                text = await answer.text()
                assert text == "ledger: no answer within 0.2s\nnats: not connected to NATS\n"
            ops.checks.pop("ledger")
            ops.add_check("nats", fine)
            async with http.get(f"http://127.0.0.1:{ops.port}/readyz") as answer:
                assert (answer.status, await answer.text()) == (200, "ready\n")
    finally:
        await ops.stop()
