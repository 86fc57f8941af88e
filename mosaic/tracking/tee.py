"""The tee: the store writer, with what the runs record handed to tracking sinks as well.

A :class:`TrackingTee` stands where the store writer stands (:func:`mosaic.tracking.tracked`
makes one when an experiment asks for tracking). Every call and attribute goes to the writer
unchanged, and the caller gets the writer's answer or error. From the few calls tracking needs
(a run's start, restart and end, its episodes and its metric rows) the tee first copies what
the sinks log, then hands the call to the writer, then queues the copy for the tracking thread
(:mod:`mosaic.tracking.dispatch`), which never blocks. So the store records exactly what it
would without the tee, whatever a sink does.

What the sinks get, per run (mosaic's run uid names it):

* ``return/<environment>`` for every training episode, and ``return/<environment>/<slot>`` per
  env agent when an episode has several; evaluation episodes (``evaluate_every``) as
  ``eval_return/...``. The x value is the run's env steps when the episode ended: the sum of
  the steps of its training episodes so far (evaluation steps are not the run's steps);
* ``<source>/<name>`` for every metric a brain or muscle logs, at the metric row's own step
  (the run's env steps when it arrived);
* the run's seed, sweep values and experiment when it starts; status, digest and error when it
  ends.

It sees what reaches the store writer: with ``record_steps: none`` no episode reaches it, and
so no return. Calls may come from any thread (one per run with ``--jobs``, a relay's for runs
on a Ray cluster); the tee's own state is behind a lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from copy import deepcopy
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

from mosaic.core.run_states import RunStatus
from mosaic.store.writer import CALL_TIMEOUT_S, MetricRow, StepRow, StoreWriter
from mosaic.tracking.dispatch import QUEUE_POINTS, Dispatcher, describe
from mosaic.tracking.sink import Point, RunEnd, RunStart, Sink, tag

if TYPE_CHECKING:
    from mosaic.store.resume import RestartPoint, StoredRun

    # To the type checker the tee is a StoreWriter, which it is to its callers: at run time it
    # is a plain object that forwards what it does not define itself (__getattr__).
    _Writer = StoreWriter
else:
    _Writer = object

__all__ = ["CLOSE_S", "TrackingTee"]

log = logging.getLogger("mosaic.tracking")

T = TypeVar("T")

#: How long closing waits for the sinks to log what is queued and close their runs.
CLOSE_S = 30.0
#: The most tags of metrics kept ready-made (a source and name each).
_TAG_CACHE = 4096


class _Run:
    """What the tee keeps of a run while it is open: how it started, and its env steps."""

    __slots__ = ("start", "steps")

    def __init__(self, start: RunStart) -> None:
        self.start = start
        self.steps = start.steps


class TrackingTee(_Writer):
    """``writer`` (a started :class:`~mosaic.store.StoreWriter`), whose records of the
    experiment ``experiment`` (its uid) also go to ``sinks``; see the module docstring.

    :meth:`close` closes the writer, then lets the sinks log what is queued and close (each
    open run ended as killed), waiting up to :data:`CLOSE_S` for them.
    """

    def __init__(self, writer: StoreWriter, sinks: Sequence[Sink], experiment: str, *,
                 limit: int = QUEUE_POINTS) -> None:
        self._writer = writer
        self._experiment_uid = experiment
        self._runs: dict[int, _Run] = {}
        self._tags: dict[tuple[str, str], str] = {}
        self._guard = threading.Lock()
        self._faulted = False
        self._dispatch = Dispatcher(sinks, limit=limit)

    def __getattr__(self, name: str) -> Any:
        # Only what this class does not define lands here: the writer's, unchanged.
        if name == "_writer":  # not set yet (a copy being made): not the writer's either
            raise AttributeError(name)
        return getattr(self._writer, name)

    @property
    def writer(self) -> StoreWriter:
        """The store writer every call goes to."""
        return self._writer

    @property
    def dropped(self) -> int:
        """How many scalars were dropped because the sinks fell too far behind."""
        return self._dispatch.dropped

    # -- the writer's calls that tracking reads ---------------------------------------------
    def record_steps(self, rows: Sequence[StepRow]) -> None:
        self._writer.record_steps(rows)  # the hot path: nothing for the sinks

    def run_started(
        self, experiment_id: int, uid: str, run_index: int, seed: int | None,
        timeout: float = CALL_TIMEOUT_S, *, params: Mapping[str, Any] | None = None,
        agents: Mapping[str, Mapping[str, str]] | None = None,
    ) -> int:
        values = self._quietly(lambda: deepcopy(dict(params or {})))
        run_id = self._writer.run_started(experiment_id, uid, run_index, seed, timeout,
                                          params=params, agents=agents)
        if values is not None:
            self._begin(run_id, RunStart(uid, self._experiment_uid, seed, values))
        return run_id

    def run_restarted(self, run: StoredRun, reason: str, environment: str | None = None,
                      episodes: Sequence[int] = (), timeout: float = CALL_TIMEOUT_S,
                      ) -> RestartPoint:
        point = self._writer.run_restarted(run, reason, environment, episodes, timeout)
        with self._guard:
            known = self._runs.get(run.id)
        # Another attempt keeps what the run started with; a resumed run is new to this tee.
        seed, params = (known.start.seed, known.start.params) if known is not None else (None, {})
        self._begin(run.id, RunStart(run.uid, self._experiment_uid, seed, params, point.steps,
                                     resumed=True))
        return point

    def record_episode(
        self,
        run_id: int,
        environment: str,
        episode: int,
        steps: int,
        total_return: float | None,
        returns: Mapping[str, float],
        terminated: bool,
        truncated: bool,
        seed: int | None,
        copy: int = 0,
        evaluation: bool = False,
        snapshots: Mapping[str, int] | None = None,
        chain: str | None = None,
    ) -> None:
        values = self._quietly(lambda: _returns(environment, total_return, returns, evaluation))
        self._writer.record_episode(run_id, environment, episode, steps, total_return, returns,
                                    terminated, truncated, seed, copy, evaluation, snapshots,
                                    chain)
        if not values:
            return
        at = time.time()
        with self._guard:
            run = self._runs.get(run_id)
            if run is None:
                return
            if not evaluation:
                run.steps += int(steps)
            self._dispatch.scalars(run.start.uid, [(name, value, run.steps, at)
                                                   for name, value in values])

    def record_metrics(self, rows: Sequence[MetricRow]) -> None:
        points = self._quietly(lambda: self._metric_points(rows))
        self._writer.record_metrics(rows)
        if not points:
            return
        with self._guard:
            for run_id, run_points in points.items():
                run = self._runs.get(run_id)
                if run is not None:
                    self._dispatch.scalars(run.start.uid, run_points)

    def run_finished(
        self,
        run_id: int,
        status: RunStatus,
        error: str | None,
        episodes: int,
        steps: int,
        digest: str | None = None,
        *,
        started_at: float | None = None,
    ) -> None:
        self._writer.run_finished(run_id, status, error, episodes, steps, digest,
                                  started_at=started_at)
        with self._guard:
            run = self._runs.pop(run_id, None)
            if run is not None:
                self._dispatch.finish(RunEnd(run.start.uid, status, error, digest,
                                             int(episodes), int(steps)))

    # -- lifecycle -------------------------------------------------------------------------
    def close(self, timeout: float = 10.0) -> None:
        """Close the writer (as :meth:`StoreWriter.close <mosaic.store.StoreWriter.close>`,
        with its errors), then the sinks, whatever the writer did."""
        try:
            self._writer.close(timeout)
        finally:
            self._dispatch.close(CLOSE_S)

    def __enter__(self) -> Self:
        self._writer.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- helpers ---------------------------------------------------------------------------
    def _begin(self, run_id: int, start: RunStart) -> None:
        with self._guard:
            self._runs[run_id] = _Run(start)
            self._dispatch.start(start)

    def _metric_points(self, rows: Sequence[MetricRow]) -> dict[int, list[Point]]:
        """The rows' scalars by run id; a row that is not a number is the store's to refuse."""
        points: dict[int, list[Point]] = {}
        tags = self._tags
        for row in rows:
            try:
                run_id, _, source, name, value, _, step, at = row
                key = (str(source), str(name))
                name_tag = tags.get(key)
                if name_tag is None:
                    name_tag = tag(*key)
                    if len(tags) < _TAG_CACHE:
                        tags[key] = name_tag
                points.setdefault(int(run_id), []).append(
                    (name_tag, float(value), int(step), float(at)))
            except (TypeError, ValueError):
                continue
        return points

    def _quietly(self, make: Callable[[], T]) -> T | None:
        """``make()``, or None after one warning the first time the tee itself fails: a
        problem of tracking never reaches the run."""
        try:
            result = make()
        except Exception as error:
            if not self._faulted:
                self._faulted = True
                log.warning("a record could not be copied for the sinks, which miss "
                            "it (the store has it): %s", describe(error))
            return None
        return result


def _returns(environment: str, total: float | None, returns: Mapping[str, float],
             evaluation: bool) -> list[tuple[str, float]]:
    """An episode's returns as (tag, value): the total, and each env agent's when several."""
    prefix = "eval_return" if evaluation else "return"
    values = [] if total is None else [(tag(prefix, environment), float(total))]
    if len(returns) > 1:
        values.extend((tag(prefix, environment, str(slot)), float(value))
                      for slot, value in returns.items())
    return values
