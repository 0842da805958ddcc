"""The gate's door for PodMigrationJob writes by anyone but Podherd's own services: a job they could not run
refused (`job_checks`), what Podherd keeps for itself refused (`effects.kept_for_podherd`), and each effect
the write asks for authorized by SubjectAccessReview as its author (`effects.effects`). Its status is
Podherd's alone. The mutating door writes the author's name as the job's requester."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import msgspec

from services.gate.effects import Effect, effects, kept_for_podherd, refused_effect, write_of
from services.gate.job_checks import job_refusal
from services.gate.reviews import Refusal, Request, answer
from shared.access.permissions import Identity
from shared.access.reviews import review_access
from shared.api import paths
from shared.api.meta import ObjectMeta, OwnerReference, controller_of
from shared.api.names import ANNOTATION_REQUESTER
from shared.api.surge import is_surge
from shared.kube.client import KubeClient

FORBIDDEN = 403
STATUS_IS_PODHERDS = (
    "the status of a PodMigrationJob is written only by Podherd's services: it is what the job did, and "
    "the services act on it"
)


@dataclass
class JobDoor:
    kube: KubeClient
    own: frozenset[str]

    async def write(self, request: Request) -> bytes:
        refusal = job_refusal(request)
        if refusal is None and request.user_info.username not in self.own:
            refusal = await self._judged(request)
        return answer(request.uid, refusal)

    async def requester(self, request: Request) -> bytes:
        """The mutating door: a job made by someone other than Podherd records its author as the API
        server authenticated them, whatever the author wrote there."""
        author = request.user_info.username
        if request.operation != "CREATE" or request.object is None or author in self.own:
            return answer(request.uid)
        annotations = (request.object.get("metadata") or {}).get("annotations")
        op: list[dict[str, object]]
        if isinstance(annotations, dict):
            key = ANNOTATION_REQUESTER.replace("~", "~0").replace("/", "~1")
            op = [{"op": "add", "path": f"/metadata/annotations/{key}", "value": author}]
        else:
            op = [{"op": "add", "path": "/metadata/annotations", "value": {ANNOTATION_REQUESTER: author}}]
        return answer(request.uid, patch=base64.b64encode(json.dumps(op).encode()).decode())

    async def _judged(self, request: Request) -> Refusal | None:
        if request.sub_resource == "status":
            return Refusal(FORBIDDEN, STATUS_IS_PODHERDS)
        if request.object is None or request.operation not in ("CREATE", "UPDATE"):
            return None
        old = request.old_object if request.operation == "UPDATE" else None
        write = write_of(request.object, old, author=request.user_info.username)
        refusal = kept_for_podherd(write)
        if refusal is not None:
            return refusal
        if is_surge(write.annotations):
            write = msgspec.structs.replace(
                write, deployment=await self._deployment_of(write.namespace, write.pod)
            )
        who = request.user_info.identity
        for effect in effects(write):
            allowed, why = await self._any(who, effect)
            if not allowed:
                return refused_effect(request.user_info.username, effect, why)
        return None

    async def _any(self, who: Identity, effect: Effect) -> tuple[bool, str]:
        reasons = []
        for need in effect.needs:
            allowed, why = await review_access(self.kube, who, need)
            if allowed:
                return True, ""
            reasons.append(why)
        return False, "; ".join(r for r in reasons if r)

    async def _deployment_of(self, namespace: str, pod: str) -> str | None:
        """The Deployment whose ReplicaSet owns the pod, as a surge would scale it."""
        owner = _controller(await self.kube.get_json(paths.pod(namespace, pod), request_timeout=3.0))
        if owner is None or owner.kind != "ReplicaSet":
            return None
        path = paths.replicaset(namespace, owner.name)
        deployment = _controller(await self.kube.get_json(path, request_timeout=3.0))
        return deployment.name if deployment is not None and deployment.kind == "Deployment" else None


def _controller(obj: dict[str, Any] | None) -> OwnerReference | None:
    return controller_of(msgspec.convert((obj or {}).get("metadata") or {}, ObjectMeta))
