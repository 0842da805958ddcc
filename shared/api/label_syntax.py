"""The string form of a label selector, read as apimachinery's `labels.Parse` reads it, with its words for
what it refuses (the API server answers them as 400s):

    <selector>    ::= <requirement> | <requirement> "," <selector>
    <requirement> ::= [!] KEY [ ("in" | "notin") "(" VALUES ")" | ("=" | "==" | "!=" | ">" | "<") VALUE ]

KEY is a qualified name (`[prefix/]name`), VALUE a label value; blanks separate tokens.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

EQUALS, NOT_EQUALS, IN, NOT_IN = "=", "!=", "in", "notin"
EXISTS, DOES_NOT_EXIST, GREATER, LESS = "exists", "!", "gt", "lt"

_QNAME_FMT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QNAME: Final = re.compile(f"^{_QNAME_FMT}$")
_VALUE_FMT: Final = f"({_QNAME_FMT})?"
_VALUE: Final = re.compile(f"^{_VALUE_FMT}$")
_DNS1123_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_DNS1123: Final = re.compile(f"^{_DNS1123_FMT}$")
_QNAME_MSG: Final = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    "character"
)
_VALUE_MSG: Final = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character"
)
_DNS1123_MSG: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character"
)
# Tokens: the symbols, then the two keywords; anything else between blanks and symbols is an identifier.
_SYMBOLS: Final = frozenset({"!", "!=", "(", ")", ",", "=", "==", ">", "<"})
_KEYWORDS: Final = {IN, NOT_IN}
_SYMBOL_CHARS: Final = frozenset("=!(),<>")
_BLANKS: Final = frozenset(" \t\r\n")
ID, END, ERROR = "identifier", "end", "error"


class SelectorError(ValueError):
    """A selector the API server would refuse, in its words."""


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: frozenset[str] = frozenset()


def regex_error(message: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{message} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def qualified_name_errors(value: str) -> list[str]:
    """validation.IsQualifiedName: a label key, `[DNS subdomain/]name`."""
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a qualified name "
            + regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                errors.append("prefix part must be no more than 253 characters")
            if not _DNS1123.match(prefix):
                errors.append("prefix part " + regex_error(_DNS1123_MSG, _DNS1123_FMT, "example.com"))
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    if not _QNAME.match(name):
        errors.append("name part " + regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc"))
    return errors


def label_value_errors(value: str) -> list[str]:
    """validation.IsValidLabelValue."""
    errors = ["must be no more than 63 characters"] if len(value) > 63 else []
    if not _VALUE.match(value):
        errors.append(regex_error(_VALUE_MSG, _VALUE_FMT, "MyValue", "my_value", "12345"))
    return errors


def _lex(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _BLANKS:
            i += 1
        if i == n:
            tokens.append((END, ""))
            return tokens
        if text[i] in _SYMBOL_CHARS:
            i = _symbol(text, i, tokens)
            continue
        start = i
        while i < n and text[i] not in _BLANKS and text[i] not in _SYMBOL_CHARS:
            i += 1
        word = text[start:i]
        tokens.append((word if word in _KEYWORDS else ID, word))


def _symbol(text: str, i: int, tokens: list[tuple[str, str]]) -> int:
    """The longest symbol from `i` (as the lexer grows it one character at a time); its end."""
    buffer, last, end = "", "", i
    while end < len(text) and text[end] in _SYMBOL_CHARS:
        buffer += text[end]
        if buffer in _SYMBOLS:
            last = buffer
        elif last:
            break
        end += 1
    if not last:
        tokens.append((ERROR, f"error expected: keyword found '{buffer}'"))
        return end
    tokens.append((last, last))
    return i + len(last)


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens, self.at = _lex(text), 0

    def peek(self, values: bool = True) -> tuple[str, str]:
        kind, literal = self.tokens[self.at]
        return (ID if values and kind in _KEYWORDS else kind), literal

    def take(self, values: bool = True) -> tuple[str, str]:
        token = self.peek(values)
        self.at += 1
        return token

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            kind, literal = self.peek()
            if kind == END:
                return requirements
            if kind not in (ID, "!"):
                raise SelectorError(f"found '{literal}', expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self.requirement())
            except SelectorError as exc:
                raise SelectorError(f"unable to parse requirement: {exc}") from None
            kind, literal = self.take()
            if kind == END:
                return requirements
            if kind != ",":
                raise SelectorError(f"found '{literal}', expected: ',' or 'end of string'")
            kind, literal = self.peek()
            if kind not in (ID, "!"):
                raise SelectorError(f"found '{literal}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        kind, key = self.take()
        operator = ""
        if kind == "!":
            operator = DOES_NOT_EXIST
            kind, key = self.take()
        if kind != ID:
            raise SelectorError(f"found '{key}', expected: identifier")
        if errors := qualified_name_errors(key):
            raise SelectorError(f'<nil>: Invalid value: "{key}": {"; ".join(errors)}')
        if operator or self.peek()[0] in (END, ","):
            return _checked(key, operator or EXISTS, [])
        kind, literal = self.take(values=False)
        operators = {"in": IN, "notin": NOT_IN, "=": EQUALS, "==": EQUALS, "!=": NOT_EQUALS, ">": GREATER}
        operators["<"] = LESS
        if kind not in operators:
            raise SelectorError(f"found '{literal}', expected: '=', '!=', '==', 'in', notin'")
        operator = operators[kind]
        return _checked(key, operator, self.values() if operator in (IN, NOT_IN) else self.exact())

    def values(self) -> list[str]:
        kind, literal = self.take()
        if kind != "(":
            raise SelectorError(f"found '{literal}' expected: '('")
        kind, literal = self.peek()
        if kind == ")":
            self.take()
            return [""]
        if kind not in (ID, ","):
            raise SelectorError(f"found '{literal}', expected: ',', ')' or identifier")
        found = self.listed()
        if self.take()[0] != ")":
            raise SelectorError(f"found '{literal}', expected: ')'")
        return found

    def listed(self) -> list[str]:
        found: list[str] = []
        while True:
            kind, literal = self.take()
            if kind == ID:
                found.append(literal)
                after, next_literal = self.peek()
                if after == ")":
                    return found
                if after != ",":
                    raise SelectorError(f"found '{next_literal}', expected: ',' or ')'")
            elif kind == ",":  # an empty value before it at the start, after it at the end, or between two
                if not found:
                    found.append("")
                after, _ = self.peek()
                if after == ")":
                    found.append("")
                    return found
                if after == ",":
                    self.take()
                    found.append("")
            else:
                raise SelectorError(f"found '{literal}', expected: ',', or identifier")

    def exact(self) -> list[str]:
        kind, _ = self.peek()
        if kind in (END, ","):
            return [""]
        kind, literal = self.take()
        if kind != ID:
            raise SelectorError(f"found '{literal}', expected: identifier")
        return [literal]


def _checked(key: str, operator: str, values: list[str]) -> Requirement:
    """labels.NewRequirement's checks of the values."""
    errors: list[str] = []
    if operator in (GREATER, LESS):
        for i, value in enumerate(values):
            if not re.fullmatch(r"[+-]?\d+", value):
                errors.append(
                    f'values[{i}]: Invalid value: "{value}": '
                    "for 'Gt', 'Lt' operators, the value must be an integer"
                )
    for i, value in enumerate(values):
        if problems := label_value_errors(value):
            errors.append(f'values[{i}][{key}]: Invalid value: "{value}": {"; ".join(problems)}')
    if len(errors) == 1:
        raise SelectorError(errors[0])
    if errors:
        raise SelectorError(f"[{', '.join(errors)}]")
    return Requirement(key, operator, frozenset(values))


