"""deploy/crds: Koordinator-compatible CRDs whose schemas accept what Podherd's types write."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.unit.test_api_types import RESERVATION, SEED_000_FULL

CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"


def _crd(name: str) -> dict[str, Any]:
    return yaml.safe_load((CRDS / f"{name}.scheduling.koordinator.sh.yaml").read_text())  # type: ignore[no-any-return]


def _schema(crd: dict[str, Any]) -> dict[str, Any]:
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


def test_pmj_crd_shape() -> None:
    crd = _crd("podmigrationjobs")
    assert crd["spec"]["scope"] == "Cluster"
    assert crd["spec"]["names"]["shortNames"] == ["pmj"]
    version = crd["spec"]["versions"][0]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    default_columns = [c["name"] for c in version["additionalPrinterColumns"] if not c.get("priority")]
    assert default_columns == ["Phase", "Status", "Node", "Pod", "Age"]


def test_reservation_crd_shape() -> None:
    crd = _crd("reservations")
    assert crd["spec"]["scope"] == "Cluster"
    assert crd["spec"]["versions"][0]["subresources"] == {"status": {}}


def test_schemas_accept_podherds_objects() -> None:
    jsonschema.validate(SEED_000_FULL, _schema(_crd("podmigrationjobs")))
    jsonschema.validate(RESERVATION, _schema(_crd("reservations")))


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
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, _schema(_crd(crd)))
