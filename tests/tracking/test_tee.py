"""The tee in front of the store writer: every call reaches the writer unchanged, the sinks get
their scalars against the run's env steps, and nothing a sink does (fail, fall behind) reaches
the runs. A fake writer and recording sinks, no store."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from mosaic.core.errors import StoreError
from mosaic.store.resume import RestartPoint, StoredRun
from mosaic.tracking.sink import Point, RunEnd, RunStart, Sink
from mosaic.tracking.tee import TrackingTee

pytestmark = pytest.mark.timeout(30)


class FakeWriter:
    """Records every call; ``run_started`` numbers the runs from 1."""

    outage_s = 60.0

    def __init__(self, close_error: Exception | None = None) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.close_error = close_error
        self._ids = iter(range(1, 1000))

    @property
    def queued(self) -> int:
        return len(self.calls)

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args, kwargs))
            if name == "run_started":
                return next(self._ids)
            if name == "run_restarted":
                return RestartPoint(episode=2, steps=5, returns=(1.0, 2.0))
            if name == "close" and self.close_error is not None:
                raise self.close_error
            return f"{name} answered"
        return call


class Recorder(Sink):
    """Records what it is given; fails in ``fail_in`` when told to."""

    name = "Recorder"

    def __init__(self, fail_in: str = "") -> None:
        self.fail_in = fail_in
        self.started: list[RunStart] = []
        self.points: dict[str, list[Point]] = {}
        self.ended: list[RunEnd] = []
        self.closed = False

    def _maybe_fail(self, where: str) -> None:
        if where == self.fail_in:
            raise OSError(f"{where} broke, password in http://me:hunter2@host/x")

    def start(self, run: RunStart) -> None:
        self._maybe_fail("start")
        self.started.append(run)

    def scalars(self, run: str, points: Sequence[Point]) -> None:
        self._maybe_fail("scalars")
        self.points.setdefault(run, []).extend(points)

    def finish(self, run: RunEnd) -> None:
        self._maybe_fail("finish")
        self.ended.append(run)

    def close(self) -> None:
        self.closed = True


def tee_of(*sinks: Sink, writer: Any = None, **kwargs: Any) -> tuple[TrackingTee, Any]:
    writer = writer if writer is not None else FakeWriter()
    return TrackingTee(writer, sinks, "exp", **kwargs), writer


def tags(points: list[Point]) -> list[tuple[str, float, int]]:
    return [(name, value, step) for name, value, step, _ in points]


def test_every_call_reaches_the_writer_unchanged_with_its_answer() -> None:
    tee, writer = tee_of(Recorder())
    rows: list[tuple[Any, ...]] = [(1, "env", 0, 0, "a", "agent_0", [0.0], 1, 1.0, False, False)]
    metric_rows = [(1, "a", "a", "loss", 0.5, 0, 10, 123.0)]
    assert tee.run_started(3, "r0", 0, 42, 7.0, params={"x": 1}) == 1
    tee.record_steps(rows)
    tee.record_metrics(metric_rows)
    tee.record_episode(1, "env", 0, 10, 3.0, {"agent_0": 3.0}, True, False, 9, 0, False, None,
                       "ab")
    tee.record_transition(1, "running", "stopping", "done")
    assert tee.flush(2.0) == "flush answered"  # not the tee's: forwarded
    assert tee.queued == len(writer.calls) and tee.outage_s == 60.0
    tee.run_finished(1, "finished", None, 1, 10, "d1", started_at=5.0)
    tee.close(3.0)
    assert writer.calls == [
        ("run_started", (3, "r0", 0, 42, 7.0), {"params": {"x": 1}, "agents": None}),
        ("record_steps", (rows,), {}),
        ("record_metrics", (metric_rows,), {}),
        ("record_episode", (1, "env", 0, 10, 3.0, {"agent_0": 3.0}, True, False, 9, 0, False,
                            None, "ab"), {}),
        ("record_transition", (1, "running", "stopping", "done"), {}),
        ("flush", (2.0,), {}),
        ("run_finished", (1, "finished", None, 1, 10, "d1"), {"started_at": 5.0}),
        ("close", (3.0,), {}),
    ]
    assert writer.calls[1][1][0] is rows and writer.calls[2][1][0] is metric_rows


def test_returns_go_against_the_runs_env_steps_and_metrics_against_their_own() -> None:
    sink = Recorder()
    tee, _ = tee_of(sink)
    run = tee.run_started(1, "r0", 0, 42, params={"agents.0.params.gamma": 0.9})
    tee.record_episode(run, "env", 0, 10, 1.0, {"agent_0": 1.0}, True, False, None)
    tee.record_metrics([(run, "ppo", "ppo@env", "entropy", 0.7, 1, 12, 1.0),
                        (run, "ppo", "ppo", "loss", "not a number", 1, 12, 1.0)])
    tee.record_episode(run, "env", 1, 20, 2.0, {"agent_0": 2.0}, False, True, None)
    # An evaluation episode: its steps are not the run's.
    tee.record_episode(run, "env", 0, 7, 5.0, {"agent_0": 5.0}, True, False, None,
                       evaluation=True)
    tee.record_episode(run, "pz", 2, 4, 0.0, {"p0": 1.0, "p1": -1.0}, True, False, None)
    tee.record_episode(99, "env", 0, 4, 0.0, {"agent_0": 0.0}, True, False, None)  # unknown
    tee.run_finished(run, "failed", "it broke", 4, 34, "dd")
    tee.close()
    assert sink.started == [RunStart("r0", "exp", 42, {"agents.0.params.gamma": 0.9})]
    assert tags(sink.points["r0"]) == [
        ("return/env", 1.0, 10), ("ppo_env/entropy", 0.7, 12), ("return/env", 2.0, 30),
        ("eval_return/env", 5.0, 30),
        ("return/pz", 0.0, 34), ("return/pz/p0", 1.0, 34), ("return/pz/p1", -1.0, 34)]
    assert sink.ended == [RunEnd("r0", "failed", "it broke", "dd", 4, 34)]
    assert sink.closed


def test_a_restarted_run_goes_on_from_its_restart_point() -> None:
    sink = Recorder()
    tee, _ = tee_of(sink)
    run = tee.run_started(1, "r0", 0, 42)
    tee.record_episode(run, "env", 0, 10, 1.0, {"agent_0": 1.0}, True, False, None)
    stored = StoredRun(run, "r0", 0, "failed", 0, 0, None, None, None, None)
    assert tee.run_restarted(stored, "again").steps == 5
    tee.record_episode(run, "env", 2, 3, 1.0, {"agent_0": 1.0}, True, False, None)
    tee.close()
    assert sink.started[1] == RunStart("r0", "exp", 42, {}, steps=5, resumed=True)
    assert [step for _, _, step, _ in sink.points["r0"]] == [10, 8]


def test_a_sink_that_fails_is_turned_off_with_one_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mosaic.tracking")
    broken, working = Recorder(fail_in="scalars"), Recorder()
    tee, writer = tee_of(broken, working)
    for index in range(3):
        run = tee.run_started(1, f"r{index}", index, None)
        for episode in range(5):
            tee.record_episode(run, "env", episode, 1, 1.0, {"agent_0": 1.0}, True, False, None)
        tee.run_finished(run, "finished", None, 5, 5, "d")
    tee.close()
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 1, warnings
    assert "Recorder failed and is off" in warnings[0] and "OSError" in warnings[0]
    assert "hunter2" not in warnings[0] and "me:***@host" in warnings[0]
    assert broken.closed and broken.points == {}
    assert {run: len(points) for run, points in working.points.items()} == {
        "r0": 5, "r1": 5, "r2": 5}
    assert sum(name == "record_episode" for name, *_ in writer.calls) == 15


def test_a_sink_that_falls_behind_never_blocks_a_run(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mosaic.tracking")
    entered, release = threading.Event(), threading.Event()

    class Stuck(Recorder):
        name = "Stuck"

        def start(self, run: RunStart) -> None:
            entered.set()
            release.wait(10)
            super().start(run)

    sink = Stuck()
    tee, writer = tee_of(sink, limit=100)
    run = tee.run_started(1, "r0", 0, None)
    assert entered.wait(5)  # the tracking thread is stuck: nothing more leaves the queue
    began = time.monotonic()
    for episode in range(1000):
        tee.record_episode(run, "env", episode, 1, 1.0, {"agent_0": 1.0}, True, False, None)
    tee.run_finished(run, "finished", None, 1000, 1000, "d")
    assert time.monotonic() - began < 2.0
    release.set()
    tee.close()
    assert tee.dropped == 900
    assert len(sink.points["r0"]) == 100 and sink.ended  # its end got in all the same
    assert [record.getMessage() for record in caplog.records] == [
        "more than 100 scalars wait for Stuck; newer ones are dropped until it catches up "
        "(the store records everything)"]
    assert sum(name == "record_episode" for name, *_ in writer.calls) == 1000


def test_runs_on_several_threads_each_get_their_own_steps() -> None:
    sink = Recorder()
    tee, _ = tee_of(sink)

    def one_run(index: int) -> None:
        run = tee.run_started(1, f"r{index}", index, index)
        for episode in range(300):
            tee.record_episode(run, "env", episode, index + 1, float(episode), {"agent_0": 0.0},
                               True, False, None)
        tee.run_finished(run, "finished", None, 300, 300 * (index + 1), "d")

    threads = [threading.Thread(target=one_run, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    tee.close()
    assert len(sink.ended) == 8
    for index in range(8):
        points = sink.points[f"r{index}"]
        assert [step for _, _, step, _ in points] == [(index + 1) * n for n in range(1, 301)]
        assert [value for _, value, _, _ in points] == [float(n) for n in range(300)]


def test_closing_closes_the_sinks_whatever_the_writer_does() -> None:
    sink = Recorder()
    tee, _ = tee_of(sink, writer=FakeWriter(close_error=StoreError("lost")))
    tee.run_started(1, "r0", 0, None)
    with pytest.raises(StoreError, match="lost"):
        tee.close()
    assert sink.closed and sink.started