def parse(text: str) -> list[Requirement]:
    """The requirements of a selector's string form; SelectorError in the API server's words."""
    return _Parser(text).parse()


def matcher(requirements: list[Requirement]) -> Callable[[Mapping[str, str]], bool]:
    """One test of a label set against every requirement (each compiled once: a list runs it per object)."""
    tests = [_test(r) for r in requirements]
    if len(tests) == 1:
        return tests[0]

    def every(labels: Mapping[str, str]) -> bool:
        for test in tests:  # noqa: SIM110 (a plain loop: `all()` over a generator costs more than the tests)
            if not test(labels):
                return False
        return True

    return every


def _test(requirement: Requirement) -> Callable[[Mapping[str, str]], bool]:
    key, operator, values = requirement.key, requirement.operator, requirement.values
    if operator == EXISTS:
        return lambda labels: key in labels
    if operator == DOES_NOT_EXIST:
        return lambda labels: key not in labels
    if operator in (IN, EQUALS):
        return lambda labels: labels.get(key) in values if key in labels else False
    if operator in (NOT_IN, NOT_EQUALS):
        return lambda labels: key not in labels or labels[key] not in values
    bound, greater = int(next(iter(values))), operator == GREATER

    def compare(labels: Mapping[str, str]) -> bool:
        text = labels.get(key)
        if text is None or not re.fullmatch(r"[+-]?\d+", text):
            return False
        return int(text) > bound if greater else int(text) < bound

    return compare
