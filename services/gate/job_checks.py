"""Which PodMigrationJob writes the gate lets in (pure). A job is read by the one reader the services use
(`shared.api.pmj_read`): one they could not run is refused at the door, naming the field and what it
allows. Its pod cannot change once it is made. Whether its author may have what it asks for done is
`effects`'."""

from __future__ import annotations

from typing import Any

from services.gate.reviews import Refusal, Request
from shared.api.pmj_read import read_pmj

INVALID = 422


def job_refusal(request: Request) -> Refusal | None:
    """Why a job write cannot be let in as a job at all (None: it can; what it asks for is judged apart)."""
    if request.operation not in ("CREATE", "UPDATE") or request.object is None:
        return None
    new_spec = request.object.get("spec")
    if request.operation == "UPDATE" and request.old_object is not None:
        old_spec = request.old_object.get("spec")
        if old_spec == new_spec:
            return None  # its metadata: what it asks for is judged by `effects`
        moved = pod_changed(_ref(old_spec), _ref(new_spec))
        if moved is not None:
            return Refusal(INVALID, moved)
    job, invalid = read_pmj(request.object)
    if invalid is not None:
        return Refusal(
            INVALID, f"PodMigrationJob {job.metadata.name or request.name} cannot run: {invalid.message}"
        )
    return None


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
