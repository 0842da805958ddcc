"""A replica's budget of API requests (client-go's QPS and Burst): a burst leaves at once, then requests
leave at the rate, each after the one before it, and an idle while refills the burst but never beyond it."""

from __future__ import annotations

import pytest

from shared.kube.request_budget import RequestBudget


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_leaves_at_once_then_each_request_waits_its_turn() -> None:
    clock = Clock()
    budget = RequestBudget(10.0, 3, clock=clock)
    assert [budget.take() for _ in range(3)] == [0.0, 0.0, 0.0]
    # Over budget: the 4th may leave in 0.1 s, the 5th 0.1 s after it, ...
    assert [budget.take() for _ in range(3)] == pytest.approx([0.1, 0.2, 0.3])
    clock.now += 0.3  # they left; the 7th comes as the 6th leaves
    assert budget.take() == pytest.approx(0.1)


def test_an_idle_while_refills_the_burst_and_no_more() -> None:
    clock = Clock()
    budget = RequestBudget(5.0, 2, clock=clock)
    assert [budget.take() for _ in range(2)] == [0.0, 0.0]
    clock.now += 60.0  # a minute of nothing: 300 tokens' worth, yet the burst is 2
    assert [budget.take() for _ in range(2)] == [0.0, 0.0]
    assert budget.take() == pytest.approx(0.2)
