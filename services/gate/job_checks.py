"""Which PodMigrationJob writes the gate lets in (pure). A job is read by the one reader the services use
(`shared.api.pmj_read`): one they could not run is refused at the door, naming the field and what it
allows. Its pod cannot change once it is made. A job moves its pod as an eviction does, so its author must
be allowed to evict that pod (`Authorize`: the caller asks the API server as that user); Podherd's own
ServiceAccounts are not asked, as they authorize the intents and drains they make jobs of themselves."""

from __future__ import annotations

from typing import Any

import msgspec

from services.gate.reviews import Refusal, Request
from shared.api.pmj_read import read_pmj

INVALID, FORBIDDEN = 422, 403


class Authorize(msgspec.Struct, frozen=True):
    """Let in if the author may `create pods/eviction` for this pod."""

    namespace: str
    name: str


def judge_job(request: Request, own: frozenset[str]) -> Refusal | Authorize | None:
    """None: let in as it is."""
    if request.operation not in ("CREATE", "UPDATE") or request.object is None:
        return None
    new_spec = request.object.get("spec")
    if request.operation == "UPDATE" and request.old_object is not None:
        old_spec = request.old_object.get("spec")
        if old_spec == new_spec:
            return None  # its metadata (annotations, labels, finalizers): not what it moves
        moved = pod_changed(_ref(old_spec), _ref(new_spec))
        if moved is not None:
            return Refusal(INVALID, moved)
    job, invalid = read_pmj(request.object)
    name = job.metadata.name or request.name
    if invalid is not None:
        return Refusal(INVALID, f"PodMigrationJob {name} cannot run: {invalid.message}")
    if request.user_info.username in own:
        return None
    ref = job.spec.pod_ref
    assert ref is not None and ref.namespace and ref.name  # a valid job names its pod
    return Authorize(ref.namespace, ref.name)


def pod_changed(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """Why the new podRef is another pod than the old (None: the same one; a uid filled in is the same)."""
    before, after = (old.get("namespace"), old.get("name")), (new.get("namespace"), new.get("name"))
    old_uid, new_uid = old.get("uid"), new.get("uid")
    if before == after and (not old_uid or old_uid == new_uid):
        return None
    was = "/".join(str(part) for part in before) + (f" (uid {old_uid})" if old_uid else "")
    return f"spec.podRef cannot change after the job is made: it names {was}"


def _ref(spec: Any) -> dict[str, Any]:
    ref = spec.get("podRef") if isinstance(spec, dict) else None
    return ref if isinstance(ref, dict) else {}


def refused_access(username: str, target: Authorize, why: str) -> Refusal:
    return Refusal(
        FORBIDDEN,
        f'user "{username}" may not create pods/eviction for pod {target.namespace}/{target.name}, and a '
        f"PodMigrationJob evicts its pod" + (f": {why}" if why else ""),
    )
