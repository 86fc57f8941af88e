"""What :func:`mosaic.run` returns: each run's outcome, and its episodes as a DataFrame."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mosaic.core.run_states import SUCCESSFUL_STATUSES, RunStatus
from mosaic.core.store_url import mask
from mosaic.orchestration.executor import RunResult
from mosaic.stepping.progress import RECENT_EPISODES
from mosaic.store import open_store

if TYPE_CHECKING:
    import pandas

__all__ = ["Results", "RunRecord"]


@dataclass(frozen=True)
class RunRecord:
    """How one run (one phase of one run, with ``phases:``) ended.

    ``index`` numbers the runs of the command (every seed of every sweep point), ``params``
    are the run's sweep values by key path (empty without a sweep), ``status`` is
    ``finished``, ``failed``, ``cancelled`` or ``pruned`` (a
    :class:`~mosaic.core.run_states.RunStatus`, equal to its text; ``error`` says why it failed),
    and ``digest`` is the hex digest of every observation, action and reward (the same file,
    seed and values give the same digest). ``mean_return`` is over all its episodes,
    ``recent_mean_return`` over the last :data:`~mosaic.stepping.progress.RECENT_EPISODES`:
    "mean return (all)" and "mean return (last 100)" of ``runs list``. A run of several
    agents (multi-agent, self-play) has them per agent too, in ``agent_means`` and
    ``agent_recent_means`` (agent uid -> mean of its returns; empty for a run of one agent), as
    the summary and ``runs list`` show them: in a zero-sum game the total says nothing.
    """

    uid: str
    index: int
    seed: int
    phase: str
    status: RunStatus
    error: str | None
    episodes: int
    steps: int
    digest: str | None
    mean_return: float | None
    recent_mean_return: float | None
    wall_time: float
    params: dict[str, Any] = field(default_factory=dict)
    agent_means: dict[str, float] = field(default_factory=dict)
    agent_recent_means: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_result(cls, result: RunResult) -> RunRecord:
        """The record of an executor's result."""
        return cls(result.uid, result.index, result.seed, result.phase, result.status,
                   result.error, result.episodes, result.steps, result.digest,
                   result.mean_return, result.recent_mean, result.wall_time,
                   dict(result.params), *_per_agent(result))


def _per_agent(result: RunResult) -> tuple[dict[str, float], dict[str, float]]:
    """A run's means per agent when several agents play, as the summary gives them."""
    if len(result.agent_recent_means) < 2:
        return {}, {}
    return dict(result.agent_means), dict(result.agent_recent_means)


class Results:
    """The runs of one :func:`mosaic.run`, in run order, and the store that holds them
    (``store_path``: a SQLite file, or a database's URL).

    Iterating, ``len()`` and indexing go over :attr:`runs`. :meth:`episodes` reads their
    episodes back from the store.
    """

    #: The number of last episodes ``recent_mean_return`` is over.
    recent_episodes = RECENT_EPISODES

    def __init__(self, experiment_uid: str, runs: list[RunRecord],
                 store_path: Path | str) -> None:
        self.experiment_uid = experiment_uid
        self.runs: tuple[RunRecord, ...] = tuple(runs)
        self.store_path = store_path

    @property
    def ok(self) -> bool:
        """Whether there were runs and every one finished (or its search's pruner ended it)."""
        return bool(self.runs) and all(run.status in SUCCESSFUL_STATUSES for run in self.runs)

    def __len__(self) -> int:
        return len(self.runs)

    def __iter__(self) -> Iterator[RunRecord]:
        return iter(self.runs)

    def __getitem__(self, index: int) -> RunRecord:
        return self.runs[index]

    def __repr__(self) -> str:
        statuses: dict[str, int] = {}
        for run in self.runs:
            statuses[run.status] = statuses.get(run.status, 0) + 1
        counts = ", ".join(f"{count} {status}" for status, count in statuses.items())
        return (f"<Results of {self.experiment_uid!r}: {len(self.runs)} run(s)"
                f"{': ' + counts if counts else ''}; store {mask(self.store_path)}>")

    def episodes(self) -> pandas.DataFrame:
        """Every recorded episode of these runs as a pandas DataFrame, one row per episode.

        The columns of :meth:`mosaic.store.Store.episodes_frame`, with one column per key
        path of the sweep after ``run``; what is recorded follows the file's
        ``record_steps``. Raises :class:`~mosaic.core.errors.MissingExtra` (an ImportError
        naming the ``results`` extra) without pandas, and
        :class:`~mosaic.core.errors.StoreError` if the store cannot be read.
        """
        with open_store(self.store_path) as store:
            frame = store.episodes_frame(*(run.uid for run in self.runs))
        return self._with_sweep_columns(frame)

    def metrics(self, name: str | None = None) -> pandas.DataFrame:
        """The metrics these runs' brains and muscles reported (a learner's losses, an
        epsilon), one row per report in the order reported; only metric ``name`` if given.

        The columns of :meth:`mosaic.store.Store.metrics_frame` (``value``, and ``episode``
        and ``step``: where the run stood when it was reported), with one column per key path
        of the sweep after ``run``. Raises as :meth:`episodes` does.
        """
        with open_store(self.store_path) as store:
            frame = store.metrics_frame(*(run.uid for run in self.runs), name=name)
        return self._with_sweep_columns(frame)

    def _with_sweep_columns(self, frame: pandas.DataFrame) -> pandas.DataFrame:
        """``frame`` (whose ``run`` column holds run uids) with a column per sweep key path
        after ``run``: that run's value of it."""
        by_uid = {run.uid: run.params for run in self.runs}
        paths = list(dict.fromkeys(path for params in by_uid.values() for path in params))
        for position, path in enumerate(paths, start=1):
            frame.insert(position, path, [by_uid[uid].get(path) for uid in frame["run"]])
        return frame
