"""What a PodMigrationJob write by someone other than Podherd asks Podherd to do, each effect with the
permission it needs (pure): the caller asks the API server, as the author, for each one.

A job evicts its pod, so making it, or changing its spec, needs what an eviction needs. Beyond that, each
annotation that steers the move is an effect of its own, needing what doing it without Podherd would:

- `podherd.io/target-node`: choosing the node is the scheduler's decision (`create pods/binding`);
- `podherd.io/strategy: Surge`: the Deployment is scaled up and back (`update` or `patch` on its `scale`),
  and the old pod deleted outside the Eviction API;
- `podherd.io/drain-lifts` naming `BarePod`: a pod no controller recreates is deleted (`delete pods`);
- a drain's marks: what the drain itself needs on its node (`patch nodes`);
- `podherd.io/migration-priority` above 0: admitted before others' jobs (`create
  podmigrationjobs/priority`, a permission no built-in role grants);
- `podherd.io/abort`: ending the job (`delete podmigrationjobs`, unless the author asked for the job).

What Podherd keeps for itself (the ledger's record, its Reservation reference, the claimed requester, the
gate's marks, the names the gate gives its jobs) is refused to anyone else; `podherd.io/requester` may only
name the author (the gate's mutating webhook writes it)."""

from __future__ import annotations

from typing import Any, Final

import msgspec

from services.gate.reviews import Refusal
from shared.access.permissions import PRIORITY, Need
from shared.api.drain import LIFT_BARE_POD, lifts_of, node_hash
from shared.api.names import (
    ANNOTATION_ABORT,
    ANNOTATION_ATOMIC,
    ANNOTATION_CLAIMED_REQUESTER,
    ANNOTATION_DRAIN_NODE,
    ANNOTATION_LEDGER,
    ANNOTATION_LIFTS,
    ANNOTATION_MIGRATION_PRIORITY,
    ANNOTATION_OWN_ROOM,
    ANNOTATION_REQUESTER,
    ANNOTATION_STRATEGY,
    ANNOTATION_TARGET_NODE,
    LABEL_DRAIN,
    LABEL_EVACUATED_POD,
)
from shared.api.pmj import GROUP
from shared.api.surge import is_surge

FORBIDDEN: Final = 403
# Names the gate gives the jobs it makes for evictions: another's job under one would stand in for it.
GATE_JOB_PREFIX: Final = "evacuation-"
PODHERDS_ANNOTATIONS: Final = (ANNOTATION_LEDGER, ANNOTATION_OWN_ROOM, ANNOTATION_CLAIMED_REQUESTER)
PODHERDS_LABELS: Final = (LABEL_EVACUATED_POD,)
STEERING: Final = (
    ANNOTATION_TARGET_NODE,
    ANNOTATION_STRATEGY,
    ANNOTATION_LIFTS,
    ANNOTATION_DRAIN_NODE,
    ANNOTATION_ATOMIC,
    ANNOTATION_MIGRATION_PRIORITY,
    ANNOTATION_ABORT,
)


class Effect(msgspec.Struct, frozen=True):
    """Something the write has Podherd do, and the permissions that allow it (any one of them)."""

    what: str
    needs: tuple[Need, ...]


class Write(msgspec.Struct, frozen=True, kw_only=True):
    """A job write as the gate judges it: its name, the pod it names, and its metadata before and after."""

    name: str
    namespace: str
    pod: str
    author: str
    annotations: dict[str, str]
    labels: dict[str, str]
    old_annotations: dict[str, str] | None = None  # None: the job is being made
    old_labels: dict[str, str] | None = None
    spec_changed: bool = True
    deployment: str | None = None  # the pod's Deployment, where a surge is asked for


def write_of(request_object: dict[str, Any], old: dict[str, Any] | None, *, author: str) -> Write:
    meta, spec = request_object.get("metadata") or {}, request_object.get("spec") or {}
    ref = spec.get("podRef") or {}
    old_meta = (old or {}).get("metadata") or {}
    return Write(
        name=str(meta.get("name") or ""),
        namespace=str(ref.get("namespace") or ""),
        pod=str(ref.get("name") or ""),
        author=author,
        annotations=dict(meta.get("annotations") or {}),
        labels=dict(meta.get("labels") or {}),
        old_annotations=None if old is None else dict(old_meta.get("annotations") or {}),
        old_labels=None if old is None else dict(old_meta.get("labels") or {}),
        spec_changed=old is None or old.get("spec") != spec,
    )


