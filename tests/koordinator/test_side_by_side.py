"""The same jobs through Koordinator v1.8.0's own migration controller (koord-descheduler, MigrationController
alone) and through Podherd, each on a real engine of its own, both at once: every job ends the same way
(phase and reason), with its conditions set in the same order, its pod evicted or not alike and its
Reservation meeting the same fate; the most jobs migrating at once per node, namespace and workload is the
same, or differs only below the limit both were given (a limit is a ceiling, and who reaches what below it
is timing). Where a job differs, the scenario names the row of the compatibility table that says why.
Writes the summary (scenarios, same, differs on purpose, differing) to
`bench/results/koordinator-side-by-side.json`."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from podherd import compatibility
from podherd.harness.servers import Server
from tests.koordinator import side_by_side
from tests.koordinator.scenarios import SCENARIOS, Scenario, ceiling

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]
Runs = dict[str, side_by_side.Run]
RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "koordinator-side-by-side.json"
UNCOMPARED = ("evicted_after_s", "message")  # reported beside the rest: timing and wording are each its own
ROWS = {row["what"] for section in compatibility.sections() for row in section["rows"]}


def differences(scenario: Scenario, theirs: side_by_side.Run, ours: side_by_side.Run) -> dict[str, str]:
    """What differs, by job (and `concurrency` for the scenario), in words; nothing when all is the same."""
    found = {}
    for job, their in theirs.jobs.items():
        our = ours.jobs.get(job)
        if our is None:
            found[job] = "not run by Podherd"
            continue
        apart = [
            f"{f.name}: Koordinator {getattr(their, f.name)!r}, Podherd {getattr(our, f.name)!r}"
            for f in dataclasses.fields(their)
            if f.name not in UNCOMPARED and getattr(their, f.name) != getattr(our, f.name)
        ]
        if apart:
            found[job] = "; ".join(apart)
    for kind, their_most in theirs.concurrency.items():
        limit = ceiling(scenario, kind)
        our_most = ours.concurrency.get(kind, {})
        for group in sorted({*their_most, *our_most}):
            k, p = their_most.get(group, 0), our_most.get(group, 0)
            # Below a limit (or where none bounds it) who reached what is timing; above it is behaviour.
            if limit is not None and max(k, p) > limit and k != p:
                found["concurrency"] = (
                    f"most at once per {kind} {group}: Koordinator {k}, Podherd {p}, limit {limit}"
                )
    return found


def verdict(scenario: Scenario, job: str, found: dict[str, str]) -> str:
    if job not in found:
        return "same"
    return "differs on purpose" if scenario.differs.get(job) in ROWS else "differing"


@pytest.fixture(scope="session")
def both(
    nats_srv: Server, redis_srv: Server, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Runs, Runs]]:
    """The corpus through Koordinator's controller and through Podherd, each on its own engine, at once."""
    work = tmp_path_factory.mktemp("koordinator")
    with ThreadPoolExecutor(2) as pool:
        theirs = pool.submit(side_by_side.run_all, SCENARIOS, side_by_side.koordinator(work), work / "k")
        ours = pool.submit(
            side_by_side.run_all, SCENARIOS, side_by_side.podherd(nats_srv, redis_srv), work / "p"
        )
        koordinator, podherd = theirs.result(), ours.result()
    yield koordinator, podherd
    write_summary(koordinator, podherd)


def write_summary(koordinator: Runs, podherd: Runs) -> None:
    counts = {"scenarios": len(SCENARIOS), "jobs": 0, "same": 0, "differs on purpose": 0, "differing": 0}
    jobs: dict[str, Any] = {}
    apart: dict[str, int] = {}
    for scenario in SCENARIOS:
        theirs, ours = koordinator[scenario.name], podherd[scenario.name]
        found = differences(scenario, theirs, ours)
        for job, their in theirs.jobs.items():
            said = verdict(scenario, job, found)
            counts["jobs"] += 1
            counts[said] += 1
            our = ours.jobs.get(job)
            jobs[f"{scenario.name}/{job}"] = {
                "koordinator": dataclasses.asdict(their),
                "podherd": dataclasses.asdict(our) if our else None,
                "verdict": said,
                **({"difference": found[job]} if job in found else {}),
                **({"row": scenario.differs[job]} if said == "differs on purpose" else {}),
            }
        if "concurrency" in found:
            said = verdict(scenario, "concurrency", found)
            apart[said] = apart.get(said, 0) + 1
            jobs[f"{scenario.name}/concurrency"] = {"verdict": said, "difference": found["concurrency"]}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    summary = {**counts, "concurrency differing from Koordinator's, above a limit": apart, "by job": jobs}
    RESULTS.write_text(json.dumps(summary, indent=2) + "\n")


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_each_job_goes_as_with_koordinator_or_as_a_listed_difference(
    both: tuple[Runs, Runs], scenario: Scenario
) -> None:
    koordinator, podherd = both
    found = differences(scenario, koordinator[scenario.name], podherd[scenario.name])
    unexplained = {job: what for job, what in found.items() if scenario.differs.get(job) not in ROWS}
    over = {
        f"{kind} {group}": (most, ceiling(scenario, kind))
        for kind, groups in podherd[scenario.name].concurrency.items()
        for group, most in groups.items()
        if (ceiling(scenario, kind) or most) < most
    }
    assert not over, f"{scenario.name}: Podherd let more migrate at once than its limits: {over}"
    assert not unexplained, (
        f"{scenario.name}: differs from Koordinator, and no row of the table says why: {unexplained}"
    )
