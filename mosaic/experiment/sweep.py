"""The ``sweep:`` section: values to try at key paths of the file, expanded into points.

```yaml
sweep:
  grid:                                   # every combination of these values
    agents.0.params.learning_rate: [0.01, 0.003]
    episodes: [100, 200]
  random:                                 # `samples` draws, each combined with every grid point
    samples: 4
    seed: 1                               # default: the experiment's seed
    params:
      agents.0.params.gamma: {uniform: [0.9, 0.999]}
```

or, instead of both, an adaptive search on Optuna (:class:`SearchSweep`; the points are asked
for while the runs go, see :mod:`mosaic.orchestration.search`):

```yaml
sweep:
  search:
    samples: 20
    metric: return                        # or a metric a learner logs
    direction: maximize                   # or minimize
    sampler: tpe                          # cmaes, random; or {tpe: {n_startup_trials: 5}}
    pruner: median                        # hyperband, none; or {median: {n_warmup_steps: 10}}
    params:
      agents.0.params.learning_rate: {log_uniform: [0.0001, 0.1]}
```

Keys are key paths (:mod:`mosaic.experiment.paths`). A distribution is one of
``uniform: [low, high]``, ``log_uniform: [low, high]`` (``low > 0``), ``int: [low, high]``
(whole numbers, both ends included) or ``choice: [a, b, ...]``. The points are the grid's
combinations (the last key varying fastest) times the random draws, at most :data:`MAX_POINTS`;
each point runs ``runs`` times, with the same ``runs`` seeds as every other point, so that
points differ in their values only.
"""

from __future__ import annotations

import itertools
import math
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from mosaic.core.config_problems import Problem, StrictModel, raise_if_any, raise_problems
from mosaic.experiment.paths import PathError, parse_path

__all__ = ["MAX_POINTS", "PRUNERS", "SAMPLERS", "SEARCH_STUDY", "UNSWEPT", "Distribution",
           "RandomSweep", "SearchSweep", "SweepConfig", "search_probes", "sweep_points"]

#: The most points one sweep may expand into; each is validated as a file of its own.
MAX_POINTS = 1000
#: Top-level keys that are the same for every run of a command, and so cannot be swept.
UNSWEPT = ("uid", "runs", "sweep", "store", "curve_keys", "cpu_affinity", "tracking")
_MAX_SEED = 2**63 - 1

#: The samplers and pruners of ``search:`` (Optuna's TPE, CMA-ES and random samplers; its median
#: and Hyperband pruners, or none).
SAMPLERS = ("tpe", "cmaes", "random")
PRUNERS = ("median", "hyperband", "none")
#: The name of a search's Optuna study (Hyperband places trials in brackets by it).
SEARCH_STUDY = "mosaic-search"

Pair = Annotated[list[float], Field(min_length=2, max_length=2, description="[low, high]")]


class Distribution(StrictModel):
    """Where the values of a random sweep are drawn from: exactly one of the keys."""

    expected: ClassVar[str] = (
        "one of {uniform: [low, high]}, {log_uniform: [low, high]}, {int: [low, high]} or "
        "{choice: [a, b, ...]}"
    )

    uniform: Pair | None = Field(default=None, description="[low, high], numbers")
    log_uniform: Pair | None = Field(default=None, description="[low, high], numbers > 0")
    int_: Annotated[list[int], Field(min_length=2, max_length=2)] | None = Field(
        default=None, alias="int", description="[low, high], whole numbers")
    choice: Annotated[list[Any], Field(min_length=1)] | None = Field(
        default=None, description="a list of values to choose from")

    @model_validator(mode="before")
    @classmethod
    def _one_kind(cls, data: Any) -> Any:
        if isinstance(data, dict) and len(data) != 1:
            raise_problems(Problem((), f"expected {cls.expected}, got {len(data)} keys",
                                   "give exactly one distribution per key path"))
        return data

    @model_validator(mode="after")
    def _ordered(self) -> Distribution:
        for name, pair in (("uniform", self.uniform), ("log_uniform", self.log_uniform),
                           ("int", self.int_)):
            if pair is None:
                continue
            low, high = pair
            if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
                raise_problems(Problem((name,), f"expected [low, high] with low < high, got "
                                       f"[{low}, {high}]"))
            if name == "log_uniform" and low <= 0:
                raise_problems(Problem((name,), f"expected low > 0, got {low}",
                                       "a log-uniform range lies above 0; use uniform otherwise"))
        return self

    def draw(self, rng: np.random.Generator) -> Any:
        """One value, as a plain Python number (or the chosen value itself)."""
        if self.uniform is not None:
            return float(rng.uniform(self.uniform[0], self.uniform[1]))
        if self.log_uniform is not None:
            low, high = self.log_uniform
            return float(math.exp(rng.uniform(math.log(low), math.log(high))))
        if self.int_ is not None:
            return int(rng.integers(self.int_[0], self.int_[1], endpoint=True))
        choices = self.choice or [None]  # the before-validator admits exactly one key
        return choices[int(rng.integers(len(choices)))]