def kept_for_podherd(write: Write) -> Refusal | None:
    """A write of what only Podherd writes (or a requester that is not the author): refused."""
    made = write.old_annotations is None
    if made and write.name.startswith(GATE_JOB_PREFIX):
        return Refusal(FORBIDDEN, f"names starting {GATE_JOB_PREFIX!r} are the gate's, for the jobs it makes")
    for key in _changed(write.annotations, write.old_annotations or {}, PODHERDS_ANNOTATIONS):
        return Refusal(FORBIDDEN, f"annotation {key} is written only by Podherd's services")
    for key in _changed(write.labels, write.old_labels or {}, PODHERDS_LABELS):
        return Refusal(FORBIDDEN, f"label {key} is written only by Podherd's services")
    requester = write.annotations.get(ANNOTATION_REQUESTER)
    was = (write.old_annotations or {}).get(ANNOTATION_REQUESTER)
    if requester != was and not (made and requester == write.author):
        return Refusal(
            FORBIDDEN,
            f"annotation {ANNOTATION_REQUESTER} names who made the job ({was or write.author}), as the "
            "gate records it; it cannot be written",
        )
    return _drain_mark_refusal(write)


def effects(write: Write) -> list[Effect]:
    """Every effect the write asks for that was not asked before, with what allows it."""
    ns, pod = write.namespace, write.pod
    out: list[Effect] = []
    changed = set(_changed(write.annotations, write.old_annotations or {}, STEERING))
    changed |= set(_changed(write.labels, write.old_labels or {}, (LABEL_DRAIN,)))
    if write.spec_changed or changed:  # a steering mark taken away changes the move too
        out.append(
            Effect("a job evicts its pod", (_need("create", "pods", "eviction", namespace=ns, name=pod),))
        )
    a = write.annotations
    new = {k for k in changed if k in a or k in write.labels}
    if ANNOTATION_TARGET_NODE in new and a.get(ANNOTATION_TARGET_NODE):
        bind = _need("create", "pods", "binding", namespace=ns, name=pod)
        out.append(Effect(f"{ANNOTATION_TARGET_NODE} chooses the node, as the scheduler does", (bind,)))
    if ANNOTATION_STRATEGY in new and is_surge(a):
        where = write.deployment or ""
        scale = tuple(Need(verb=v, group="apps", resource="deployments", subresource="scale", namespace=ns,
                           name=where) for v in ("update", "patch"))  # fmt: skip
        out.append(Effect(f"{ANNOTATION_STRATEGY}: Surge scales Deployment {where or '(none)'} up", scale))
    if ANNOTATION_LIFTS in new and LIFT_BARE_POD in lifts_of(a):
        out.append(
            Effect(
                f"{ANNOTATION_LIFTS}: BarePod deletes the pod",
                (_need("delete", "pods", "", namespace=ns, name=pod),),
            )
        )
    if new & {ANNOTATION_DRAIN_NODE, ANNOTATION_ATOMIC, LABEL_DRAIN}:
        node = a.get(ANNOTATION_DRAIN_NODE, "")
        out.append(
            Effect(f"a drain's marks, of node {node}", (Need(verb="patch", resource="nodes", name=node),))
        )
    if ANNOTATION_MIGRATION_PRIORITY in new and _priority(a) > 0:
        out.append(
            Effect(f"{ANNOTATION_MIGRATION_PRIORITY} above 0 admits it before others' jobs", (PRIORITY,))
        )
    asked_by = (write.old_annotations or {}).get(ANNOTATION_REQUESTER)
    if ANNOTATION_ABORT in new and asked_by != write.author:
        end = Need(verb="delete", group=GROUP, resource="podmigrationjobs", name=write.name)
        out.append(Effect(f"{ANNOTATION_ABORT} ends a job {asked_by or 'someone else'} asked for", (end,)))
    return out


def refused_effect(author: str, effect: Effect, why: str) -> Refusal:
    wanted = " or ".join(str(n) for n in effect.needs)
    return Refusal(
        FORBIDDEN, f'user "{author}" may not {wanted}, and {effect.what}' + (f": {why}" if why else "")
    )


def _drain_mark_refusal(write: Write) -> Refusal | None:
    label, node = write.labels.get(LABEL_DRAIN), write.annotations.get(ANNOTATION_DRAIN_NODE)
    if (label is None) == (node is None) and (label is None or label == node_hash(node or "")):
        return None
    return Refusal(
        422,
        f"a drain's job carries label {LABEL_DRAIN} (its node's name hashed) and annotation "
        f"{ANNOTATION_DRAIN_NODE} (the node) together, and they agree",
    )


def _changed(now: dict[str, str], before: dict[str, str], keys: tuple[str, ...]) -> list[str]:
    """The keys written, changed or taken away."""
    return [k for k in keys if now.get(k) != before.get(k)]


def _priority(annotations: dict[str, str]) -> int:
    try:
        return int(annotations.get(ANNOTATION_MIGRATION_PRIORITY, "0"))
    except ValueError:
        return 0


def _need(verb: str, resource: str, subresource: str, *, namespace: str, name: str) -> Need:
    return Need(verb=verb, resource=resource, subresource=subresource, namespace=namespace, name=name)
