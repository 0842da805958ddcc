"""Label and field selectors, parsed as the API server parses them (`a=b,c!=d,e in (f,g),!h`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from kubesim.errors import bad_request
from shared.selectors import matches_selector_dict

LabelMatcher = Callable[[Mapping[str, str]], bool]

_SET_EXPR = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split_top(text: str) -> list[str]:
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
    for term in _split_top(text):
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
                raise bad_request(f"unable to parse requirement: {term!r}")
            if op == "!=":
                return lambda labels: labels.get(key) != value
            return lambda labels: labels.get(key) == value
    key = term.strip()
    if not re.match(r"^[A-Za-z0-9_./-]+$", key):
        raise bad_request(f"unable to parse requirement: {term!r}")
    return lambda labels: key in labels


def match_label_selector(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Match a `metav1.LabelSelector` object. An empty selector matches everything; None matches nothing."""
    return matches_selector_dict(selector, labels)


def get_path(obj: Mapping[str, Any], dotted: str) -> Any:
    node: Any = obj
    for part in dotted.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def parse_field_selector(
    text: str | None, supported: frozenset[str]
) -> Callable[[Mapping[str, Any]], bool] | None:
    if not text:
        return None
    tests: list[Callable[[Mapping[str, Any]], bool]] = []
    for term in _split_top(text):
        for op in ("!=", "==", "="):
            if op in term:
                field, value = (s.strip() for s in term.split(op, 1))
                break
        else:
            raise bad_request(f"invalid field selector: {term!r}")
        if field not in supported:
            raise bad_request(f"field label not supported: {field}")
        tests.append(_field_test(field, value, negate=op == "!="))
    return lambda obj: all(t(obj) for t in tests)


def _field_test(field: str, value: str, negate: bool) -> Callable[[Mapping[str, Any]], bool]:
    def test(obj: Mapping[str, Any]) -> bool:
        actual = get_path(obj, field)
        text = "" if actual is None else (str(actual).lower() if isinstance(actual, bool) else str(actual))
        return (text != value) if negate else (text == value)

    return test
