"""context.log_metric: what it holds for the next reply, what it refuses, and its bound."""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from mosaic.actors.metrics import reported
from mosaic.agents import BrainContext, Muscle, MuscleContext, Slot
from mosaic.agents.metrics import (
    MAX_METRIC_NAME,
    METRICS_PER_REPLY,
    MetricError,
    MetricLog,
    PendingMetrics,
)
from mosaic.agents.per_copy import PerCopyMuscles
from mosaic.messages import Metric

pytestmark = pytest.mark.timeout(30)

SLOTS = {"agent_0": Slot("agent_0", spaces.Box(-1.0, 1.0, (2,)), spaces.Discrete(2))}


def muscle_context(**changes: Any) -> MuscleContext:
    return MuscleContext("a", "a@env", "env", SLOTS, 3, **changes)


def brain_context() -> BrainContext:
    return BrainContext("a", "a", SLOTS, 3)


@pytest.mark.parametrize("make", [muscle_context, brain_context])
def test_log_metric_holds_name_value_and_time_until_taken(make: Any) -> None:
    context = make()
    context.log_metric("loss", 0.5)
    context.log_metric("updates", 3)
    context.log_metric("entropy", np.float32(0.25))
    context.log_metric("count", np.int64(7))
    taken = context.metrics.take()
    assert [(name, value) for name, value, _ in taken] == [
        ("loss", 0.5), ("updates", 3.0), ("entropy", 0.25), ("count", 7.0)]
    assert all(type(value) is float and type(at) is float and at > 0 for _, value, at in taken)
    assert context.metrics.take() == []


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, np.float64("nan"), 10**400])
def test_a_value_that_is_not_finite_is_refused_naming_the_metric(value: Any) -> None:
    context = muscle_context()
    with pytest.raises(MetricError, match=r"metric 'loss'.*finite"):
        context.log_metric("loss", value)
    assert len(context.metrics) == 0


@pytest.mark.parametrize("value", [True, np.bool_(False), "0.5", None, [1.0], np.array([1.0]),
                                   1 + 2j])
def test_a_value_that_is_not_a_real_number_is_refused_naming_the_metric(value: Any) -> None:
    context = brain_context()
    with pytest.raises(MetricError, match=r"metric 'loss'.*real number"):
        context.log_metric("loss", value)
    assert len(context.metrics) == 0


@pytest.mark.parametrize(("name", "match"), [
    ("", "must not be empty"),
    (None, "must be a str"),
    (3, "must be a str"),
    (b"loss", "must be a str"),
    ("x" * (MAX_METRIC_NAME + 1), f"at most {MAX_METRIC_NAME}"),
])
def test_a_bad_name_is_refused(name: Any, match: str) -> None:
    context = muscle_context()
    with pytest.raises(MetricError, match=match):
        context.log_metric(name, 1.0)
    context.log_metric("x" * MAX_METRIC_NAME, 1.0)  # the longest name that fits
    assert len(context.metrics) == 1


def test_beyond_the_bound_the_latest_are_kept_and_the_drop_is_warned(
        caplog: pytest.LogCaptureFixture) -> None:
    context = muscle_context()
    for index in range(METRICS_PER_REPLY + 5):
        context.log_metric("i", index)
    assert len(context.metrics) == METRICS_PER_REPLY
    assert context.metrics.dropped == 5
    with caplog.at_level(logging.WARNING, logger="mosaic.agents.metrics"):
        taken = context.metrics.take()
    assert [value for _, value, _ in taken] == [float(i) for i in range(5, METRICS_PER_REPLY + 5)]
    assert "muscle 'a@env': 5 metrics dropped" in caplog.text
    assert context.metrics.dropped == 0
    caplog.clear()
    context.log_metric("i", 1)
    with caplog.at_level(logging.WARNING, logger="mosaic.agents.metrics"):
        assert len(context.metrics.take()) == 1
    assert "dropped" not in caplog.text


def test_a_buffer_needs_room_for_one() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        PendingMetrics(limit=0)
    buffer: PendingMetrics[int] = PendingMetrics(limit=2)
    buffer.extend([1, 2, 3])
    assert buffer.take() == [2, 3]


def test_logging_consumes_no_random_numbers() -> None:
    context, twin = muscle_context(), muscle_context()
    context.log_metric("loss", 1.0)
    assert context.rng.random() == twin.rng.random()


class _Logging(Muscle):
    def act(self, slot: str, observation: Any, legal_actions: Any = None) -> Any:
        self.context.log_metric("copy", self.context.copy)
        return 0


def test_per_copy_instances_report_into_the_muscles_log() -> None:
    context = muscle_context(copies=3)
    muscles = PerCopyMuscles(_Logging)
    muscles.setup(context)
    for copy in range(3):
        muscles._instances[copy].act("agent_0", None)
    assert [value for _, value, _ in context.metrics.take()] == [0.0, 1.0, 2.0]
    # A replaced context shares the log; a new one has its own.
    assert replace(context, copy=1).metrics is context.metrics
    assert muscle_context().metrics is not context.metrics


def test_reported_names_the_source_and_costs_nothing_when_empty() -> None:
    log = MetricLog("muscle 'a@env'")
    assert reported("a@env", log) is None
    log.log("loss", 2)
    (metric,) = reported("a@env", log)
    assert metric == Metric("a@env", "loss", 2.0, metric.at)
    assert reported("a@env", log) is None
