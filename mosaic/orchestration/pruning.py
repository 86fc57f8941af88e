"""Whether a run of a search's point ends early: its metric at each episode end, and the pruner.

A run of a search (:class:`~mosaic.messages.SearchPlan` in its config) reports its metric at
every episode end: ``return``, the mean return of its recent episodes (the last
:data:`~mosaic.stepping.progress.RECENT_EPISODES`), or the last value its learners logged
of a metric of that name. The run's pruner is Optuna's, on a study of its own held here: the
trials that ended before the run's wave (the plan's snapshot) and the run itself. So the
decision depends on what the run reported and on that snapshot only, and is the same in a
thread, a process or on a Ray node, at any speed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from mosaic.experiment.search import build_pruner, optuna
from mosaic.messages import SearchPlan, SearchTrial
from mosaic.stepping.progress import Progress

__all__ = ["Pruning", "replay"]

_STATES = {"complete": "COMPLETE", "pruned": "PRUNED", "fail": "FAIL"}


class Pruning:
    """The pruner of one run of a search's point (see the module docstring).

    Raises :class:`~mosaic.core.errors.MissingExtra` without Optuna.
    """

    def __init__(self, plan: SearchPlan) -> None:
        self.plan = plan
        module = optuna()
        self._storage = module.storages.InMemoryStorage()
        self._study = module.create_study(storage=self._storage, study_name=plan.study,
                                          direction=plan.direction,
                                          pruner=build_pruner(plan.pruner, plan.options),
                                          sampler=module.samplers.RandomSampler(0))
        TrialState = module.trial.TrialState
        numbered = {trial.number: trial for trial in plan.trials}
        # Trials numbered as in the command's study: Hyperband's brackets go by the number.
        # Those of the run's own wave are running elsewhere: failed trials stand in for them.
        for number in range(plan.trial):
            trial = numbered.get(number, SearchTrial(number, "fail"))
            values = dict(zip(trial.steps, trial.values, strict=True))
            self._study.add_trial(module.trial.create_trial(
                state=getattr(TrialState, _STATES[trial.state]),
                value=trial.value if trial.state == "complete" else None,
                intermediate_values=values, system_attrs=dict(trial.notes)))
        self._study.add_trial(module.trial.create_trial(state=TrialState.RUNNING))
        self._trial_id = self._study.get_trials(deepcopy=False)[-1]._trial_id
        #: The last value of each metric the run's learners logged.
        self._logged: dict[str, float] = {}

    def logged(self, rows: Iterable[tuple[Any, ...]]) -> None:
        """Take the metric rows the run stamped (see the ledger's ``metric_rows``)."""
        metric = self.plan.metric
        for row in rows:
            if row[3] == metric:
                self._logged[metric] = float(row[4])

    def value(self, progress: Progress) -> float | None:
        """The run's metric now (``None``: nothing to report yet)."""
        if self.plan.metric == "return":
            return progress.recent_mean
        return self._logged.get(self.plan.metric)

    def reached(self, progress: Progress) -> str | None:
        """An episode ended: report the metric, and return why the run is pruned, if it is."""
        value = self.value(progress)
        if value is None or math.isnan(value):
            return None
        step = progress.episodes
        progress.reported.append((step, value))
        if self.decide(step, value):
            return (f"pruned by the {self.plan.pruner} pruner: {self.plan.metric} {value:.4g} "
                    f"at episode {step}")
        return None

    def decide(self, step: int, value: float) -> bool:
        """Report ``value`` at ``step``; whether the pruner prunes the run there."""
        self._storage.set_trial_intermediate_value(self._trial_id, step, value)
        return bool(self._study.pruner.prune(self._study, self._storage.get_trial(self._trial_id)))

    def notes(self) -> dict[str, float]:
        """What the pruner noted of the run (Hyperband's rungs)."""
        attrs = self._storage.get_trial(self._trial_id).system_attrs
        return {key: float(value) for key, value in attrs.items()
                if isinstance(value, int | float)}


def replay(plan: SearchPlan, reported: Iterable[tuple[int, float]]) -> dict[str, float]:
    """What the pruner notes of a trial that reported ``reported`` (step, value) under
    ``plan``, its decisions made again in order until the first that prunes: the same as in
    its run, since they depend on nothing else."""
    pruning = Pruning(plan)
    for step, value in reported:
        if pruning.decide(step, value):
            break
    return pruning.notes()
