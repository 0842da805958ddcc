"""The tracker's requester checks as tests build them: by explicit choice unchecked (tests of the intake's
mechanics), or with Kubernetes authorization as `deploy/` configures it."""

from __future__ import annotations

from typing import Any

from services.tracker.intake.requesters import Requesters
from shared.config.model import IntentsConfig
from shared.kube.client import KubeClient
from shared.nats import bus


def unchecked(kube: KubeClient, subjects: bus.Subjects) -> Requesters:
    return Requesters(kube, IntentsConfig(authorization="none"), subjects)


def checked(kube: KubeClient, subjects: bus.Subjects, **options: Any) -> Requesters:
    return Requesters(kube, IntentsConfig(**options), subjects)
