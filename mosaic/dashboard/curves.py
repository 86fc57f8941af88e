"""Learning curves for the browser: a run's returns or one metric, smoothed, then cut down on
the server to at most a few hundred points, so that a run of 100,000 episodes is as light to
send and draw as one of 500.

Smoothing is the trailing moving average of :func:`mosaic.results.moving_average`, over every
point. Downsampling then splits the points into equal buckets, in order: each bucket becomes
one point at its mean x with the mean of its smoothed values, and ``low`` / ``high`` hold the
lowest and highest raw value in it, so that spikes a mean hides still show as a band.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Literal

import numpy as np
import sqlalchemy as sa

from mosaic.core.errors import StoreError
from mosaic.results import moving_average
from mosaic.store import Store, agent_returns, schema, several_agents

__all__ = ["MAX_POINTS", "CurveCache", "downsample", "run_curves"]

#: Points per line sent to the browser: about one per pixel of a chart's width.
MAX_POINTS = 600

XAxis = Literal["episodes", "steps"]


def downsample(xs: np.ndarray, ys: np.ndarray, smooth: int = 1,
               points: int = MAX_POINTS) -> dict[str, Any]:
    """``ys`` smoothed over ``smooth`` points, then at most ``points`` buckets (see the module).

    Returns ``{"x", "y", "low", "high", "n"}`` as lists (``low`` and ``high`` are None when no
    point was merged); NaN values (an episode without a return) become None.
    """
    n = int(xs.size)
    smoothed = moving_average(ys, smooth)
    if n <= points:
        return {"x": _list(xs), "y": _list(smoothed), "low": None, "high": None, "n": n}
    starts = np.linspace(0, n, points + 1).astype(np.int64)[:-1]
    counts = np.diff(np.append(starts, n))
    finite = np.where(np.isnan(ys), 0.0, ys)
    mean_x = np.add.reduceat(xs.astype(np.float64), starts) / counts
    valid = ~np.isnan(smoothed)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_y = (np.add.reduceat(np.where(valid, smoothed, 0.0), starts)
                  / np.add.reduceat(valid.astype(np.float64), starts))
    low = np.minimum.reduceat(np.where(np.isnan(ys), np.inf, finite), starts)
    high = np.maximum.reduceat(np.where(np.isnan(ys), -np.inf, finite), starts)
    low[np.isinf(low)] = np.nan
    high[np.isinf(high)] = np.nan
    return {"x": _list(mean_x), "y": _list(mean_y), "low": _list(low), "high": _list(high),
            "n": n}


def _list(values: np.ndarray) -> list[float | None]:
    return [None if v != v else v for v in values.astype(np.float64).tolist()]


class CurveCache:
    """The raw points of runs' curves, kept between requests, so that a page that follows a
    live run does not read its whole history again on every change.

    A run's returns are read once, then only the episodes recorded since (rows are only ever
    appended, and their ids grow); a metric is read again when the run has a metric row newer
    than those read. At most ``size`` curves are kept, the least recently used dropped first.
    Safe to use from several threads.
    """

    def __init__(self, store: Store, size: int = 64) -> None:
        self.store = store
        self.size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[int, str | None], tuple[int, Any]] = OrderedDict()

    def lines(self, run_id: int, *, metric: str | None = None, x: XAxis = "episodes",
              smooth: int = 1, points: int = MAX_POINTS) -> list[dict[str, Any]]:
        """As :func:`run_curves`, from the cache where it can."""
        with self._lock, self.store.reading() as conn:
            _check_run(conn, run_id, self.store.location)
            key = (run_id, metric)
            last, data = self._entries.pop(key, (0, None))
            if metric is None:
                last, data = _read_returns(conn, run_id, last, data)
            else:
                newest = _newest_metric(conn, run_id)
                if data is None or newest != last:
                    last, data = newest, _read_metric(conn, run_id, metric)
            self._entries[key] = (last, data)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        if metric is None:
            return _return_lines(data, x, smooth, points)
        return _metric_lines(data, metric, x, smooth, points)


def run_curves(store: Store, run_id: int, *, metric: str | None = None,
               x: XAxis = "episodes", smooth: int = 1,
               points: int = MAX_POINTS) -> list[dict[str, Any]]:
    """The lines of run ``run_id``: its training returns, or ``metric`` (one line per agent and
    source that reported it). Each line is :func:`downsample`'s dict with a ``label``.

    Raises StoreError when the run does not exist.
    """
    with store.reading() as conn:
        _check_run(conn, run_id, store.location)
        if metric is None:
            return _return_lines(_read_returns(conn, run_id, 0, None)[1], x, smooth, points)
        return _metric_lines(_read_metric(conn, run_id, metric), metric, x, smooth, points)


def _check_run(conn: sa.Connection, run_id: int, where: str) -> None:
    if conn.execute(sa.select(schema.runs.c.id).where(schema.runs.c.id == run_id)
                    ).scalar_one_or_none() is None:
        raise StoreError(f"no run with id {run_id} in {where}")


#: A run's returns: its agents (empty for a run of one agent), and its training episodes as
#: rows of (steps, total return, each agent's return or NaN where it did not play).
Returns = tuple[list[str], np.ndarray]


def _read_returns(conn: sa.Connection, run_id: int, after: int,
                  known: Returns | None) -> tuple[int, Returns]:
    """(the last episode row id read, the run's returns), reading only the episodes after
    ``after`` onto those ``known``. A run of several agents has a line per agent: the total of
    a zero-sum game is 0 whatever happens."""
    e = schema.episodes
    mapping: dict[str, dict[str, str]] = conn.execute(
        sa.select(schema.runs.c.agents).where(schema.runs.c.id == run_id)
    ).scalar_one_or_none() or {}
    if known is None:
        agents = sorted({agent for by_slot in mapping.values() for agent in by_slot.values()}
                        ) if several_agents(mapping) else []
        known = (agents, np.empty((0, 2 + len(agents))))
    agents, data = known
    rows = conn.execute(
        sa.select(e.c.id, e.c.steps, e.c.total_return, e.c.environment, e.c.returns)
        .where(e.c.run_id == run_id, e.c.evaluation == sa.false(), e.c.id > after)
        .order_by(e.c.id)
    ).all()
    new = np.full((len(rows), 2 + len(agents)), np.nan)
    for index, (_, steps, total, environment, returns) in enumerate(rows):
        new[index, 0] = steps
        new[index, 1] = np.nan if total is None else total
        if agents:
            by_agent = agent_returns(returns or {}, mapping.get(environment))
            new[index, 2:] = [by_agent.get(agent, np.nan) for agent in agents]
    return (int(rows[-1][0]) if rows else after), (agents, np.concatenate([data, new]))


def _return_lines(returns: Returns, x: XAxis, smooth: int,
                  points: int) -> list[dict[str, Any]]:
    agents, data = returns
    if not len(data):
        return []
    xs = (np.arange(1, len(data) + 1, dtype=np.float64) if x == "episodes"
          else np.cumsum(data[:, 0]))
    if not agents:
        return [{"label": "return", **downsample(xs, data[:, 1], smooth, points)}]
    lines = []
    for column, agent in enumerate(agents, start=2):
        played = ~np.isnan(data[:, column])  # at the run's episodes the agent played
        lines.append({"label": agent,
                      **downsample(xs[played], data[played, column], smooth, points)})
    return lines


def _newest_metric(conn: sa.Connection, run_id: int) -> int:
    if not sa.inspect(conn).has_table(schema.metrics.name):
        return 0
    m = schema.metrics
    return int(conn.execute(sa.select(sa.func.max(m.c.id)).where(m.c.run_id == run_id)
                            ).scalar() or 0)


#: A metric's rows: (agent, source) -> rows of (episode, step, value).
MetricData = dict[tuple[str, str], np.ndarray]


def _read_metric(conn: sa.Connection, run_id: int, metric: str) -> MetricData:
    if not sa.inspect(conn).has_table(schema.metrics.name):
        return {}
    m = schema.metrics
    rows = conn.execute(
        sa.select(m.c.agent, m.c.source, m.c.episode, m.c.step, m.c.value)
        .where(m.c.run_id == run_id, m.c.name == metric).order_by(m.c.id)
    ).all()
    parts: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for agent, source, episode, step, value in rows:
        parts.setdefault((agent, source), []).append(
            (np.nan if episode is None else episode, np.nan if step is None else step, value))
    return {key: np.array(values, dtype=np.float64) for key, values in parts.items()}


def _metric_lines(data: MetricData, metric: str, x: XAxis, smooth: int,
                  points: int) -> list[dict[str, Any]]:
    """One line per (agent, source): the mean of the values reported at each x, in order."""
    column = 0 if x == "episodes" else 1
    lines = []
    for (agent, source), values in data.items():
        values = values[~np.isnan(values[:, column])]
        if not len(values):
            continue
        xs, inverse = np.unique(values[:, column], return_inverse=True)
        ys = np.bincount(inverse, weights=values[:, 2]) / np.bincount(inverse)
        label = metric if len(data) == 1 else f"{metric} {agent}/{source}"
        lines.append({"label": label, **downsample(xs, ys, smooth, points)})
    return lines