class RandomSweep(StrictModel):
    """``samples`` draws of every key path in ``params``, from a generator seeded with ``seed``."""

    expected: ClassVar[str] = "a mapping with 'samples' and 'params', and optionally 'seed'"

    samples: int = Field(ge=1, le=MAX_POINTS, description=f"a whole number from 1 to {MAX_POINTS}")
    seed: int | None = Field(default=None, ge=0, le=_MAX_SEED,
                             description="a whole number >= 0 (default: the experiment's seed)")
    params: Annotated[dict[str, Distribution], Field(min_length=1)] = Field(
        description="a mapping of key paths to distributions")


def _named_options(value: Any, names: tuple[str, ...], what: str) -> Any:
    """``value`` if it is one of ``names`` or ``{name: {option: value, ...}}``; else the
    problem. The options are Optuna's keyword arguments, checked when the search is loaded."""
    expected = (f"one of {', '.join(names)}, or {{name: {{option: value}}}} with Optuna's "
                f"keyword arguments of that {what}")
    if isinstance(value, str):
        if value not in names:
            raise_problems(Problem((), f"expected {expected}, got {value!r}",
                                   f"{what}s: {', '.join(names)}"))
        return value
    if isinstance(value, dict) and len(value) == 1:
        name, options = next(iter(value.items()))
        if name not in names:
            raise_problems(Problem((str(name),), f"expected one of {', '.join(names)}, got "
                                   f"{name!r}", f"{what}s: {', '.join(names)}"))
        if name == "none" and options:
            raise_problems(Problem((name,), "'none' takes no options"))
        if options is not None and not (isinstance(options, dict)
                                        and all(isinstance(key, str) for key in options)):
            raise_problems(Problem((name,), "expected a mapping of option names to values, "
                                   f"got {options!r}"))
        return {name: dict(options or {})}
    raise_problems(Problem((), f"expected {expected}, got {value!r}"))


class SearchSweep(StrictModel):
    """An adaptive search: ``samples`` points asked of an Optuna study seeded with ``seed``,
    which learns from what the runs of earlier points reached in ``metric``."""

    expected: ClassVar[str] = ("a mapping with 'samples' and 'params', and optionally 'seed', "
                               "'metric', 'direction', 'sampler' and 'pruner'")

    samples: int = Field(ge=1, le=MAX_POINTS, description=f"a whole number from 1 to {MAX_POINTS}")
    seed: int | None = Field(default=None, ge=0, le=_MAX_SEED,
                             description="a whole number >= 0 (default: the experiment's seed)")
    metric: str = Field(default="return", min_length=1,
                        description="'return' or the name of a metric a learner logs")
    direction: Literal["maximize", "minimize"] = Field(
        default="maximize", description="'maximize' or 'minimize'")
    sampler: Any = Field(default="tpe", description=f"one of {', '.join(SAMPLERS)}")
    pruner: Any = Field(default="median", description=f"one of {', '.join(PRUNERS)}")
    params: Annotated[dict[str, Distribution], Field(min_length=1)] = Field(
        description="a mapping of key paths to distributions")

    @field_validator("sampler")
    @classmethod
    def _a_sampler(cls, value: Any) -> Any:
        return _named_options(value, SAMPLERS, "sampler")

    @field_validator("pruner")
    @classmethod
    def _a_pruner(cls, value: Any) -> Any:
        return _named_options(value, PRUNERS, "pruner")

    @property
    def sampler_name(self) -> str:
        """The sampler's name (``tpe``, ``cmaes``, ``random``)."""
        return self.sampler if isinstance(self.sampler, str) else next(iter(self.sampler))

    @property
    def sampler_options(self) -> dict[str, Any]:
        """The sampler's keyword arguments given in the file (none by default)."""
        return {} if isinstance(self.sampler, str) else dict(next(iter(self.sampler.values())))

    @property
    def pruner_name(self) -> str:
        """The pruner's name (``median``, ``hyperband``, ``none``)."""
        return self.pruner if isinstance(self.pruner, str) else next(iter(self.pruner))

    @property
    def pruner_options(self) -> dict[str, Any]:
        """The pruner's keyword arguments given in the file (none by default)."""
        return {} if isinstance(self.pruner, str) else dict(next(iter(self.pruner.values())))


