"""Admission webhooks, called as kube-apiserver calls them (k8s.io/apiserver/pkg/admission/plugin/webhook).

Mutating webhooks first, one after the other (configurations by name, webhooks in their order), each
answering with a JSONPatch the object takes; validating webhooks after, all at once. A webhook is posted an
AdmissionReview v1 over HTTPS, verified against its `caBundle`, at its `url` or at its Service (the backends
kubesim was told about, else the Service's ready pods), within `timeoutSeconds`, presenting the client
certificate `SimOptions.webhook_client` where one is given (kube-apiserver's AdmissionConfiguration). A
denial is the webhook's status, its code kept (400 if below), its message prefixed `admission webhook "NAME"
denied the request`. A webhook that cannot be asked (refused, slow, a certificate not of its CA, an answer
that is not an AdmissionReview for this request) refuses the request with 500 `Internal error occurred:
failed calling webhook ...` when its `failurePolicy` is Fail (the default), and is skipped when it is
Ignore. A dry run is sent as one (`dryRun`): a v1 configuration cannot declare side effects.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import logging
import random
import ssl
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import msgspec

from kubesim.apiserver.errors import ApiError
from kubesim.apiserver.match_conditions import ConditionError, holds
from kubesim.apiserver.patch import json_patch
from kubesim.apiserver.records import Obj
from kubesim.apiserver.selectors import match_label_selector
from kubesim.apiserver.store import Store
from kubesim.apiserver.webhook_rules import (
    CONFIGURATIONS,
    GROUP,
    Request,
    fails_closed,
    matches,
    may_match,
    review,
    timeout_of,
    url_of,
)
from kubesim.options import SimOptions

log = logging.getLogger("kubesim.apiserver.webhooks")


class CallFailed(Exception):
    """The webhook could not be asked, or did not answer as one must (`ErrCallingWebhook`)."""


class Admission:
    def __init__(self, store: Store, options: SimOptions) -> None:
        self.store, self.options = store, options
        # One client for every webhook, its connections kept, as the API server keeps them.
        self._session: aiohttp.ClientSession | None = None

    def _configured(self, plural: str) -> list[Obj]:
        """Every webhook of that kind, configurations by name, webhooks in their order."""
        rt = self.store.registry.get(GROUP, "v1", plural)
        configurations = sorted(self.store.objects(rt), key=lambda c: c["metadata"]["name"]) if rt else []
        return [w for c in configurations for w in c.get("webhooks") or []]

    def _webhooks(self, plural: str, request: Request) -> list[Obj]:
        webhooks = self._configured(plural)
        labels = self._namespace_labels(request.namespace) if webhooks else None
        return [w for w in webhooks if matches(w, request, labels) and _conditions_hold(w, request)]

    def configured(self) -> bool:
        """Some webhook is configured at all: else a write is not looked at for admission."""
        return any(self._configured(plural) for plural in CONFIGURATIONS)

    def concerns(self, request: Request) -> bool:
        """Some webhook may be called for the request, whatever its object: else nothing is prepared for
        admission (no dry run of the write)."""
        webhooks = [w for plural in CONFIGURATIONS for w in self._configured(plural)]
        labels = self._namespace_labels(request.namespace) if webhooks else None
        return any(may_match(w, request, labels) for w in webhooks)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _namespace_labels(self, namespace: str) -> dict[str, str] | None:
        if not namespace:
            return None
        found = self.store.find(self.store.registry.core("namespaces"), "", namespace)
        return ((found or {}).get("metadata") or {}).get("labels") or {}

    async def mutate(self, request: Request, warnings: list[str]) -> Obj | None:
        """The object as the mutating webhooks leave it (each sees the previous one's changes)."""
        obj = request.obj
        for webhook in self._webhooks(CONFIGURATIONS_MUTATING, request):
            asked = replace(request, obj=obj)
            answer = await self._admit(webhook, asked, warnings)
            if answer is None or not answer.get("patch"):
                continue
            if answer.get("patchType") != "JSONPatch":
                raise _failed(webhook, f'unsupported patch type "{answer.get("patchType")}"')
            try:
                obj = json_patch(obj, msgspec.json.decode(base64.b64decode(answer["patch"])))
            except (ValueError, ApiError) as exc:
                raise _failed(webhook, f"JSON patch failed to apply: {exc}") from None
        return obj

    async def validate(self, request: Request, warnings: list[str]) -> None:
        """Every validating webhook the request reaches, at once; the first to deny (in their order) says
        why."""
        webhooks = self._webhooks(CONFIGURATIONS_VALIDATING, request)
        answers = await asyncio.gather(
            *(self._admit(w, request, warnings) for w in webhooks), return_exceptions=True
        )
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer

    async def _admit(self, webhook: Obj, request: Request, warnings: list[str]) -> Obj | None:
        """The webhook's answer when it allows the request; an ApiError when it denies it or, failing
        closed, cannot be asked; None when it cannot be asked and fails open."""
        name = str(webhook.get("name"))
        sent = review(request)
        try:
            answer = await self._call(webhook, sent)
            if answer.get("uid") != sent["request"]["uid"]:
                raise CallFailed(
                    f'expected response.uid="{sent["request"]["uid"]}", got "{answer.get("uid")}"'
                )
        except CallFailed as exc:
            if fails_closed(webhook):
                raise _failed(webhook, str(exc)) from None
            log.warning('failed calling webhook "%s" (failurePolicy Ignore): %s', name, exc)
            return None
        warnings.extend(str(w) for w in answer.get("warnings") or [])
        if not answer.get("allowed"):
            raise denied(name, answer.get("status") or {})
        return answer

    async def _call(self, webhook: Obj, sent: Obj) -> Obj:
        url = url_of(webhook)
        target, server_name = self._address(webhook, url)
        if self._session is None:
            self._session = aiohttp.ClientSession()
        try:
            async with self._session.post(
                target,
                data=msgspec.json.encode(sent),
                headers={"Content-Type": "application/json", "Accept": "application/json"},
                ssl=_context(
                    (webhook.get("clientConfig") or {}).get("caBundle") or "", self.options.webhook_client
                ),
                server_hostname=server_name,
                timeout=aiohttp.ClientTimeout(total=timeout_of(webhook)),
            ) as response:
                body = await response.read()
        except TimeoutError:
            raise CallFailed(f'failed to call webhook: Post "{url}": context deadline exceeded') from None
        except aiohttp.ClientConnectorCertificateError as exc:
            reason = f"tls: failed to verify certificate: x509: {_x509(exc.certificate_error)}"
            raise CallFailed(f'failed to call webhook: Post "{url}": {reason}') from None
        except (aiohttp.ClientError, OSError) as exc:
            raise CallFailed(f'failed to call webhook: Post "{url}": {_why(exc)}') from None
        if response.status != 200:
            raise CallFailed(f"received invalid webhook response: the server answered {response.status}")
        try:
            decoded = msgspec.json.decode(body)
            answer = decoded["response"]
            if decoded.get("apiVersion") != "admission.k8s.io/v1" or not isinstance(answer, dict):
                raise ValueError("not an admission.k8s.io/v1 AdmissionReview")
        except (ValueError, KeyError, TypeError, msgspec.DecodeError) as exc:
            raise CallFailed(f"received invalid webhook response: {exc}") from None
        return answer

    def _address(self, webhook: Obj, url: str) -> tuple[str, str | None]:
        """Where to post (a Service resolved to one of its backends) and the name its certificate must
        carry."""
        service = (webhook.get("clientConfig") or {}).get("service")
        if not service:
            return url, None
        namespace, name = str(service.get("namespace")), str(service.get("name"))
        port = int(service.get("port") or 443)
        backends = self.backends(namespace, name, port)
        if not backends:
            raise CallFailed(
                f'failed to call webhook: Post "{url}": no endpoints available for service "{name}"'
            )
        # As kube-proxy spreads a Service's connections: any backend, each call (a dead one is still
        # chosen until it leaves the Service's endpoints).
        host, number = random.choice(backends)
        parts = urlsplit(url)
        return urlunsplit(parts._replace(netloc=f"{host}:{number}")), f"{name}.{namespace}.svc"

    def backends(self, namespace: str, name: str, port: int) -> list[tuple[str, int]]:
        """Where a Service's `port` is served: the addresses kubesim was told about, else its ready pods'
        IPs at the port's `targetPort` (a number, or a container port's name)."""
        if f"{namespace}/{name}:{port}" in self.options.services:
            return self.options.backends(namespace, name, port)
        found = self.store.find(self.store.registry.core("services"), namespace, name)
        if found is None:
            return []
        spec = found.get("spec") or {}
        wanted = next((p for p in spec.get("ports") or [] if int(p.get("port") or 0) == port), None)
        if wanted is None:
            return []
        out = []
        for pod in self.store.objects(self.store.registry.core("pods"), namespace):
            status = pod.get("status") or {}
            labels = (pod.get("metadata") or {}).get("labels") or {}
            selector = {"matchLabels": spec.get("selector") or {}}
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
            )
            if (
                spec.get("selector")
                and match_label_selector(selector, labels)
                and ready
                and status.get("podIP")
            ):
                out.append((str(status["podIP"]), _target_port(pod, wanted)))
        return out


