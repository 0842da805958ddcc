"""Webhooks' `matchConditions`, as kube-apiserver evaluates them before calling a webhook: CEL expressions
over `request` (the AdmissionRequest the webhook would be sent), `object` and `oldObject`, all of which must
be true for the webhook to be called (pure).

kubesim evaluates the part of CEL such conditions are written in: string, integer, boolean and null
literals, lists, field selection, `!`, `&&`, `||`, `==`, `!=`, `in`, parentheses, and the string methods
`startsWith`, `endsWith` and `contains`. An expression outside it is refused when the configuration is
written, naming the expression, as kube-apiserver refuses one that does not compile: a configuration kubesim
accepts behaves as on a real server. A field that is not there is an evaluation error, as in CEL."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

MAX_CONDITIONS = 64
_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")|(?P<int>\d+)|(?P<op>&&|\|\||==|!=|[!().,\[\]])"
    r"|(?P<id>[A-Za-z_][A-Za-z0-9_]*))"
)
_METHODS: dict[str, Callable[[str, str], bool]] = {
    "startsWith": str.startswith,
    "endsWith": str.endswith,
    "contains": str.__contains__,
}
_VARIABLES = ("request", "object", "oldObject")
_MISSING = object()


class ConditionError(Exception):
    """An expression kubesim cannot compile, or one that failed to evaluate."""


Node = tuple[Any, ...]


def compile_condition(expression: str) -> Node:
    parser = _Parser(expression)
    node = parser.expr()
    if parser.pos != len(parser.tokens):
        raise ConditionError(f"unexpected {parser.tokens[parser.pos][1]!r} in {expression!r}")
    return node


def holds(expression: str, variables: dict[str, Any]) -> bool:
    value = _eval(compile_condition(expression), variables)
    if not isinstance(value, bool):
        raise ConditionError(f"{expression!r} is not a boolean: {value!r}")
    return value


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text.rstrip()):
            found = _TOKEN.match(text, pos)
            if found is None or found.end() == pos:
                raise ConditionError(f"cannot read {text[pos : pos + 10]!r} in {text!r}")
            kind = found.lastgroup or ""
            self.tokens.append((kind, found.group(kind)))
            pos = found.end()
        self.pos = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos][1] if self.pos < len(self.tokens) else None

    def take(self, wanted: str | None = None) -> tuple[str, str]:
        if self.pos >= len(self.tokens) or (wanted is not None and self.tokens[self.pos][1] != wanted):
            raise ConditionError(f"expected {wanted or 'more'} at token {self.pos}")
        self.pos += 1
        return self.tokens[self.pos - 1]

    def expr(self) -> Node:
        return self._chain("||", "or", self.conjunction)

    def conjunction(self) -> Node:
        return self._chain("&&", "and", self.negation)

    def _chain(self, token: str, kind: str, operand: Callable[[], Node]) -> Node:
        node = operand()
        while self.peek() == token:
            self.take()
            node = (kind, node, operand())
        return node

    def negation(self) -> Node:
        if self.peek() == "!":
            self.take()
            return ("not", self.negation())
        left = self.member()
        op = self.peek()
        if op in ("==", "!=", "in"):
            self.take()
            return (op, left, self.member())
        return left

    def member(self) -> Node:
        node = self.primary()
        while self.peek() == ".":
            self.take()
            kind, name = self.take()
            if kind != "id":
                raise ConditionError(f"a field name after '.', not {name!r}")
            if self.peek() == "(":
                if name not in _METHODS:
                    raise ConditionError(f"kubesim evaluates no function {name!r}")
                self.take("(")
                node = ("call", name, node, self.expr())
                self.take(")")
            else:
                node = ("field", node, name)
        return node

    def primary(self) -> Node:
        kind, text = self.take()
        if kind == "str":
            return ("lit", bytes(text[1:-1], "utf-8").decode("unicode_escape"))
        if kind == "int":
            return ("lit", int(text))
        if text == "(":
            node = self.expr()
            self.take(")")
            return node
        if text == "[":
            items: list[Node] = []
            while self.peek() != "]":
                items.append(self.expr())
                if self.peek() == ",":
                    self.take()
            self.take("]")
            return ("list", *items)
        if kind == "id" and text in ("true", "false", "null"):
            return ("lit", {"true": True, "false": False, "null": None}[text])
        if kind == "id" and text in _VARIABLES:
            return ("var", text)
        raise ConditionError(f"undeclared reference to {text!r}")


def _eval(node: Node, variables: dict[str, Any]) -> Any:
    kind = node[0]
    if kind == "lit":
        return node[1]
    if kind == "var":
        return variables.get(node[1])
    if kind == "list":
        return [_eval(n, variables) for n in node[1:]]
    if kind == "field":
        holder = _eval(node[1], variables)
        value = holder.get(node[2], _MISSING) if isinstance(holder, dict) else _MISSING
        if value is _MISSING:
            raise ConditionError(f"no such key: {node[2]}")
        return value
    if kind == "call":
        target, argument = _eval(node[2], variables), _eval(node[3], variables)
        if not isinstance(target, str) or not isinstance(argument, str):
            raise ConditionError(f"no matching overload for {node[1]}")
        return _METHODS[node[1]](target, argument)
    if kind == "not":
        return not _boolean(_eval(node[1], variables))
    if kind in ("and", "or"):
        left = _boolean(_eval(node[1], variables))
        if left == (kind == "or"):
            return left
        return _boolean(_eval(node[2], variables))
    left, right = _eval(node[1], variables), _eval(node[2], variables)
    if kind == "in":
        if not isinstance(right, list):
            raise ConditionError("no matching overload for 'in'")
        return left in right
    return (left == right) == (kind == "==")


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConditionError(f"no matching overload: {value!r} is not a boolean")
    return value
