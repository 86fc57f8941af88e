"""A search's Optuna parts, built from the file: its sampler, its pruner and its distributions.

Optuna is the ``search`` extra: every function here imports it, and raises
:class:`~mosaic.core.errors.MissingExtra` naming the extra without it. Nothing else of mosaic
imports Optuna, so a file without ``search:`` never needs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mosaic.core.extras import require
from mosaic.experiment.sweep import Distribution

if TYPE_CHECKING:
    from optuna.distributions import BaseDistribution
    from optuna.pruners import BasePruner
    from optuna.samplers import BaseSampler

__all__ = ["SEARCH_EXTRA", "build_pruner", "build_sampler", "distribution", "optuna", "value_of"]

#: The mosaic extra that installs Optuna.
SEARCH_EXTRA = "search"


def optuna() -> Any:
    """The ``optuna`` module, its own log quietened (mosaic says what the search does);
    :class:`~mosaic.core.errors.MissingExtra` without it."""
    module = require("optuna", "a sweep's search", SEARCH_EXTRA)
    module.logging.set_verbosity(module.logging.WARNING)
    return module


def build_sampler(name: str, options: Mapping[str, Any], seed: int) -> BaseSampler:
    """Optuna's sampler ``name`` (``tpe``, ``cmaes`` or ``random``) with ``options`` (its
    keyword arguments), seeded with ``seed`` unless the options say otherwise.

    Raises TypeError or ValueError for options the sampler does not take.
    """
    samplers = optuna().samplers
    if name == "cmaes":  # Optuna imports it only once the sampler samples
        require("cmaes", "the search's cmaes sampler", SEARCH_EXTRA)
    kinds = {"tpe": samplers.TPESampler, "cmaes": samplers.CmaEsSampler,
             "random": samplers.RandomSampler}
    sampler: BaseSampler = kinds[name](**{"seed": seed, **options})
    return sampler


def build_pruner(name: str, options: Mapping[str, Any]) -> BasePruner:
    """Optuna's pruner ``name`` (``median``, ``hyperband`` or ``none``) with ``options``.

    Raises TypeError or ValueError for options the pruner does not take.
    """
    pruners = optuna().pruners
    kinds = {"median": pruners.MedianPruner, "hyperband": pruners.HyperbandPruner,
             "none": pruners.NopPruner}
    pruner: BasePruner = kinds[name](**options)
    return pruner


def distribution(spec: Distribution) -> BaseDistribution:
    """The Optuna distribution of ``spec``; a choice is drawn as its index, since Optuna's
    categories hold plain values only (see :func:`value_of`)."""
    optuna()
    from optuna import distributions

    if spec.uniform is not None:
        return distributions.FloatDistribution(spec.uniform[0], spec.uniform[1])
    if spec.log_uniform is not None:
        return distributions.FloatDistribution(spec.log_uniform[0], spec.log_uniform[1],
                                               log=True)
    if spec.int_ is not None:
        return distributions.IntDistribution(spec.int_[0], spec.int_[1])
    return distributions.CategoricalDistribution(list(range(len(spec.choice or [None]))))


def value_of(spec: Distribution, drawn: Any) -> Any:
    """The value a point gets from what Optuna drew for ``spec``, as a plain Python value."""
    if spec.choice is not None:
        return spec.choice[int(drawn)]
    if spec.int_ is not None:
        return int(drawn)
    return float(drawn)
