"""What an evaluation run (Script or Manual mode) produced: per episode, operator and run."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from mosaic.operators.llm_accounting import FallbackTally


@dataclass(frozen=True)
class EpisodeResult:
    """One finished episode of one operator."""

    operator_id: str
    episode_index: int
    seed: int
    total_reward: float
    length: int
    terminated: bool
    truncated: bool
    ended_by: str = "environment"


@dataclass(frozen=True)
class OperatorFailure:
    """Why an operator stopped early.

    ``phase`` is ``launch``, ``reset``, ``step``, ``episode_end`` (no ``episode_end`` followed
    the step that ended an episode) or ``fallbacks``. ``cause`` is one of ``crashed`` (the
    worker exited), ``timeout`` (silent past its timeout), ``protocol`` (a malformed reply),
    ``error`` (an ``error`` reply), ``launch`` (the worker could not be started) or
    ``fallbacks`` (too many of its actions came from an LLM fallback)."""

    operator_id: str
    phase: str
    cause: str
    message: str
    episode_index: int | None = None
    seed: int | None = None
    step_index: int | None = None
    exit_code: int | None = None


@dataclass
class OperatorResult:
    """Everything one operator did in a run."""

    operator_id: str
    display_name: str
    episodes: list[EpisodeResult] = field(default_factory=list)
    failure: OperatorFailure | None = None
    #: Where its actions came from, for an operator whose replies carry an ``llm`` account.
    llm: FallbackTally | None = None
    #: The same for a BDI worker's ``bdi`` accounts (a plan, or the fallback).
    bdi: FallbackTally | None = None

    @property
    def tallies(self) -> tuple[FallbackTally, ...]:
        """Its tallies of accounted actions (LLM, BDI) that it has."""
        return tuple(tally for tally in (self.llm, self.bdi) if tally is not None)

    @property
    def failed(self) -> bool:
        return self.failure is not None

    @property
    def episodes_done(self) -> int:
        return len(self.episodes)

    @property
    def returns(self) -> list[float]:
        return [episode.total_reward for episode in self.episodes]

    @property
    def mean_return(self) -> float:
        """Mean episode return; NaN with no finished episode."""
        return statistics.fmean(self.returns) if self.episodes else math.nan

    @property
    def std_return(self) -> float:
        """Population standard deviation of the returns (0 for one episode, NaN for none)."""
        return statistics.pstdev(self.returns) if self.episodes else math.nan

    @property
    def mean_length(self) -> float:
        return statistics.fmean(e.length for e in self.episodes) if self.episodes else math.nan


@dataclass
class ScriptResult:
    """The outcome of :func:`run_script`: per-operator results in file order (a game's, one per
    player, by its actor id ``<operator>.<player>``).

    ``run_id`` names the run; in the results store, operator ``x``'s run is ``<run_id>-x``.
    """

    uid: str
    telemetry_path: Path
    episodes_planned: int
    operators: dict[str, OperatorResult]
    run_id: str | None = None

    @property
    def ok(self) -> bool:
        """True when no operator failed."""
        return not any(result.failed for result in self.operators.values())

    @property
    def failures(self) -> list[OperatorFailure]:
        """Each failure once: the players of a game share their game's."""
        found: dict[int, OperatorFailure] = {}
        for result in self.operators.values():
            if result.failure is not None:
                found.setdefault(id(result.failure), result.failure)
        return list(found.values())


def fallback_share(result: OperatorResult) -> str | None:
    """``fallbacks/actions`` of the operator's accounted actions (its LLM and BDI tallies
    added up), or None when its replies account for none."""
    tallies = result.tallies
    if not tallies:
        return None
    return f"{sum(t.fallbacks for t in tallies)}/{sum(t.actions for t in tallies)}"
