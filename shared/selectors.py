"""Label selectors: `metav1.LabelSelector` objects (matchLabels AND every matchExpression) and the string
form the API server parses (`a=b,c!=d,e in (f,g),!h`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

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

_SET_EXPR = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def split_top(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def parse_label_selector(text: str | None) -> LabelMatcher | None:
    if not text:
        return None
    tests: list[LabelMatcher] = []
    for term in split_top(text):
        tests.append(_label_term(term))
    return lambda labels: all(t(labels) for t in tests)


def _label_term(term: str) -> LabelMatcher:
    match = _SET_EXPR.match(term)
    if match:
        key, op, values_text = match.groups()
        values = {v.strip() for v in values_text.split(",") if v.strip()}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if term.startswith("!"):
        key = term[1:].strip()
        return lambda labels: key not in labels
    for op in ("!=", "==", "="):
        if op in term:
            key, value = (s.strip() for s in term.split(op, 1))
            if not key:
                raise ValueError(f"unable to parse requirement: {term!r}")
            if op == "!=":
                return lambda labels: labels.get(key) != value
            return lambda labels: labels.get(key) == value
    key = term.strip()
    if not re.match(r"^[A-Za-z0-9_./-]+$", key):
        raise ValueError(f"unable to parse requirement: {term!r}")
    return lambda labels: key in labels