# OpenSSL's X509_V_ERR codes.
SELF_SIGNED, SELF_SIGNED_IN_CHAIN, UNKNOWN_ISSUER, HOSTNAME_MISMATCH = 18, 19, 20, 62
CONFIGURATIONS_VALIDATING, CONFIGURATIONS_MUTATING = CONFIGURATIONS


def denied(webhook: str, status: Obj) -> ApiError:
    """A webhook's refusal as the API server passes it on (`webhookerrors.ToStatusErr`): its code (400 if
    below), reason and details kept, its message (else its reason) after who denied it."""
    deniedby = f'admission webhook "{webhook}" denied the request'
    code = int(status.get("code") or 0)
    message, reason = str(status.get("message") or ""), str(status.get("reason") or "")
    text = (
        f"{deniedby}: {message}"
        if message
        else f"{deniedby}: {reason}"
        if reason
        else f"{deniedby} without explanation"
    )
    return ApiError(max(code, 400), reason, text, details=status.get("details"))


def _conditions_hold(webhook: Obj, request: Request) -> bool:
    """Every matchCondition true: the webhook is called. One that fails to evaluate refuses the request when
    the webhook fails closed, and skips the webhook when it fails open."""
    conditions = webhook.get("matchConditions") or []
    if not conditions:
        return True
    variables = {"request": review(request)["request"], "object": request.obj, "oldObject": request.old}
    try:
        return all(holds(str(c.get("expression")), variables) for c in conditions)
    except ConditionError as exc:
        if fails_closed(webhook):
            raise _failed(webhook, f"failed to evaluate match condition: {exc}") from None
        log.warning('webhook "%s" skipped: its match condition failed: %s', webhook.get("name"), exc)
        return False