class SweepConfig(StrictModel):
    """The ``sweep:`` section: a ``grid`` of values, ``random`` draws, or both; or a
    ``search``."""

    expected: ClassVar[str] = "a mapping with 'grid' and/or 'random', or 'search'"

    grid: Annotated[dict[str, Annotated[list[Any], Field(min_length=1)]],
                    Field(min_length=1)] | None = Field(
        default=None, description="a mapping of key paths to lists of values")
    random: RandomSweep | None = Field(default=None, description=RandomSweep.expected)
    search: SearchSweep | None = Field(default=None, description=SearchSweep.expected)

    @model_validator(mode="after")
    def _paths(self) -> SweepConfig:
        if self.grid is None and self.random is None and self.search is None:
            raise_problems(Problem((), "expected 'grid', 'random' or both, or 'search', got "
                                   "none of them", "see the README's section on sweeps"))
        if self.search is not None and (self.grid is not None or self.random is not None):
            raise_problems(Problem(("search",), "a search cannot be combined with 'grid' or "
                                   "'random'", "give the search's keys as distributions in "
                                   "search.params ({choice: [...]} for a list of values), or "
                                   "run the grid as a sweep of its own"))
        problems: list[Problem] = []
        seen: set[str] = set()
        for section, paths in self._sections():
            for path in paths:
                loc = (*section, path)
                try:
                    parts = parse_path(path)
                except PathError as error:
                    problems.append(Problem(loc, error.message, error.hint))
                    continue
                if parts[0] in UNSWEPT:
                    problems.append(Problem(loc, f"'{parts[0]}' cannot be swept: it is the same "
                                            "for every run of a command",
                                            f"swept keys may be anything but {', '.join(UNSWEPT)}"))
                elif path in seen:
                    problems.append(Problem(loc, "this key path is already in the grid",
                                            "sweep a key path in grid or random, not both"))
                seen.add(path)
        count = self.point_count()
        if count > MAX_POINTS:
            problems.append(Problem((), f"the sweep expands into {count:,} points, more than "
                                    f"{MAX_POINTS:,}", "sweep fewer values"))
        raise_if_any(problems)
        return self

    def _sections(self) -> list[tuple[tuple[str, ...], list[str]]]:
        sections: list[tuple[tuple[str, ...], list[str]]] = []
        if self.grid is not None:
            sections.append((("grid",), list(self.grid)))
        if self.random is not None:
            sections.append((("random", "params"), list(self.random.params)))
        if self.search is not None:
            sections.append((("search", "params"), list(self.search.params)))
        return sections

    def point_count(self) -> int:
        """How many points the sweep expands into (a search: how many it asks for)."""
        if self.search is not None:
            return self.search.samples
        count = math.prod(len(values) for values in (self.grid or {}).values())
        return count * (self.random.samples if self.random is not None else 1)

    def loc_of(self, path: str) -> tuple[str, ...]:
        """Where ``path`` is written in the section, from the top of the file."""
        if self.grid is not None and path in self.grid:
            return ("sweep", "grid", path)
        if self.search is not None:
            return ("sweep", "search", "params", path)
        return ("sweep", "random", "params", path)


def search_probes(search: SearchSweep) -> list[dict[str, Any]]:
    """Points of ``search`` that reach each end of every distribution and every choice: what
    validation tries before anything runs, since the search's own points come while it runs.
    """
    ends: dict[str, list[Any]] = {}
    for path, distribution in search.params.items():
        pair = distribution.uniform or distribution.log_uniform
        if pair is not None:
            ends[path] = [float(pair[0]), float(pair[1])]
        elif distribution.int_ is not None:
            ends[path] = [int(distribution.int_[0]), int(distribution.int_[1])]
        else:
            ends[path] = list(distribution.choice or [None])
    count = max(len(values) for values in ends.values())
    return [{path: values[index % len(values)] for path, values in ends.items()}
            for index in range(count)]


def sweep_points(sweep: SweepConfig, experiment_seed: int) -> list[dict[str, Any]]:
    """The sweep's points, in order: each a mapping of key paths to values, in file order.

    Grid combinations come first in the order of the grid's keys, the last varying fastest;
    each is combined with every random draw. The draws are the same for every grid point and
    depend only on ``random.seed`` (default ``experiment_seed``) and the ``random`` section.
    A search's points are asked for while it runs: here, its :func:`search_probes`.
    """
    if sweep.search is not None:
        return search_probes(sweep.search)
    grid = sweep.grid or {}
    combinations = [dict(zip(grid, values, strict=True))
                    for values in itertools.product(*grid.values())]
    draws: list[dict[str, Any]] = [{}]
    if sweep.random is not None:
        seed = experiment_seed if sweep.random.seed is None else sweep.random.seed
        rng = np.random.default_rng(seed)
        draws = [{path: distribution.draw(rng) for path, distribution in
                  sweep.random.params.items()} for _ in range(sweep.random.samples)]
    return [{**combination, **draw} for combination in combinations for draw in draws]
