"""A search's pruning decision (mosaic.orchestration.pruning) and its waves of points
(mosaic.orchestration.search) on their own: no run, no store, no timing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from mosaic.experiment import experiment_from_data
from mosaic.messages import SearchPlan, SearchTrial
from mosaic.orchestration.pruning import Pruning, replay
from mosaic.orchestration.search import Search, best_point
from mosaic.stepping.ledger import Ledger
from mosaic.stepping.progress import Progress
from mosaic.stepping.termination import Termination

pytestmark = pytest.mark.timeout(60)

STEPS = tuple(range(1, 9))


def _completed(number: int, value: float) -> SearchTrial:
    return SearchTrial(number, "complete", value, STEPS, tuple(value for _ in STEPS))


def _plan(trials: tuple[SearchTrial, ...], trial: int, pruner: str = "median",
          metric: str = "return", **options: Any) -> SearchPlan:
    return SearchPlan(metric, "maximize", pruner, {"n_startup_trials": 2, **options},
                      "mosaic-search", trial, trials)


def _progress(*returns: float) -> Progress:
    progress = Progress()
    for value in returns:
        progress.episodes += 1
        progress.recent_returns.append(value)
    return progress


def test_a_run_below_the_median_of_the_earlier_points_is_pruned_at_that_episode_end():
    plan = _plan((_completed(0, 20.0), _completed(1, 30.0)), trial=3)  # 2: in the run's wave
    low, high = Pruning(plan), Pruning(plan)
    assert low.reached(_progress(10.0)) is not None
    reason = low.reached(_progress(10.0))
    assert reason == "pruned by the median pruner: return 10 at episode 1"
    assert high.reached(_progress(40.0)) is None
    # The mean of the recent returns is what is reported, at each episode end.
    progress = _progress(40.0, 41.0)
    assert high.reached(progress) is None and progress.reported == [(2, 40.5)]


def test_too_few_earlier_points_prune_nothing():
    plan = _plan((_completed(0, 20.0),), trial=1)  # n_startup_trials: 2
    assert Pruning(plan).reached(_progress(1.0)) is None
    assert Pruning(_plan((), trial=0)).reached(_progress(1.0)) is None
    # No pruner: never.
    none = SearchPlan("return", "maximize", "none", {}, "mosaic-search", 2,
                      (_completed(0, 20.0), _completed(1, 30.0)))
    assert Pruning(none).reached(_progress(1.0)) is None


def test_a_learners_metric_is_its_last_logged_value():
    plan = _plan((_completed(0, 20.0), _completed(1, 30.0)), trial=2, metric="score")
    pruning, kept = Pruning(plan), Pruning(plan)
    progress = _progress(1.0)
    assert pruning.reached(progress) is None, "nothing logged yet: nothing to report"
    assert progress.reported == []
    pruning.logged([(1, "learner", "learner", "score", 45.0, 0, 0, 0.0),
                    (1, "learner", "learner", "loss", 50.0, 0, 0, 0.0),
                    (1, "learner", "learner", "score", 5.0, 0, 0, 0.0)])
    progress = _progress(1.0, 1.0)
    assert pruning.reached(progress) == "pruned by the median pruner: score 5 at episode 2"
    assert progress.reported == [(2, 5.0)]
    kept.logged([(1, "learner", "learner", "score", 45.0, 0, 0, 0.0)])
    assert kept.reached(_progress(1.0)) is None


@dataclass
class _Loop:
    uid: str = "cartpole"
    finished: bool = False
    position: tuple[int, int, int] | None = None
    records: list[Any] = field(default_factory=list)


def test_the_ledger_ends_every_loop_of_a_pruned_run_and_says_why():
    progress = Progress()
    plan = _plan((_completed(0, 20.0), _completed(1, 30.0)), trial=2)
    ledger = Ledger(1, progress, Termination.from_spec(None), "", lambda: None, None,
                    pruning=Pruning(plan))
    loops = [_Loop(), _Loop("other")]
    ledger.loops = loops  # type: ignore[assignment]
    ledger.episode_ended("cartpole", 26.0)  # above the median (25) of the earlier points
    assert not progress.pruned and not any(loop.finished for loop in loops)
    pruned = Progress()
    ledger = Ledger(1, pruned, Termination.from_spec(None), "", lambda: None, None,
                    pruning=Pruning(plan))
    ledger.loops = loops  # type: ignore[assignment]
    ledger.episode_ended("cartpole", 10.0)
    assert pruned.pruned and all(loop.finished for loop in loops)
    assert pruned.ended_early == ("pruned by the median pruner: return 10 at episode 1 "
                                  "after 1 episodes")
    ledger.episode_ended("other", 40.0)  # the rest of a round under way: counted only
    assert pruned.reported == [(1, 10.0)] and pruned.episodes == 2


def test_hyperband_notes_of_a_replayed_trial_are_those_of_its_run():
    trials = tuple(_completed(number, 10.0 * number) for number in range(6))
    plan = SearchPlan("return", "maximize", "hyperband", {"min_resource": 1,
                      "reduction_factor": 2}, "mosaic-search", 7, trials)
    run = Pruning(plan)
    reported = [(step, 25.0) for step in STEPS]
    decided = [run.decide(step, value) for step, value in reported]
    pruned_at = decided.index(True) if True in decided else len(decided) - 1
    assert replay(plan, reported) == run.notes()
    assert run.notes(), "Hyperband notes the rungs a trial completed"
    assert replay(plan, reported[:pruned_at + 1]) == run.notes()


CARTPOLE = {
    "uid": "search", "seed": 4, "runs": 2, "episodes": 2,
    "environments": [{"uid": "cartpole", "env": "gymnasium:CartPole-v1"}],
    "agents": [{"uid": "random", "brain": "mosaic.agents:NoOpBrain",
                "muscle": "mosaic.agents:RandomMuscle"}],
    "sweep": {"search": {"samples": 5, "params": {"max_steps": {"int": [2, 40]}}}},
}


def _points(jobs: int, seed: int | None = None) -> list[list[dict[str, Any]]]:
    data = {**CARTPOLE, "sweep": {"search": {**CARTPOLE["sweep"]["search"], "seed": seed}}}
    search = Search(experiment_from_data(data), jobs)
    waves = []
    while points := search.ask():
        waves.append([search.experiment.points[point].params for point in points])
        for point in points:
            search.tell(point, [])  # no run: failed points
    return waves


def test_points_are_asked_for_in_waves_that_keep_the_jobs_busy_the_same_for_a_seed():
    # 2 runs (seeds) a point: --jobs 4 asks for 2 points at a time, --jobs 1 for 1.
    waves = _points(4)
    assert [len(wave) for wave in waves] == [2, 2, 1]
    assert [len(wave) for wave in _points(1)] == [1] * 5
    assert _points(4) == waves
    assert _points(4, seed=99) != waves
    assert all(2 <= point["max_steps"] <= 40 for wave in waves for point in wave)


@dataclass(frozen=True)
class _Result:
    index: int
    params: dict[str, Any]
    status: str = "finished"
    reported: tuple[tuple[int, float], ...] = ()
    phase: str = "main"


def test_the_best_point_is_the_mean_of_its_runs_and_a_pruned_point_is_never_it():
    results = [
        _Result(0, {"x": 1}, reported=((1, 5.0), (2, 10.0))),
        _Result(1, {"x": 1}, reported=((1, 5.0), (2, 20.0))),
        _Result(2, {"x": 2}, reported=((2, 14.0),)),
        _Result(3, {"x": 2}, reported=((2, 15.0),)),
        _Result(4, {"x": 3}, reported=((1, 90.0),)),
        _Result(5, {"x": 3}, status="pruned", reported=((1, 90.0),)),
    ]
    best = best_point(results, "return", "maximize", "main")
    assert best is not None and (best.params, best.value, best.runs) == ({"x": 1}, 15.0, 2)
    assert best.describe() == "Best point: x=1: return 15 (mean of 2 run(s))"
    lowest = best_point(results, "return", "minimize", "main")
    assert lowest is not None and lowest.params == {"x": 2} and lowest.value == 14.5


def test_a_waves_runs_are_given_the_points_that_ended_before_it_and_no_other():
    search = Search(experiment_from_data(CARTPOLE), 4)  # 2 runs a point: waves of 2 points
    first = search.ask()
    plans = [search.plan(search.experiment.run_config(point * 2 + 1)).search
             for point in first]
    assert [(plan.trial, plan.trials) for plan in plans if plan] == [(0, ()), (1, ())]
    search.tell(0, [_Result(0, {}, reported=((1, 5.0), (2, 7.0))),
                    _Result(1, {}, reported=((1, 9.0),))])
    search.tell(1, [_Result(2, {}, status="pruned", reported=((1, 1.0),)),
                    _Result(3, {}, reported=((1, 2.0), (2, 2.0)))])
    # Told after its wave, not before: the second point's runs were not given the first.
    plan = search.plan(search.experiment.run_config(3)).search
    assert plan is not None and plan.trials == ()
    second = search.ask()
    plan = search.plan(search.experiment.run_config(second[0] * 2)).search
    assert plan is not None and plan.trial == 2
    # A point's value is the mean of what its runs reported last (7 and 9); its reports the
    # mean at each episode end.
    assert [(t.number, t.state, t.value, t.steps, t.values) for t in plan.trials] == [
        (0, "complete", 8.0, (1, 2), (7.0, 7.0)), (1, "pruned", None, (1, 2), (1.5, 2.0))]
