"""A write's admission, where kube-apiserver's handlers run it: the mutating webhooks on the object as sent
(create, update) or as the patch leaves it, the validating webhooks on the object as it would be stored (the
same write, run dry), then the write itself; a delete and an eviction are validated before they happen.
Without a webhook configuration, nothing is asked."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from aiohttp import web

from kubesim.apiserver.auth import user_info
from kubesim.apiserver.http_common import USER, Target
from kubesim.apiserver.records import Obj
from kubesim.apiserver.schema import FieldValidation
from kubesim.apiserver.store import Store
from kubesim.apiserver.webhook_rules import Request
from kubesim.apiserver.webhooks import Admission


class Admitting:
    def __init__(self, store: Store, admission: Admission) -> None:
        self.store, self.admission = store, admission

    def active(self) -> bool:
        return self.admission.configured()

    def _request(self, request: web.Request, t: Target, operation: str, **about: Any) -> Request:
        rt = t.rt
        user = request.get(USER)
        kind = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}[operation]
        return Request(
            operation,
            rt.group,
            rt.version,
            rt.plural,
            rt.kind,
            subresource=t.subresource or "",
            namespace=t.namespace or "",
            user=user_info(user) if user is not None else {},
            options={"apiVersion": "meta.k8s.io/v1", "kind": kind},
            **about,
        )

    async def create(
        self, request: web.Request, t: Target, body: Obj, *, how: FieldValidation, warnings: list[str]
    ) -> Obj:
        dry_run = request.query.get("dryRun") == "All"
        name = str((body.get("metadata") or {}).get("name") or "")
        asked = self._request(request, t, "CREATE", name=name, obj=body, dry_run=dry_run)
        if not self.admission.concerns(asked):
            return body
        body = await self.admission.mutate(asked, warnings) or body
        stored = self.store.verbs.create(t.rt, t.namespace or "", body, dry_run=True, field_validation=how)
        await self.admission.validate(replace(asked, obj=stored), warnings)
        return body

    async def update(
        self, request: web.Request, t: Target, body: Obj, *, how: FieldValidation, warnings: list[str]
    ) -> Obj:
        ns, name = t.namespace or "", t.name or ""
        old = self.store.get(t.rt, ns, name)
        dry_run = request.query.get("dryRun") == "All"
        asked = self._request(request, t, "UPDATE", name=name, obj=body, old=old, dry_run=dry_run)
        if not self.admission.concerns(asked):
            return body
        body = await self.admission.mutate(asked, warnings) or body
        stored = self.store.verbs.update(
            t.rt, ns, name, obj=body, subresource=t.subresource, dry_run=True, field_validation=how
        )
        await self.admission.validate(replace(asked, obj=stored), warnings)
        return body

    async def patch(
        self, request: web.Request, t: Target, apply: Callable[[Obj], Obj], *, warnings: list[str]
    ) -> Callable[[Obj], Obj]:
        ns, name = t.namespace or "", t.name or ""
        old = self.store.get(t.rt, ns, name)
        dry_run = request.query.get("dryRun") == "All"
        asked = self._request(request, t, "UPDATE", name=name, old=old, dry_run=dry_run)
        if not self.admission.concerns(asked):
            return apply
        patched = self.store.verbs.patch(t.rt, ns, name, apply=apply, subresource=t.subresource, dry_run=True)
        asked = replace(asked, obj=patched)
        mutated = await self.admission.mutate(asked, warnings) or patched
        await self.admission.validate(replace(asked, obj=mutated), warnings)
        if mutated == patched:
            return apply
        return lambda current: copy.deepcopy(mutated)

    async def delete(self, request: web.Request, t: Target, *, dry_run: bool) -> None:
        ns, name = t.namespace or "", t.name or ""
        old = self.store.get(t.rt, ns, name)
        await self.admission.validate(
            self._request(request, t, "DELETE", name=name, old=old, dry_run=dry_run), []
        )

    async def evict(self, request: web.Request, t: Target, body: Obj, *, warnings: list[str]) -> Obj:
        """An Eviction is a CREATE of `pods/eviction`, its object the Eviction (its labels are what an
        `objectSelector` sees, not the pod's)."""
        options = body.get("deleteOptions") or {}
        dry_run = request.query.get("dryRun") == "All" or "All" in (options.get("dryRun") or [])
        asked = self._request(
            request,
            t,
            "CREATE",
            name=t.name or "",
            obj=body,
            dry_run=dry_run,
            object_kind=("policy", "v1", "Eviction"),
        )
        body = await self.admission.mutate(asked, warnings) or body
        await self.admission.validate(replace(asked, obj=body), warnings)
        return body