def _failed(webhook: Obj, why: str) -> ApiError:
    message = f'failed calling webhook "{webhook.get("name")}": {why}'
    return ApiError(
        500,
        "InternalError",
        f"Internal error occurred: {message}",
        details={"causes": [{"message": message}]},
    )


@functools.lru_cache(maxsize=64)
def _context(bundle: str, client: tuple[bytes, bytes] | None = None) -> ssl.SSLContext:
    """The TLS client context that trusts a webhook's `caBundle` (the system's roots when it has none) and
    presents `client` (certificate, key: the AdmissionConfiguration's kubeConfigFile's), made once per
    bundle."""
    if bundle:
        context = ssl.create_default_context(cadata=base64.b64decode(bundle).decode())
    else:
        context = ssl.create_default_context()
    if client is not None:
        with tempfile.TemporaryDirectory(prefix="kubesim-webhook-client-") as directory:
            cert, key = Path(directory) / "tls.crt", Path(directory) / "tls.key"
            cert.write_bytes(client[0])
            key.write_bytes(client[1])
            context.load_cert_chain(cert, key)
    return context


def _why(exc: BaseException) -> str:
    if isinstance(exc, aiohttp.ClientConnectorError):
        cause = exc.os_error
        if isinstance(cause, ConnectionRefusedError):
            return f"dial tcp {exc.host}:{exc.port}: connect: connection refused"
        return f"dial tcp {exc.host}:{exc.port}: {cause.strerror or cause}"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "EOF"  # Go's net/http, when the server closes the connection before it answers
    return str(exc) or type(exc).__name__


def _x509(error: BaseException) -> str:
    """OpenSSL's verdict in Go's words (crypto/x509), for the two that matter here."""
    code = getattr(error, "verify_code", None)
    if code in (UNKNOWN_ISSUER, SELF_SIGNED_IN_CHAIN, SELF_SIGNED):
        return "certificate signed by unknown authority"
    if code == HOSTNAME_MISMATCH:
        return "certificate is not valid for the name asked for"
    return str(getattr(error, "verify_message", None) or error)


def _target_port(pod: Obj, port: dict[str, Any]) -> int:
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int) or str(target).isdigit():
        return int(str(target))
    for container in (pod.get("spec") or {}).get("containers") or []:
        for declared in container.get("ports") or []:
            if declared.get("name") == target:
                return int(declared["containerPort"])
    return int(port.get("port") or 0)
