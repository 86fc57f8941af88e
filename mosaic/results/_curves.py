"""Learning curves: each run's returns (or one metric) against episodes or env steps, smoothed,
and the runs that differ only by seed merged into one mean with a band.

A run's points are its episodes in the order they ended (by row id), at x = that order (from
1) or at the run's env steps when the episode ended, a later phase going on from where the
phase before it ended; or a metric's values at the episode or
step count its row records (the mean of the values reported at the same x). A run of several
agents (multi-agent, self-play) has a line per agent instead of its total: each agent's return
at the episodes it played. Smoothing is a
trailing moving average: a point becomes the mean of itself and the ``smooth - 1`` points
before it (fewer at the start). Runs are grouped when their experiments' stored configs are
equal once the seeds are left out, and their phase is the same: the runs of one experiment
file are seeds of one config. A group's runs are interpolated onto the union of their x
values; at each x the mean and the band are over the runs that reach it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import sqlalchemy as sa

from mosaic.core.errors import StoreError
from mosaic.store import Store, agent_returns, schema, several_agents

__all__ = ["BANDS", "Curve", "Curves", "XAxis", "load_curves", "moving_average"]

XAxis = Literal["episodes", "steps"]
#: What a group's band spans: the lowest to highest run, one standard deviation (population)
#: either side of the mean, or nothing.
BANDS = ("range", "std", "none")
#: Keys of a stored config that differ between runs of one config: seeds, and where a run sits.
_PER_RUN_KEYS = frozenset(
    {"seed", "experiment_seed", "run_index", "phase", "phase_index", "store_path"}
)


@dataclass(frozen=True)
class Curve:
    """One line: a group's mean (or a lone run's values) at ``x``, and its band, if any.

    ``runs`` are the uids it is made of; ``low`` and ``high`` are None for a single run or
    ``band="none"``.
    """

    label: str
    runs: tuple[str, ...]
    x: np.ndarray
    y: np.ndarray
    low: np.ndarray | None = None
    high: np.ndarray | None = None


@dataclass(frozen=True)
class Curves:
    """Everything a plot shows: its lines and what its axes and band mean."""

    curves: list[Curve]
    x_label: str
    y_label: str
    band: str
    smooth: int


def moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """The trailing mean of ``window`` points at each point (of fewer at the start)."""
    if window <= 1 or values.size == 0:
        return values.astype(np.float64)
    sums = np.cumsum(np.concatenate([[0.0], values.astype(np.float64)]))
    ends = np.arange(1, values.size + 1)
    starts = np.maximum(ends - window, 0)
    averaged: np.ndarray = (sums[ends] - sums[starts]) / (ends - starts)
    return averaged


def load_curves(
    store: Store,
    runs: Sequence[str | int] = (),
    *,
    experiment: str | None = None,
    metric: str | None = None,
    x: XAxis = "episodes",
    smooth: int = 1,
    band: str = "range",
) -> Curves:
    """The curves of the selected runs (see :meth:`Store.select_runs`): returns, or ``metric``.

    Raises StoreError for an unknown run or experiment, an unknown metric (naming those
    recorded), or when the selected runs have nothing to draw; MissingExtra without pandas.
    """
    if band not in BANDS:
        raise ValueError(f"band must be one of {', '.join(BANDS)}, not {band!r}")
    info = store.runs_frame(*runs, experiment=experiment)
    points = _phases_in_sequence(_return_points(store, info, x) if metric is None
                                 else _metric_points(store, info, metric, x), info)
    y_label = "return" if metric is None else metric
    if smooth > 1:
        y_label += f" (moving average of {smooth})"
    x_label = "episode" if x == "episodes" else "env steps"
    groups: dict[tuple[str, str, str], list[tuple[str, np.ndarray, np.ndarray]]] = {}
    labels: dict[tuple[str, str, str], str] = {}
    position = {uid: index for index, uid in enumerate(info["run"])}
    ordered = sorted(points.items(), key=lambda item: position[item[0][0]])  # as selected
    for (uid, part), (xs, ys) in ordered:
        row = info.loc[info["run"] == uid].iloc[0]
        key = (_config_key(row), str(row["phase"]), part)
        groups.setdefault(key, []).append((uid, xs, moving_average(ys, smooth)))
        name = str(row["experiment"]) + (f" {row['phase']}" if row["phase"] else "")
        labels[key] = name + (f" {part}" if part else "")
    taken: dict[str, int] = {}
    curves = []
    for key, members in groups.items():
        label = labels[key]
        taken[label] = taken.get(label, 0) + 1
        if taken[label] > 1:  # equal names, different configs
            label += f" (config {taken[label]})"
        curves.append(_merge(label, members, band))
    return Curves(curves, x_label, y_label, band, smooth)


def _phases_in_sequence(points: Points, info: Any) -> Points:
    """``points`` with each later phase of an experiment placed after the phase before it: its
    x goes on from where the last of that phase's runs ended (a test phase after its training,
    not over its start; the seeds of a phase keep one origin, so their mean stays one curve).
    A run's phases run one after another, so they are in the order of their first rows' ids
    (a phase run again, resumed or retried, keeps its place)."""
    rank: dict[Any, int] = {}
    for _, runs in info.sort_values("run_id").groupby(["experiment_id", "run_index"]):
        order = list(dict.fromkeys(runs["phase"].fillna("")))
        rank.update({run_id: order.index(phase if isinstance(phase, str) else "")
                     for run_id, phase in zip(runs["run_id"], runs["phase"].fillna(""),
                                              strict=True)})
    rows = sorted((row for _, row in info.iterrows()),
                  key=lambda row: (row["experiment_id"], rank[row["run_id"]]))
    ends: dict[tuple[Any, int], float] = {}
    placed: Points = {}
    for row in rows:
        experiment, index = row["experiment_id"], rank[row["run_id"]]
        offset = max((end for (other, at), end in ends.items()
                      if other == experiment and at < index), default=0.0)
        for key, (xs, ys) in points.items():
            if key[0] != str(row["run"]):
                continue
            placed[key] = (xs + offset, ys)
            if xs.size:
                ends[experiment, index] = max(ends.get((experiment, index), 0.0),
                                              float(xs[-1]) + offset)
    return placed


def _config_key(row: Any) -> str:
    config = row["config"]
    if not isinstance(config, dict):
        return f"experiment {row['experiment_id']}"
    kept = {k: v for k, v in config.items() if k not in _PER_RUN_KEYS}
    return json.dumps(kept, sort_keys=True, default=str)


Points = dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]


def _return_points(store: Store, info: Any, x: XAxis) -> Points:
    episodes = store.episodes_frame(*info["run_id"].tolist())
    # The learning curve is the training episodes'; evaluation episodes are greedy extras.
    episodes = episodes[~episodes["evaluation"]]
    if episodes.empty:
        raise StoreError(
            f"the selected runs ({', '.join(info['run'])}) recorded no episodes "
            "(record_steps: none keeps none)"
        )
    column = "order" if x == "episodes" else "run_steps"
    mappings = _agent_mappings(store, info["run_id"].tolist())
    slots = [name for name in episodes.columns if name.startswith("return_")]
    points: Points = {}
    for (uid, run_id), frame in episodes.groupby(["run", "run_id"], sort=False):
        xs = frame[column].to_numpy(np.float64)
        mapping = mappings.get(int(run_id))
        if mapping is None:
            points[(str(uid), "")] = (
                xs, frame["total_return"].to_numpy(np.float64, na_value=np.nan))
            continue
        # A run of several agents: a line per agent, at the episodes it played (the total of a
        # zero-sum game is 0 whatever happens).
        by_agent = [
            agent_returns({slot[len("return_"):]: value for slot, value
                           in zip(slots, values, strict=True) if value == value},
                          mapping.get(environment))
            for environment, *values in frame[["environment", *slots]].itertuples(index=False)
        ]
        for agent in sorted({agent for returns in by_agent for agent in returns}):
            ys = np.array([returns.get(agent, np.nan) for returns in by_agent], np.float64)
            played = ~np.isnan(ys)
            points[(str(uid), agent)] = (xs[played], ys[played])
    return points


def _agent_mappings(store: Store, ids: list[int]) -> dict[int, dict[str, dict[str, str]]]:
    """The mapping of each of the runs ``ids`` that has several agents, by run id."""
    r = schema.runs
    with store.reading() as conn:
        rows = conn.execute(sa.select(r.c.id, r.c.agents).where(r.c.id.in_(ids))).all()
    return {int(run_id): agents for run_id, agents in rows if several_agents(agents)}


def _metric_points(store: Store, info: Any, metric: str, x: XAxis) -> Points:
    ids = info["run_id"].tolist()
    names = store.metric_names(*ids)
    if metric not in names:
        known = ", ".join(names) if names else "none are recorded"
        raise StoreError(f"no metric {metric!r} in the selected runs (metrics: {known})")
    rows = store.metrics_frame(*ids, name=metric)
    column = "episode" if x == "episodes" else "step"
    rows = rows[rows[column].notna()]
    if rows.empty:
        raise StoreError(f"metric {metric!r} has no {column} positions in the selected runs")
    parts = rows[["agent", "source"]].drop_duplicates()
    several = len(parts) > 1
    points: Points = {}
    for (uid, agent, source), frame in rows.groupby(["run", "agent", "source"], sort=False):
        per_x = frame.groupby(column, sort=True)["value"].mean()
        part = f"{agent}/{source}" if several else ""
        points[(str(uid), part)] = (
            per_x.index.to_numpy(np.float64), per_x.to_numpy(np.float64)
        )
    return points


def _merge(label: str, members: list[tuple[str, np.ndarray, np.ndarray]], band: str) -> Curve:
    uids = tuple(uid for uid, _, _ in members)
    if len(members) == 1:
        _, xs, ys = members[0]
        return Curve(label + f" ({uids[0]})", uids, xs, ys)
    grid = np.unique(np.concatenate([xs for _, xs, _ in members]))
    stacked = np.full((len(members), grid.size), np.nan)
    for row, (_, xs, ys) in enumerate(members):
        inside = (grid >= xs[0]) & (grid <= xs[-1])
        stacked[row, inside] = np.interp(grid[inside], xs, ys)
    mean = np.nanmean(stacked, axis=0)
    what = {"range": "band: min-max", "std": "band: ±1 std", "none": ""}[band]
    title = f"{label}: mean of {len(members)} seeds" + (f", {what}" if what else "")
    if band == "range":
        return Curve(title, uids, grid, mean, np.nanmin(stacked, 0), np.nanmax(stacked, 0))
    if band == "std":
        std = np.nanstd(stacked, axis=0)
        return Curve(title, uids, grid, mean, mean - std, mean + std)
    return Curve(title, uids, grid, mean)
