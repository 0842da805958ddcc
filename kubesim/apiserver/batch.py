"""`batch/v1` Jobs and CronJobs as kube-apiserver 1.32 takes them: the resource types, the defaulting of
pkg/apis/batch/v1 (`SetDefaults_Job`, `SetDefaults_CronJob`), the selector and labels the Job strategy
generates from the Job's uid, and the validation a Job or CronJob most often meets (a pod template that
restarts Always, a schedule that does not parse). The controllers that run them are in
kubesim.controllers.jobs."""

from __future__ import annotations

from typing import Any

from kubesim.apiserver import builtin_defaults, cron
from kubesim.apiserver.errors import FieldError, invalid_fields, not_supported
from kubesim.apiserver.records import Obj, controller_ref

GROUP = "batch"
CONTROLLER_UID, JOB_NAME = "batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID, LEGACY_JOB_NAME = "controller-uid", "job-name"
RESTART_POLICIES = ("OnFailure", "Never")
MAX_INT32 = 2**31 - 1


def admitted(operation: str, kind: str, obj: Obj, *, old: Obj | None, subresource: str | None) -> None:
    """Default, generate and validate a Job or CronJob written whole (not its status)."""
    if subresource is not None:
        return
    spec = obj.setdefault("spec", {})
    name = obj["metadata"]["name"]
    if kind == "Job":
        job_defaults(obj)
        if operation == "CREATE":
            _generate_selector(obj)
            job_defaults(obj)  # as the stored Job reads back: defaulted again, its labels the template's
        errors = _template_errors(spec.get("template") or {}, "spec.template")
        if old is not None and spec.get("selector") != (old.get("spec") or {}).get("selector"):
            errors.append(FieldError("FieldValueInvalid", "spec.selector", spec.get("selector"), IMMUTABLE))
    else:
        _cronjob_defaults(spec)
        template = (spec.get("jobTemplate") or {}).get("spec") or {}
        errors = _template_errors(template.get("template") or {}, "spec.jobTemplate.spec.template")
        errors += _schedule_errors(spec)
    if errors:
        raise invalid_fields(kind, GROUP, name, errors=errors)


IMMUTABLE = "field is immutable"


def job_defaults(job: Obj) -> None:
    spec = job.setdefault("spec", {})
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", MAX_INT32 if spec.get("backoffLimitPerIndex") is not None else 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("manualSelector", False)
    spec.setdefault(
        "podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed"
    )
    template = spec.setdefault("template", {})
    labels = (template.get("metadata") or {}).get("labels")
    if labels and not job["metadata"].get("labels"):
        job["metadata"]["labels"] = dict(labels)
    if isinstance(template.get("spec"), dict):
        builtin_defaults.pod_spec(template["spec"])


def _cronjob_defaults(spec: Obj) -> None:
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    template = ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}
    if isinstance(template.get("spec"), dict):
        builtin_defaults.pod_spec(template["spec"])


def _generate_selector(job: Obj) -> None:
    """The Job strategy's selector generation: unless `manualSelector`, the Job selects its pods by its own
    uid, and its template carries that uid and the Job's name (new and legacy label keys)."""
    spec, meta = job["spec"], job["metadata"]
    if spec.get("manualSelector"):
        return
    uid = meta["uid"]
    template_meta = spec["template"].setdefault("metadata", {})
    template_meta["labels"] = {
        **(template_meta.get("labels") or {}),
        CONTROLLER_UID: uid,
        JOB_NAME: meta["name"],
        LEGACY_CONTROLLER_UID: uid,
        LEGACY_JOB_NAME: meta["name"],
    }
    spec["selector"] = {"matchLabels": {CONTROLLER_UID: uid}}


def _template_errors(template: Obj, path: str) -> list[FieldError]:
    policy = (template.get("spec") or {}).get("restartPolicy")
    if policy in RESTART_POLICIES:
        return []
    return [not_supported(f"{path}.spec.restartPolicy", policy, RESTART_POLICIES)]


def _schedule_errors(spec: Obj) -> list[FieldError]:
    schedule = str(spec.get("schedule") or "")
    if not schedule:
        return [FieldError("FieldValueRequired", "spec.schedule")]
    if "TZ=" in schedule:
        detail = "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
        return [FieldError("FieldValueInvalid", "spec.schedule", schedule, detail)]
    errors = []
    if problem := cron.error(schedule):
        errors.append(FieldError("FieldValueInvalid", "spec.schedule", schedule, problem))
    if problem := cron.zone_error(spec.get("timeZone")):
        errors.append(FieldError("FieldValueInvalid", "spec.timeZone", spec.get("timeZone"), problem))
    return errors


def owner_job(pod: Obj) -> Any:
    """The Job controlling `pod` (its ownerReference), or None."""
    ref = controller_ref(pod["metadata"])
    return (
        ref if ref is not None and (ref.get("apiVersion"), ref.get("kind")) == ("batch/v1", "Job") else None
    )
