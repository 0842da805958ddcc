"""The executor's own evictions pass the admission gate because the gate knows its ServiceAccount
(`gate.serviceAccount("executor")`). Run under another identity (one shared kubeconfig for every service,
`podherd run all` as an admin) beside a registered gate, each of its evictions of an opted-in pod would be
taken for someone else's and turned into a job again: it refuses to start instead, with one line."""

from __future__ import annotations

import logging

from shared.api import paths
from shared.config import ConfigError, PodherdConfig
from shared.kube import KubeClient, KubeError

log = logging.getLogger(__name__)


async def check_identity(kube: KubeClient, config: PodherdConfig) -> None:
    """Raises ConfigError when the gate's webhooks are registered and this is not the identity they let
    through. What cannot be read (an API server without SelfSubjectReview, no right to read the webhook
    configuration) is not a refusal: it is logged."""
    expected = config.gate.service_account("executor")
    try:
        me = await kube.whoami()
        if me == expected:
            return
        gate = await kube.get_json(paths.GATE_WEBHOOKS)
    except KubeError as exc:
        log.info("could not tell whether the admission gate knows the executor's identity: %s", exc)
        return
    if gate is not None:
        raise ConfigError(
            "gate.namespace",
            f"the executor runs as {me or 'an anonymous user'}, but the admission gate (webhooks "
            f"podherd-gate) lets through only {expected}'s evictions: its own evictions of opted-in pods "
            "would be intercepted. Run it as that ServiceAccount (`podherd sim --podherd-accounts DIR` "
            "writes a kubeconfig for each service), or set gate.namespace to its namespace",
        )
