"""deploy/crds: Koordinator's own CRDs, unchanged, whose schemas accept what Podherd's types write."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesim.apiserver.schema import CrdSchema
from services.executor.reservations import reservation_for
from shared.api import codec
from shared.api.pmj import PodMigrationJob
from shared.api.pod import pod_from
from tests.unit.test_api_types import RESERVATION, SEED_000_FULL

CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"


def _crd(name: str) -> dict[str, Any]:
    return yaml.safe_load((CRDS / f"{name}.scheduling.koordinator.sh.yaml").read_text())  # type: ignore[no-any-return]


def _schema(crd: dict[str, Any]) -> dict[str, Any]:
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


KOORDINATOR_TAG = "v1.8.0"


def _git_blob_id(content: bytes) -> str:
    """Git's object id: SHA-1 over a header and the bytes."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


@pytest.mark.parametrize("name", ["podmigrationjobs", "reservations"])
def test_each_crd_is_koordinators_file_at_the_recorded_release(name: str) -> None:
    """Byte for byte below the header, which names the release and the git blob id of Koordinator's file:
    `git ls-tree <tag> config/crd/bases/` in koordinator-sh/koordinator lists the same id."""
    text = (CRDS / f"{name}.scheduling.koordinator.sh.yaml").read_text()
    header = re.match(r"(?:#[^\n]*\n)+", text)
    assert header is not None
    recorded = re.search(r"at tag (\S+) \(commit [0-9a-f]{40}, git blob ([0-9a-f]{40})\)", header.group())
    assert recorded is not None and recorded.group(1) == KOORDINATOR_TAG
    assert _git_blob_id(text[header.end() :].encode()) == recorded.group(2)


def test_pmj_crd_shape() -> None:
    crd = _crd("podmigrationjobs")
    assert crd["spec"]["scope"] == "Cluster"
    assert crd["spec"]["names"]["shortNames"] == ["pmj"]
    version = crd["spec"]["versions"][0]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    columns = [c["name"] for c in version["additionalPrinterColumns"] if not c.get("priority")]
    assert columns == [
        "Phase",
        "Status",
        "Age",
        "Node",
        "Reservation",
        "PodNamespace",
        "Pod",
        "NewPod",
        "TTL",
    ]


def test_reservation_crd_shape() -> None:
    crd = _crd("reservations")
    assert crd["spec"]["scope"] == "Cluster"
    assert crd["spec"]["versions"][0]["subresources"] == {"status": {}}


def test_schemas_keep_every_field_podherd_writes() -> None:
    """Nothing Podherd writes is pruned by the API server, and all of it is valid."""
    pod = {
        "metadata": {"namespace": "default", "name": "web-0", "uid": "u-1", "labels": {"app": "web"}},
        "spec": {
            "nodeName": "node-1",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        },
    }
    job = codec.decode(json.dumps(SEED_000_FULL), PodMigrationJob)
    for crd, document in (
        ("podmigrationjobs", SEED_000_FULL),
        ("reservations", RESERVATION),
        ("reservations", reservation_for(job, pod_from(pod), "5m")),
    ):
        schema, kept = CrdSchema(_schema(_crd(crd))), copy.deepcopy(document)
        assert schema.prune(kept) == [] and kept == document
        assert schema.validate(document) == []


@pytest.mark.parametrize(
    ("crd", "document", "path", "value"),
    [
        ("podmigrationjobs", SEED_000_FULL, ("spec", "paused"), "yes"),
        ("podmigrationjobs", SEED_000_FULL, ("spec", "podRef"), None),
        ("reservations", RESERVATION, ("spec", "owners"), []),
        ("reservations", RESERVATION, ("spec", "allocatePolicy"), "Greedy"),
    ],
)
def test_schemas_reject_what_koordinator_rejects(
    crd: str, document: dict[str, Any], path: tuple[str, ...], value: object
) -> None:
    bad = copy.deepcopy(document)
    node = bad
    for key in path[:-1]:
        node = node[key]
    if value is None:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    assert CrdSchema(_schema(_crd(crd))).validate(bad) != []
