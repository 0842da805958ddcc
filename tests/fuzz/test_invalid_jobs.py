"""PodMigrationJobs the CRD accepts but that cannot run, through kubesim and the four services: each has a
value Podherd cannot use in one field it reads (Koordinator's CRD has no enums nor patterns, so the API
server stores it). Each ends Failed with the reason and a message naming the field, once: one status write,
one log line, no traceback in any service; the valid jobs beside them move as usual.

Hypothesis draws one job per example; the services run for all of them in a loop thread of their own."""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kubesim.sim import SimHandle
from podherd.harness.servers import Server
from tests.e2e.pipeline import GROUP, PLURAL, VERSION, ended, job_when, pipeline, pipeline_config
from tests.e2e.test_lifecycle import cluster, start, web_pods
from tests.fuzz import sizes
from tests.fuzz.test_intent_subject import LoopThread
from tests.kube import Kube

pytestmark = [pytest.mark.integration, pytest.mark.e2e]
EXAMPLES = sizes.count(ci=10, full=150)
DURATION = r"^-?(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$"
MODES = {"ReservationFirst", "EvictDirectly"}
POLICIES = {"Orphan", "Background", "Foreground"}


@st.composite
def invalid_specs(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    """(field, reason, spec): a spec valid for the CRD but for one field Podherd reads."""
    pod = {"namespace": "default", "name": draw(st.sampled_from(["web-a", "web-b"]))}
    text = st.text(min_size=1, max_size=20)
    choice = draw(st.integers(0, 9))
    if choice == 0:
        return (
            "spec.mode",
            "InvalidSpec",
            {"podRef": pod, "mode": draw(text.filter(lambda t: t not in MODES))},
        )
    if choice == 1:
        ttl = draw(text.filter(lambda t: not _duration(t)))
        return "spec.ttl", "InvalidSpec", {"podRef": pod, "ttl": ttl}
    if choice == 2:
        ttl = f"-{draw(st.integers(1, 10_000))}{draw(st.sampled_from(['s', 'm', 'h']))}"
        return "spec.ttl", "InvalidSpec", {"podRef": pod, "ttl": ttl}
    if choice == 3:
        missing = draw(st.sampled_from(["name", "namespace"]))
        return (
            f"spec.podRef.{missing}",
            "InvalidPodRef",
            {"podRef": {k: v for k, v in pod.items() if k != missing}},
        )
    if choice == 4:
        kind = draw(text.filter(lambda t: t not in ("Pod", "")))
        return "spec.podRef.kind", "InvalidPodRef", {"podRef": {**pod, "kind": kind}}
    if choice == 5:
        grace = draw(st.integers(-(2**31), -1))
        return (
            "spec.deleteOptions.gracePeriodSeconds",
            "InvalidSpec",
            {"podRef": pod, "deleteOptions": {"gracePeriodSeconds": grace}},
        )
    if choice == 6:
        policy = draw(text.filter(lambda t: t not in POLICIES))
        return (
            "spec.deleteOptions.propagationPolicy",
            "InvalidSpec",
            {"podRef": pod, "deleteOptions": {"propagationPolicy": policy}},
        )
    if choice == 7:  # a ReservationTemplateSpec: its spec is the Reservation's
        ttl = draw(text.filter(lambda t: not _duration(t)))
        return (
            "spec.reservationOptions.template.spec.ttl",
            "InvalidSpec",
            {"podRef": pod, "reservationOptions": {"template": {"spec": {"ttl": ttl}}}},
        )
    if choice == 8:
        not_a_template = draw(st.one_of(text, st.lists(st.integers(), min_size=1), st.integers()))
        return (
            "spec.reservationOptions.template.spec.template",
            "InvalidSpec",
            {"podRef": pod, "reservationOptions": {"template": {"spec": {"template": not_a_template}}}},
        )
    ref = {"namespace": "default"}
    return (
        "spec.reservationOptions.reservationRef.name",
        "InvalidReservation",
        {"podRef": pod, "reservationOptions": {"reservationRef": ref}},
    )


def _duration(text: str) -> bool:
    return text == "0" or re.fullmatch(DURATION, text) is not None


@contextlib.contextmanager
def services(kube: Kube, nats_srv: Server, redis_srv: Server, prefix: str) -> Iterator[LoopThread]:
    loop = LoopThread()
    config = pipeline_config(kube.handle, nats_srv, redis_srv, prefix)
    running = pipeline(config)
    try:
        loop.run(running.__aenter__())
        yield loop
    finally:
        loop.run(running.__aexit__(None, None, None))
        loop.close()


def create(kube: Kube, name: str, spec: dict[str, Any]) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodMigrationJob",
        "metadata": {"name": name},
        "spec": spec,
    }
    kube.custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)


def test_every_job_that_cannot_run_ends_once_naming_its_field(
    kubesim_factory: Callable[..., SimHandle],
    nats_srv: Server,
    redis_srv: Server,
    test_id: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    kube = start(kubesim_factory, cluster(web=2))
    pods = sorted(web_pods(kube))
    caplog.set_level(logging.INFO)
    names: list[str] = []
    with services(kube, nats_srv, redis_srv, test_id):

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=[HealthCheck.too_slow],
        )
        @given(invalid_specs())
        def one(drawn: tuple[str, str, dict[str, Any]]) -> None:
            field, reason, spec = drawn
            name = f"invalid-{len(names)}"
            names.append(name)
            spec = {**spec, "podRef": {**spec["podRef"], **_real(spec["podRef"], pods)}}
            created = time.monotonic()
            create(kube, name, spec)
            job = job_when(kube, name, ended, 5)
            took = time.monotonic() - created
            status = job["status"]
            assert (status["phase"], status["reason"]) == ("Failed", reason), (spec, status)
            assert status["message"].startswith(field), (spec, status)
            assert took < 5, took

        one()
        # Beside them, a job that can run moves its pod as ever.
        create(kube, "valid", {"podRef": {"namespace": "default", "name": pods[0]}})
        assert job_when(kube, "valid", ended, 30)["status"]["phase"] == "Succeeded"
    tracebacks = [r for r in caplog.records if r.exc_info and r.name.startswith(("services", "shared"))]
    assert not tracebacks, [r.getMessage() for r in tracebacks]
    for name in names:  # ended once: one line said why, however often its events came back
        said = [r for r in caplog.records if r.getMessage().startswith(f"job {name} cannot run:")]
        assert len(said) == 1, (name, [r.getMessage() for r in said])


def _real(ref: dict[str, Any], pods: list[str]) -> dict[str, str]:
    """The drawn alias of a pod as its real name (the names the cluster gave them)."""
    alias = ref.get("name")
    return {"name": pods[0] if alias == "web-a" else pods[1]} if alias in ("web-a", "web-b") else {}
