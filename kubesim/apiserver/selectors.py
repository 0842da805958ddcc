"""Label and field selectors, parsed as the API server parses them (`a=b,c!=d,e in (f,g),!h`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubesim.apiserver.errors import bad_request
from shared.api import selectors
from shared.api.label_syntax import SelectorError
from shared.api.selectors import LabelMatcher, matches_selector_dict


def parse_label_selector(text: str | None) -> LabelMatcher | None:
    try:
        return selectors.parse_label_selector(text)
    except SelectorError as exc:
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
    """fields.ParseSelector: `field=value`, `field==value`, `field!=value`, joined by commas (a value may
    escape `\\`, `,` and `=` with a backslash); nothing trimmed."""
    if not text:
        return None
    tests: list[Callable[[Mapping[str, Any]], bool]] = []
    for term in _terms(text):
        found = _split_term(term)
        if found is None:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        field, op, value = found
        if field not in supported:
            raise bad_request(f"field label not supported: {field}")
        tests.append(_field_test(field, _unescaped(value), negate=op == "!="))
    return lambda obj: all(t(obj) for t in tests)


def _terms(text: str) -> list[str]:
    """The terms between commas that are not escaped."""
    terms, current, escaped = [], "", False
    for char in text:
        if char == "," and not escaped:
            terms.append(current)
            current = ""
            continue
        current += char
        escaped = char == "\\" and not escaped
    terms.append(current)
    return [t for t in terms if t]


def _split_term(term: str) -> tuple[str, str, str] | None:
    for i in range(len(term)):
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
    return None


def _unescaped(value: str) -> str:
    out, escaped = "", False
    for char in value:
        if escaped:
            if char not in "\\,=":
                raise bad_request(f"invalid field selector: invalid escape sequence: \\{char}")
            out, escaped = out + char, False
        elif char == "\\":
            escaped = True
        elif char in ",=":  # Go prints the rune as its number
            raise bad_request(f"invalid field selector: unescaped character in value: {ord(char)}")
        else:
            out += char
    if escaped:
        raise bad_request("invalid field selector: invalid escape sequence: \\")
    return out


def _field_test(field: str, value: str, negate: bool) -> Callable[[Mapping[str, Any]], bool]:
    def test(obj: Mapping[str, Any]) -> bool:
        actual = get_path(obj, field)
        text = "" if actual is None else (str(actual).lower() if isinstance(actual, bool) else str(actual))
        return (text != value) if negate else (text == value)

    return test
