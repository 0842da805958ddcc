"""Validating and mutating webhook configurations as the API server defaults and validates them (pure;
k8s.io/api/admissionregistration/v1 defaults and pkg/apis/admissionregistration/validation, v1 rules): each
webhook's failurePolicy Fail, matchPolicy Equivalent, selectors matching everything, timeoutSeconds 10,
rule scope `*`, Service port 443 (and, mutating, reinvocationPolicy Never) when left out; refused when a
name is not a qualified domain or repeats, sideEffects is not None or NoneOnDryRun, admissionReviewVersions
names neither v1 nor v1beta1, the timeout is outside 1-30 s, clientConfig has not exactly one of url and
service, a url is not https, or a matchCondition has no name, a name twice or an expression that does not
compile (`match_conditions`)."""

from __future__ import annotations

from urllib.parse import urlsplit

from kubesim.apiserver.errors import FieldError, not_supported
from kubesim.apiserver.match_conditions import MAX_CONDITIONS, ConditionError, compile_condition
from kubesim.apiserver.records import Obj
from kubesim.apiserver.webhook_rules import MAX_TIMEOUT_S

SIDE_EFFECTS = ("None", "NoneOnDryRun")
REVIEW_VERSIONS = ("v1", "v1beta1")


def defaulted(configuration: Obj, *, mutating: bool) -> None:
    for webhook in configuration.get("webhooks") or []:
        webhook.setdefault("failurePolicy", "Fail")
        webhook.setdefault("matchPolicy", "Equivalent")
        webhook.setdefault("namespaceSelector", {})
        webhook.setdefault("objectSelector", {})
        webhook.setdefault("timeoutSeconds", 10)
        if mutating:
            webhook.setdefault("reinvocationPolicy", "Never")
        for rule in webhook.get("rules") or []:
            rule.setdefault("scope", "*")
        service = (webhook.get("clientConfig") or {}).get("service")
        if service is not None:
            service.setdefault("port", 443)


def errors_of(configuration: Obj) -> list[FieldError]:
    errors: list[FieldError] = []
    seen: set[str] = set()
    for i, webhook in enumerate(configuration.get("webhooks") or []):
        at = f"webhooks[{i}]"
        name = str(webhook.get("name") or "")
        if not name:
            errors.append(FieldError("FieldValueRequired", f"{at}.name"))
        elif name.count(".") < 2:
            detail = "should be a domain with at least three segments separated by dots"
            errors.append(FieldError("FieldValueInvalid", f"{at}.name", name, detail))
        elif name in seen:
            errors.append(FieldError("FieldValueDuplicate", f"{at}.name", name))
        seen.add(name)
        errors += _side_effects(webhook, at) + _versions(webhook, at) + _client(webhook, at)
        errors += _conditions(webhook, at)
        timeout = webhook.get("timeoutSeconds")
        if timeout is not None and not 1 <= int(timeout) <= MAX_TIMEOUT_S:
            detail = "the timeout value must be between 1 and 30 seconds"
            errors.append(FieldError("FieldValueInvalid", f"{at}.timeoutSeconds", int(timeout), detail))
        for field, allowed in (
            ("failurePolicy", ("Fail", "Ignore")),
            ("matchPolicy", ("Exact", "Equivalent")),
        ):
            value = webhook.get(field)
            if value is not None and value not in allowed:
                errors.append(not_supported(f"{at}.{field}", value, allowed))
    return errors


def _conditions(webhook: Obj, at: str) -> list[FieldError]:
    conditions = webhook.get("matchConditions") or []
    field = f"{at}.matchConditions"
    if len(conditions) > MAX_CONDITIONS:
        return [
            FieldError("FieldValueTooMany", field, len(conditions), f"must have at most {MAX_CONDITIONS}")
        ]
    errors, names = [], set()
    for j, condition in enumerate(conditions):
        name, expression = str(condition.get("name") or ""), str(condition.get("expression") or "")
        if not name:
            errors.append(FieldError("FieldValueRequired", f"{field}[{j}].name"))
        elif name in names:
            errors.append(FieldError("FieldValueDuplicate", f"{field}[{j}].name", name))
        names.add(name)
        try:
            compile_condition(expression)
        except ConditionError as exc:
            errors.append(
                FieldError(
                    "FieldValueInvalid", f"{field}[{j}].expression", expression, f"compilation failed: {exc}"
                )
            )
    return errors


def _side_effects(webhook: Obj, at: str) -> list[FieldError]:
    value = webhook.get("sideEffects")
    if value is None:
        return [
            FieldError(
                "FieldValueRequired", f"{at}.sideEffects", None, "must specify one of None, NoneOnDryRun"
            )
        ]
    if value not in SIDE_EFFECTS:
        return [not_supported(f"{at}.sideEffects", value, SIDE_EFFECTS)]
    return []


def _versions(webhook: Obj, at: str) -> list[FieldError]:
    versions = webhook.get("admissionReviewVersions") or []
    field = f"{at}.admissionReviewVersions"
    if not versions:
        return [FieldError("FieldValueRequired", field, None, "must specify one of v1, v1beta1")]
    if not set(versions) & set(REVIEW_VERSIONS):
        return [FieldError("FieldValueInvalid", field, versions, "must include at least one of v1, v1beta1")]
    return []


def _client(webhook: Obj, at: str) -> list[FieldError]:
    config = webhook.get("clientConfig") or {}
    field = f"{at}.clientConfig"
    if bool(config.get("url")) == bool(config.get("service")):
        return [FieldError("FieldValueRequired", field, None, "exactly one of url or service is required")]
    url = config.get("url")
    if url and urlsplit(str(url)).scheme != "https":
        return [
            FieldError("FieldValueInvalid", f"{field}.url", url, "'https' is the only allowed URL scheme")
        ]
    return []
