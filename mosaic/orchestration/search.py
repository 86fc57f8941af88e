"""A sweep's search (``sweep: {search: ...}``): the points asked of Optuna in waves, and told.

The command holds one Optuna study, seeded with the search's ``seed`` (default: the
experiment's). It asks for a wave of points (as many as keep ``jobs`` runs busy:
``ceil(jobs / runs)``), runs every run of the wave, then tells the study how each point did, in
the order they were asked for. A run of the wave is given a snapshot of the points that ended
before its wave (:class:`~mosaic.messages.SearchPlan`), from which its pruner decides at each
episode end (:mod:`mosaic.orchestration.pruning`). Nothing depends on which run ends first:
the same file, seed and ``jobs`` ask for the same points and prune the same runs.

A point's value is the mean, over its runs (its seeds), of the metric each reported last; what
it reported at an episode end is the mean over the runs that reported there. A point with a
pruned run is told as pruned, with one that did not finish (failed, cancelled) as failed.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from mosaic.core.errors import ConfigError
from mosaic.core.run_states import SUCCESSFUL_STATUSES, RunStatus
from mosaic.experiment.search import build_pruner, build_sampler, distribution, optuna, value_of
from mosaic.experiment.sweep import SEARCH_STUDY
from mosaic.messages import RunConfig, SearchTrial
from mosaic.orchestration.pruning import replay

if TYPE_CHECKING:
    from mosaic.experiment import Experiment

__all__ = ["Best", "Search", "best_point"]

log = logging.getLogger(__name__)


class RunResult(Protocol):
    """What the search reads of how a run ended (the executor's RunResult)."""

    @property
    def index(self) -> int: ...
    @property
    def phase(self) -> str: ...
    @property
    def status(self) -> RunStatus: ...
    @property
    def params(self) -> dict[str, Any]: ...
    @property
    def reported(self) -> tuple[tuple[int, float], ...]: ...


@dataclass(frozen=True)
class Best:
    """The best point of a search: its values by key path, its value (the mean over its
    runs), the metric and how many runs it is the mean of."""

    params: dict[str, Any]
    value: float
    metric: str
    runs: int

    def describe(self) -> str:
        """One line: ``Best point: key=value ...: metric value (mean of N runs)``."""
        values = " ".join(f"{path}={_shown(value)}" for path, value in self.params.items())
        return (f"Best point: {values}: {self.metric} {self.value:.4g} "
                f"(mean of {self.runs} run(s))")


class Search:
    """The command's side of a search over ``experiment`` with ``jobs`` runs at once.

    :meth:`ask` gives the next wave (the experiment with the wave's points added, and their
    indexes), :meth:`plan` each run's config, :meth:`tell` how the wave's runs ended.
    Raises :class:`~mosaic.core.errors.MissingExtra` without Optuna.
    """

    def __init__(self, experiment: Experiment, jobs: int) -> None:
        search = experiment.search
        if search is None:
            raise ValueError("the experiment's sweep is not a search")
        self.settings = search
        self.experiment = experiment
        self.wave = max(1, math.ceil(jobs / experiment.runs))
        module = optuna()
        seed = experiment.seed if search.seed is None else search.seed
        self.study = module.create_study(
            study_name=SEARCH_STUDY, direction=search.direction,
            sampler=build_sampler(search.sampler_name, search.sampler_options, seed),
            pruner=build_pruner(search.pruner_name, search.pruner_options))
        self._distributions = {path: distribution(spec) for path, spec in search.params.items()}
        self._asked: list[Any] = []  # Optuna's trial of each point, in order
        #: The points that ended, as the runs of later waves are given them.
        self.trials: list[SearchTrial] = []
        #: Those that ended before the current wave: what its runs are given.
        self._before_wave: tuple[SearchTrial, ...] = ()
        #: Why a point's runs cannot run (a value the file cannot take), by point index.
        self.problems: dict[int, str] = {}

    def ask(self) -> list[int]:
        """The indexes of the next wave's points (none once every point was asked for);
        :attr:`experiment` holds them after this returns. A point the file cannot take (a
        value a key path refuses) has the file's own settings and a problem in
        :attr:`problems`, which fails its runs."""
        from mosaic.experiment import SweepPoint
        from mosaic.experiment.loader import search_point

        first = len(self._asked)
        count = min(self.wave, self.settings.samples - first)
        self._before_wave = tuple(self.trials)
        points = list(self.experiment.points)
        for _ in range(count):
            trial = self.study.ask(self._distributions)
            values = {path: value_of(spec, trial.params[path])
                      for path, spec in self.settings.params.items()}
            try:
                points.append(search_point(self.experiment, values))
            except ConfigError as error:
                self.problems[len(points)] = f"{error.location}: {error.message}"
                points.append(SweepPoint(params=values, settings=self.experiment))
            self._asked.append(trial)
        self.experiment = self.experiment.model_copy(update={"points": tuple(points)})
        return list(range(first, first + count))

    def plan(self, config: RunConfig) -> RunConfig:
        """``config`` with what its run needs of the search: in the last phase, the points
        that ended before its wave; no search in an earlier phase (a point's value is its
        last phase's)."""
        if config.search is None:
            return config
        if config.phase_index < config.phases - 1:
            return dataclasses.replace(config, search=None)
        return dataclasses.replace(config, search=dataclasses.replace(
            config.search, trials=self._before_wave))

    def tell(self, point: int, results: Sequence[RunResult]) -> None:
        """Tell the study how point ``point``'s runs (their last phases) ended."""
        module = optuna()
        TrialState = module.trial.TrialState
        trial = self._asked[point]
        last_phase = self.experiment.phase_names()[-1]
        last = [result for result in results
                if result.status != RunStatus.FINISHED or result.phase == last_phase]
        statuses = {result.status for result in last}
        steps = _mean_by_step([result.reported for result in last])
        finals = [result.reported[-1][1] for result in last if result.reported]
        state: Literal["complete", "pruned", "fail"]
        value: float | None
        if not last or statuses - SUCCESSFUL_STATUSES:
            state, value = "fail", None
        elif RunStatus.PRUNED in statuses:
            state, value = "pruned", None
        elif len(finals) < len(last):
            log.warning("point %d of the search: a run reported no %s; it counts as failed",
                        point + 1, self.settings.metric)
            state, value = "fail", None
        else:
            state, value = "complete", sum(finals) / len(finals)
        for step, reported in steps.items():
            trial.report(reported, step)
        if state == "complete":
            self.study.tell(trial, value)
        else:
            self.study.tell(trial, state=getattr(TrialState, state.upper()))
        plan = self.plan(self.experiment.run_config(point * self.experiment.runs,
                                                    len(self.experiment.phase_names()) - 1))
        notes = {}
        if plan.search is not None and state != "fail" and steps:
            notes = replay(plan.search, steps.items())  # under the snapshot its runs had
        self.trials.append(SearchTrial(trial.number, state, value, tuple(steps),
                                       tuple(steps.values()), notes))


def best_point(results: Sequence[RunResult], metric: str, direction: str,
               phase: str) -> Best | None:
    """The best point among ``results`` (of phase ``phase``, the last) whose runs all
    finished, none pruned: the mean of what its runs reported last of ``metric``, the highest
    (``direction`` ``maximize``) or the lowest."""
    points: dict[str, list[RunResult]] = {}
    for result in results:
        if result.phase == phase or result.status != RunStatus.FINISHED:
            points.setdefault(repr(sorted(result.params.items())), []).append(result)
    best: Best | None = None
    for members in points.values():
        if any(result.status != RunStatus.FINISHED or not result.reported for result in members):
            continue
        value = sum(result.reported[-1][1] for result in members) / len(members)
        better = best is None or (value > best.value if direction == "maximize"
                                  else value < best.value)
        if better:
            best = Best(dict(members[0].params), value, metric, len(members))
    return best


def _mean_by_step(reported: Sequence[Sequence[tuple[int, float]]]) -> dict[int, float]:
    """At each step, the mean of what the runs that reported there reported, by step."""
    sums: dict[int, list[float]] = {}
    for pairs in reported:
        for step, value in pairs:
            sums.setdefault(step, []).append(value)
    return {step: sum(values) / len(values) for step, values in sorted(sums.items())}


def _shown(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


