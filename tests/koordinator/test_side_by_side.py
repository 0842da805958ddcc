"""The same jobs through Koordinator v1.8.0's own migration controller (koord-descheduler, MigrationController
alone) and through Podherd, each on a real engine of its own: every job ends the same way (phase and
reason), or the scenario names the row of the compatibility table that says why Podherd differs. Writes the
summary (scenarios, same, differs on purpose, differing) to `bench/results/koordinator-side-by-side.json`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from podherd import compatibility
from podherd.harness.servers import Server
from tests.koordinator import side_by_side
from tests.koordinator.scenarios import SCENARIOS, Scenario

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1500)]
Outcomes = dict[str, dict[str, side_by_side.Outcome]]
RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "koordinator-side-by-side.json"


@pytest.fixture(scope="session")
def both(
    nats_srv: Server, redis_srv: Server, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Outcomes, Outcomes]]:
    """The corpus through Koordinator's controller, then through Podherd: one engine at a time."""
    work = tmp_path_factory.mktemp("koordinator")
    koordinator = side_by_side.run_all(SCENARIOS, side_by_side.koordinator(work), work / "k")
    podherd = side_by_side.run_all(SCENARIOS, side_by_side.podherd(nats_srv, redis_srv), work / "p")
    yield koordinator, podherd
    rows = {row["what"] for section in compatibility.sections() for row in section["rows"]}
    summary = {"scenarios": len(SCENARIOS), "same": 0, "differs on purpose": 0, "differing": 0, "jobs": {}}
    for scenario in SCENARIOS:
        for job, theirs in koordinator[scenario.name].items():
            ours = podherd[scenario.name].get(job)
            verdict = (
                "same" if ours == theirs else "differs on purpose" if job in scenario.differs else "differing"
            )
            summary[verdict] = int(summary[verdict]) + 1  # type: ignore[call-overload]
            summary["jobs"][f"{scenario.name}/{job}"] = {  # type: ignore[index]
                "koordinator": theirs,
                "podherd": ours,
                "verdict": verdict,
                **(
                    {"row": scenario.differs[job]}
                    if job in scenario.differs and scenario.differs[job] in rows
                    else {}
                ),
            }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(summary, indent=2) + "\n")


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_each_job_ends_as_koordinators_or_as_a_listed_difference(
    both: tuple[Outcomes, Outcomes], scenario: Scenario
) -> None:
    koordinator, podherd = both
    rows = {row["what"] for section in compatibility.sections() for row in section["rows"]}
    for job, theirs in koordinator[scenario.name].items():
        ours = podherd[scenario.name][job]
        if ours == theirs:
            continue
        listed = scenario.differs.get(job)
        assert listed in rows, (
            f"{scenario.name}/{job}: Koordinator {theirs}, Podherd {ours}, and no row of the compatibility "
            "table says why"
        )
