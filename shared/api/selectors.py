"""Label selectors: `metav1.LabelSelector` objects (matchLabels AND every matchExpression) and the string
form the API server parses (`a=b,c!=d,e in (f,g),!h`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from shared.api import label_syntax
from shared.api.meta import LabelSelector


def matches(
    match_labels: Mapping[str, str] | None,
    expressions: Iterable[tuple[str, str, Iterable[str]]],
    labels: Mapping[str, str],
) -> bool:
    for key, value in (match_labels or {}).items():
        if labels.get(key) != value:
            return False
    for key, operator, values in expressions:
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def matches_label_selector(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    return matches(
        selector.match_labels,
        ((e.key, e.operator, e.values or ()) for e in selector.match_expressions or ()),
        labels,
    )


def matches_selector_dict(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """The same for a selector as plain JSON. An empty selector matches everything; None matches nothing."""
    if selector is None:
        return False
    return matches(
        selector.get("matchLabels"),
        (
            (e.get("key", ""), e.get("operator", ""), e.get("values") or ())
            for e in selector.get("matchExpressions") or ()
        ),
        labels,
    )


LabelMatcher = Callable[[Mapping[str, str]], bool]


def parse_label_selector(text: str | None) -> LabelMatcher | None:
    """A selector's string form as a matcher (None: no selector); SelectorError (a ValueError) in the API
    server's words for one it would refuse."""
    if not text:
        return None
    return label_syntax.matcher(label_syntax.parse(text))


def selector_problem(selector: LabelSelector) -> tuple[str, str] | None:
    """The first key or value of a LabelSelector the API server would refuse: (its field, why)."""
    for key, value in (selector.match_labels or {}).items():
        errors = label_syntax.qualified_name_errors(key) or [
            f"invalid label value {value!r}: {e}" for e in label_syntax.label_value_errors(value)
        ]
        if errors:
            return f"matchLabels.{key}", "; ".join(errors)
    for i, requirement in enumerate(selector.match_expressions or []):
        errors = label_syntax.qualified_name_errors(requirement.key)
        if errors:
            return f"matchExpressions[{i}].key", "; ".join(errors)
    return None
