"""The executor's own evictions pass the admission gate because the gate knows its ServiceAccount
(`gate.serviceAccount("executor")`). Run under another identity (one shared kubeconfig for every service,
`podherd run all` as an admin) beside a registered gate, each of its evictions of an opted-in pod would be
taken for someone else's and turned into a job again: it refuses to start instead, with one line."""

from __future__ import annotations

import asyncio
import logging

import aiohttp

from shared.api import paths
from shared.config.model import ConfigError, PodherdConfig
from shared.core.waits import wait_event
from shared.kube.client import KubeClient, KubeError

log = logging.getLogger(__name__)
ASK_WITHIN, ASK_AGAIN = 5.0, 2.0  # seconds


async def check_identity(kube: KubeClient, config: PodherdConfig, stop: asyncio.Event) -> None:
    """Raises ConfigError when the gate's webhooks are registered and this is not the identity they let
    through. Asked again every few seconds while the API server cannot answer (the executor meanwhile starts
    as usual); no right to read the webhook configuration is not a refusal (logged)."""
    expected = config.gate.service_account("executor")
    while not stop.is_set():
        try:
            async with asyncio.timeout(ASK_WITHIN):
                me = await kube.whoami()
                gate = None if me == expected else await kube.get_json(paths.GATE_WEBHOOKS)
        except KubeError as exc:
            if exc.status in (401, 403):
                log.info("could not tell whether the admission gate knows the executor's identity: %s", exc)
                return
        except (OSError, TimeoutError, aiohttp.ClientError):
            pass  # the API server is away: asked again
        else:
            if gate is not None:
                raise ConfigError("gate.namespace", _refusal(me, expected))
            return
        await wait_event(stop, ASK_AGAIN)


def _refusal(me: str, expected: str) -> str:
    return (
        f"the executor runs as {me or 'an anonymous user'}, but the admission gate (webhooks podherd-gate) "
        f"lets through only {expected}'s evictions: its own evictions of opted-in pods would be "
        "intercepted. Run it as that ServiceAccount (`podherd sim --podherd-accounts DIR` writes a "
        "kubeconfig for each service), or set gate.namespace to its namespace"
    )
