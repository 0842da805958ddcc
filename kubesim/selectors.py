"""Label and field selectors, parsed as the API server parses them (`a=b,c!=d,e in (f,g),!h`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubesim.errors import bad_request
from shared import selectors
from shared.selectors import LabelMatcher, matches_selector_dict, split_top


def parse_label_selector(text: str | None) -> LabelMatcher | None:
    try:
        return selectors.parse_label_selector(text)
    except ValueError as exc:
        raise bad_request(str(exc)) from None


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
    for term in split_top(text):
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
