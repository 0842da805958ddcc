"""Selectors in their string form, refused as the API server refuses them (400, apimachinery's words) and
matched as it matches them; the cases follow labels.Parse's and fields.ParseSelector's grammar."""

from __future__ import annotations

from collections.abc import Callable

import kubernetes
import pytest

from kubesim.apiserver.errors import ApiError
from kubesim.apiserver.selectors import parse_field_selector, parse_label_selector
from kubesim.sim import SimHandle
from tests.kube import client_for, refusal

NAME_PART = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
    "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("!!x", "unable to parse requirement: found '!', expected: identifier"),
        ("=x", "found '=', expected: !, identifier, or 'end of string'"),
        ("a,", "found '', expected: identifier after ','"),
        ("a b", "unable to parse requirement: found 'b', expected: '=', '!=', '==', 'in', notin'"),
        ("a in b", "unable to parse requirement: found 'b' expected: '('"),
        ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("a notin (b c)", "unable to parse requirement: found 'c', expected: ',' or ')'"),
        ("a=b=c", "found '=', expected: ',' or 'end of string'"),
        ("a@b", f'unable to parse requirement: <nil>: Invalid value: "a@b": {NAME_PART}'),
        ("a=b@", f'unable to parse requirement: values[0][a]: Invalid value: "b@": {LABEL_VALUE}'),
        (
            "a>b",
            "unable to parse requirement: values[0]: Invalid value: \"b\": for 'Gt', 'Lt' operators, the "
            "value must be an integer",
        ),
        ("a=<", "unable to parse requirement: found '<', expected: identifier"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
    ],
)
def test_a_label_selector_the_server_cannot_parse_is_refused_in_its_words(
    selector: str, message: str
) -> None:
    with pytest.raises(ApiError) as refused:
        parse_label_selector(selector)
    assert (refused.value.code, refused.value.message) == (400, message)


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("a in (x,,y)", {"a": ""}, True),
        ("a in (,x)", {"a": ""}, True),
        ("a in (x,y)", {"a": ""}, False),
        ("a notin (x)", {}, True),
        ("a!=x", {}, True),
        ("a==x,b", {"a": "x", "b": ""}, True),
        ("a=", {"a": ""}, True),
        ("a>5", {"a": "7"}, True),
        ("a<5", {"a": "seven"}, False),
        ("in in (in)", {"in": "in"}, True),
        ("example.com/tier=web", {"example.com/tier": "web"}, True),
    ],
)
def test_a_label_selector_matches_as_the_server_matches(
    selector: str, labels: dict[str, str], expected: bool
) -> None:
    matcher = parse_label_selector(selector)
    assert matcher is not None and matcher(labels) is expected


FIELDS = frozenset({"metadata.name", "spec.nodeName"})


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("spec.nodeName", "invalid selector: 'spec.nodeName'; can't understand 'spec.nodeName'"),
        ("spec.nodeName = a", "field label not supported: spec.nodeName "),
        ("status.phase=Running", "field label not supported: status.phase"),
        ("metadata.name=a\\b", "invalid field selector: invalid escape sequence: \\b"),
        ("metadata.name=a=b", "invalid field selector: unescaped character in value: 61"),
    ],
)
def test_a_field_selector_the_server_cannot_parse_is_refused_in_its_words(
    selector: str, message: str
) -> None:
    with pytest.raises(ApiError) as refused:
        parse_field_selector(selector, FIELDS)
    assert (refused.value.code, refused.value.message) == (400, message)


def test_an_escaped_field_value_is_matched_unescaped() -> None:
    matcher = parse_field_selector("metadata.name=a\\,b,spec.nodeName!=n1", FIELDS)
    assert matcher is not None
    assert matcher({"metadata": {"name": "a,b"}, "spec": {"nodeName": "n2"}})
    assert not matcher({"metadata": {"name": "a,b"}, "spec": {"nodeName": "n1"}})


@pytest.mark.integration
def test_a_list_with_a_malformed_selector_is_a_400_not_a_list(
    kubesim_factory: Callable[..., SimHandle],
) -> None:
    kube = client_for(kubesim_factory("fragmented"))
    for bad in ({"label_selector": "!!x"}, {"field_selector": "spec.nodeName"}):
        with pytest.raises(kubernetes.client.ApiException) as refused:
            kube.core.list_namespaced_pod("default", **bad)
        status = refusal(refused.value)
        assert (status["code"], status["reason"]) == (400, "BadRequest"), status
