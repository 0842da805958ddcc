"""Timestamps as the API server stores them (metav1.Time in whole seconds, MicroTime in microseconds, both
in UTC; a value that is not a time refused on decoding), and an error kubesim did not expect answered as
the API server answers one: `Internal error occurred: …`, never a Python repr."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.apiserver import subresources
from tests.kube import Kube
from tests.kubesim.test_kubectl import KUBECTL, kubectl
from tests.kubesim.test_schema import request

pytestmark = [pytest.mark.integration]


def event(name: str, **times: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"},
        "reason": "Moved",
        "message": "moved",
        "type": "Normal",
        "source": {"component": "podherd-tracker"},
        **times,
    }


EVENTS = "/api/v1/namespaces/default/events"


def create(kube: Kube, body: dict[str, Any]) -> tuple[int, Any]:
    """Sent as JSON, not through the typed client (which would parse or refuse the times itself)."""
    code, answer, _ = request(kube, "POST", EVENTS, body)
    return code, answer


@pytest.fixture
def kube(fragmented: Kube) -> Kube:
    return fragmented


def test_event_times_are_stored_as_the_api_server_stores_them(kube: Kube) -> None:
    body = event(
        "moved",
        firstTimestamp="2026-11-27T10:02:03.123456Z",
        lastTimestamp="2026-11-27T11:02:04.999+01:00",
        eventTime="2026-11-27T10:02:03.1234Z",
    )
    assert create(kube, body)[0] == 201
    code, found, _ = request(kube, "GET", f"{EVENTS}/moved")
    assert code == 200
    assert found["firstTimestamp"] == "2026-11-27T10:02:03Z"
    assert found["lastTimestamp"] == "2026-11-27T10:02:04Z"
    assert found["eventTime"] == "2026-11-27T10:02:03.123400Z"
    assert found["metadata"]["creationTimestamp"].endswith("Z")


@pytest.mark.kubectl
@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")
def test_kubectl_get_events_reads_events_written_with_microseconds(kube: Kube) -> None:
    body = event("fine", firstTimestamp="2026-11-27T10:02:03.5Z", lastTimestamp="2026-11-27T10:02:03.5Z")
    assert create(kube, body)[0] == 201
    lines = kubectl(kube.handle, "get", "events", "--field-selector=involvedObject.name=p").splitlines()
    assert lines[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], lines
    assert lines[1].split()[1:4] == ["Normal", "Moved", "pod/p"], lines


@pytest.mark.parametrize("text", ["yesterday", "2026-11-27", "2026-11-27T10:02:03"])
def test_a_time_that_does_not_parse_is_refused_on_decoding(kube: Kube, text: str) -> None:
    code, status = create(kube, event("bad", lastTimestamp=text))
    assert (code, status["reason"]) == (400, "BadRequest")
    assert status["message"] == (
        f'Event in version "v1" cannot be handled as a Event: parsing time "{text}" as '
        f'"2006-01-02T15:04:05Z07:00": cannot parse "{text}" as "2006"'
    )


def test_an_unexpected_error_is_an_internal_error_in_the_api_servers_words(
    kube: Kube, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(*_: Any) -> Any:
        raise KeyError("spec")

    monkeypatch.setattr(subresources, "touch", broken)
    for _ in range(3):
        code, status, _ = request(kube, "POST", "/kubesim/touch", {})
        assert (code, status["reason"]) == (500, "InternalError")
        assert status["message"] == "Internal error occurred: 'spec'"
        assert status["details"] == {"causes": [{"message": "'spec'"}]}
    lines = [r for r in caplog.records if r.name == "kubesim.apiserver.server"]
    assert [r.getMessage() for r in lines] == ["internal error on POST /kubesim/touch: KeyError: 'spec'"] * 3
    assert [r.exc_info is not None for r in lines] == [True, False, False]  # the traceback once
