"""Learning curves for the browser: a run's returns or one metric, smoothed, then cut down on
the server to at most a few hundred points, so that a run of 100,000 episodes is as light to
send and draw as one of 500.

Smoothing is the trailing moving average of :func:`mosaic.results.moving_average`, over every
point. Downsampling then splits the points into equal buckets, in order: each bucket becomes
one point at its mean x with the mean of its smoothed values, and ``low`` / ``high`` hold the
lowest and highest raw value in it, so that spikes a mean hides still show as a band.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import sqlalchemy as sa

from mosaic.core.errors import StoreError
from mosaic.results import moving_average
from mosaic.store import Store, schema

__all__ = ["MAX_POINTS", "downsample", "run_curves"]

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


def run_curves(store: Store, run_id: int, *, metric: str | None = None,
               x: XAxis = "episodes", smooth: int = 1,
               points: int = MAX_POINTS) -> list[dict[str, Any]]:
    """The lines of run ``run_id``: its training returns, or ``metric`` (one line per agent and
    source that reported it). Each line is :func:`downsample`'s dict with a ``label``.

    Raises StoreError when the run does not exist.
    """
    with store.reading() as conn:
        if conn.execute(sa.select(schema.runs.c.id).where(schema.runs.c.id == run_id)
                        ).scalar_one_or_none() is None:
            raise StoreError(f"no run with id {run_id} in {store.location}")
        if metric is None:
            return _returns(conn, run_id, x, smooth, points)
        return _metric(conn, run_id, metric, x, smooth, points)


def _returns(conn: sa.Connection, run_id: int, x: XAxis, smooth: int,
             points: int) -> list[dict[str, Any]]:
    e = schema.episodes
    rows = conn.execute(
        sa.select(e.c.steps, e.c.total_return)
        .where(e.c.run_id == run_id, e.c.evaluation == sa.false()).order_by(e.c.id)
    ).all()
    if not rows:
        return []
    data = np.array([(s, np.nan if r is None else r) for s, r in rows], dtype=np.float64)
    xs = (np.arange(1, len(rows) + 1, dtype=np.float64) if x == "episodes"
          else np.cumsum(data[:, 0]))
    return [{"label": "return", **downsample(xs, data[:, 1], smooth, points)}]


def _metric(conn: sa.Connection, run_id: int, metric: str, x: XAxis, smooth: int,
            points: int) -> list[dict[str, Any]]:
    if not sa.inspect(conn).has_table(schema.metrics.name):
        return []
    m = schema.metrics
    position = m.c.episode if x == "episodes" else m.c.step
    rows = conn.execute(
        sa.select(m.c.agent, m.c.source, position, sa.func.avg(m.c.value))
        .where(m.c.run_id == run_id, m.c.name == metric, position.is_not(None))
        .group_by(m.c.agent, m.c.source, position).order_by(m.c.agent, m.c.source, position)
    ).all()
    parts: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for agent, source, at, value in rows:
        parts.setdefault((agent, source), []).append((at, value))
    lines = []
    for (agent, source), values in parts.items():
        data = np.array(values, dtype=np.float64)
        label = metric if len(parts) == 1 else f"{metric} {agent}/{source}"
        lines.append({"label": label, **downsample(data[:, 0], data[:, 1], smooth, points)})
    return lines
