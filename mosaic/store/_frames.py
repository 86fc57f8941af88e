"""A store's rows as pandas DataFrames: episodes, decoded steps and metrics of chosen runs.

pandas is optional (the ``results`` extra): it is imported when a frame is built, and its
absence raises :class:`~mosaic.core.errors.MissingExtra`. Every frame starts with the run's uid
(``run``) and id (``run_id``), so that frames of several runs concatenate and group by run.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from mosaic.core.errors import StoreError
from mosaic.core.extras import require
from mosaic.store import schema
from mosaic.store._values import Decode

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "EPISODE_COLUMNS",
    "METRIC_COLUMNS",
    "STEP_FRAME_COLUMNS",
    "episodes_frame",
    "metric_names",
    "metrics_frame",
    "run_phase",
    "steps_frame",
]

#: The columns of :func:`episodes_frame`, before one ``return_<agent>`` column per env agent.
#: ``order`` is the episode's position (from 1) in the order the run's episodes ended, and
#: ``run_steps`` the run's env steps when it ended (over every environment and copy), both
#: counting training episodes only: an ``evaluation`` episode (``evaluate_every``) has those of
#: the training episode before it, and its ``episode`` counts the environment's evaluation
#: episodes from 0.
EPISODE_COLUMNS = (
    "run", "run_id", "environment", "episode", "copy", "order", "steps", "run_steps",
    "total_return", "terminated", "truncated", "seed", "evaluation",
)
STEP_FRAME_COLUMNS = (
    "run", "run_id", "environment", "episode", "copy", "step", "agent", "slot", "observation",
    "action", "reward", "terminated", "truncated", "info",
)
METRIC_COLUMNS = ("run", "run_id", "agent", "source", "name", "value", "episode", "step", "at")


def _pandas(what: str) -> Any:
    return require("pandas", f"a DataFrame of {what}")


def run_phase(uid: str, run_index: int) -> str | None:
    """The phase a run's uid names (``<experiment>-<stamp>-r<index>-<phase>``), or None."""
    match = re.search(rf"-r{run_index}-(.+)$", uid)
    return match.group(1) if match else None


def episodes_frame(conn: sa.Connection, runs: dict[int, str]) -> pd.DataFrame:
    """The episodes of ``runs`` (id -> uid), each run's in the order they ended (by row id)."""
    pd = _pandas("episodes")
    e = schema.episodes
    rows = conn.execute(
        sa.select(e).where(e.c.run_id.in_(list(runs))).order_by(e.c.run_id, e.c.id)
    ).all()
    agents = sorted({agent for row in rows for agent in (row.returns or {})})
    records: list[tuple[Any, ...]] = []
    order, run_steps, current = 0, 0, None
    for row in rows:
        if row.run_id != current:
            order, run_steps, current = 0, 0, row.run_id
        evaluation = bool(row.evaluation)
        if not evaluation:
            order += 1
            run_steps += int(row.steps)
        returns = row.returns or {}
        records.append((
            runs[row.run_id], row.run_id, row.environment, row.episode, row.copy, order,
            row.steps, run_steps, row.total_return, bool(row.terminated), bool(row.truncated),
            row.seed, evaluation, *(returns.get(agent) for agent in agents),
        ))
    columns = [*EPISODE_COLUMNS, *(f"return_{agent}" for agent in agents)]
    return pd.DataFrame.from_records(records, columns=columns)


def steps_frame(
    conn: sa.Connection, runs: dict[int, str], decode: Decode
) -> pd.DataFrame:
    """The step rows of ``runs``, observations and actions decoded (NumPy values, as stored),
    and ``info``, the stored keys of each step's info (``None`` where none were stored).

    Rows come by run, environment, episode and step. Raises StoreError naming the step whose
    observation or action cannot be decoded.
    """
    pd = _pandas("steps")
    s = schema.steps
    query = (
        sa.select(
            s.c.run_id, s.c.environment, s.c.episode, s.c.copy, s.c.step, s.c.agent, s.c.slot,
            s.c.observation, s.c.action, s.c.reward, s.c.terminated, s.c.truncated, s.c.info,
        )
        .where(s.c.run_id.in_(list(runs)))
        .order_by(s.c.run_id, s.c.environment, s.c.episode, s.c.copy, s.c.step, s.c.id)
    )
    records: list[tuple[Any, ...]] = []
    for row in conn.execution_options(yield_per=1000).execute(query):
        try:
            observation = None if row.observation is None else decode(row.observation)
            action = None if row.action is None else decode(row.action)
            info = None if row.info is None else decode(row.info)
        except Exception as exc:
            raise StoreError(
                f"cannot decode step {row.step} of episode {row.episode} ({row.environment}) "
                f"of run {runs[row.run_id]}: {exc}"
            ) from exc
        records.append((
            runs[row.run_id], row.run_id, row.environment, row.episode, row.copy, row.step,
            row.agent, row.slot, observation, action, row.reward, bool(row.terminated),
            bool(row.truncated), info,
        ))
    return pd.DataFrame.from_records(records, columns=list(STEP_FRAME_COLUMNS))


def metrics_frame(
    conn: sa.Connection, runs: dict[int, str], names: Sequence[str] | None = None
) -> pd.DataFrame:
    """The metric rows of ``runs`` (only those named in ``names``, if given), in order reported."""
    pd = _pandas("metrics")
    if not _has_metrics(conn):
        return pd.DataFrame(columns=list(METRIC_COLUMNS))
    m = schema.metrics
    query = sa.select(m).where(m.c.run_id.in_(list(runs))).order_by(m.c.run_id, m.c.id)
    if names is not None:
        query = query.where(m.c.name.in_(list(names)))
    records = [
        (runs[row.run_id], row.run_id, row.agent, row.source, row.name, row.value, row.episode,
         row.step, row.at)
        for row in conn.execute(query)
    ]
    frame = pd.DataFrame.from_records(records, columns=list(METRIC_COLUMNS))
    # When it was reported, as the runs' started_at and ended_at are: a time in UTC.
    frame["at"] = pd.to_datetime(frame["at"], unit="s", utc=True)
    # Nullable integers: a metric reported outside an episode keeps a missing position, not NaN.
    return frame.astype({"episode": "Int64", "step": "Int64"})


def metric_names(conn: sa.Connection, runs: Sequence[int]) -> list[str]:
    """The names of the metrics recorded for ``runs``, sorted."""
    if not _has_metrics(conn):
        return []
    m = schema.metrics
    query = sa.select(m.c.name).where(m.c.run_id.in_(list(runs))).distinct()
    return sorted(conn.execute(query).scalars())


def _has_metrics(conn: sa.Connection) -> bool:
    # A store no writer opened since the table was added lacks it, and readers never create it.
    return sa.inspect(conn).has_table(schema.metrics.name)
