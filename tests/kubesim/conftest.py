"""Clusters the kubesim tests share the making of: the built-in scenarios behind the official client."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kubesim.sim import SimHandle
from tests.kube import Kube, client_for


@pytest.fixture
def small(kubesim_factory: Callable[..., SimHandle]) -> Kube:
    return client_for(kubesim_factory("small"))


@pytest.fixture
def fragmented(kubesim_factory: Callable[..., SimHandle]) -> Kube:
    return client_for(kubesim_factory("fragmented"))
