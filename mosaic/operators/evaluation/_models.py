"""The pydantic models of an evaluation file: strict and frozen.

:mod:`mosaic.operators.evaluation.schema` describes the file and validates it with these models;
each operator's ``settings`` are checked with :data:`mosaic.operators.api.settings.SETTINGS_MODELS`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, PrivateAttr, field_validator

from mosaic.core.config_problems import StrictModel, raise_if_any
from mosaic.core.seeding import operator_seed
from mosaic.operators.api.config import OPERATOR_TYPES
from mosaic.operators.api.kinds import type_problems
from mosaic.operators.llm_accounting import DEFAULT_MAX_FALLBACK_FRACTION

NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"
_NAME = "made of letters, digits, '_', '-' and '.', starting with a letter, digit or '_'"


class TimeoutsSpec(StrictModel):
    """Seconds to wait for a worker before it is declared silent (and failed)."""

    step: Annotated[float, Field(gt=0, description="a number > 0 (seconds per step reply)")] = 10.0
    reset: Annotated[float, Field(gt=0, description="a number > 0 (seconds per reset)")] = 30.0
    stop: Annotated[float, Field(gt=0, description="a number > 0 (seconds to stop)")] = 5.0


_TYPE = Field(description="one of " + ", ".join(OPERATOR_TYPES) + " or a plug-in's type")


class _Worker(StrictModel):
    """What names a worker: its ``type`` (its settings checked against it), a display name, its
    settings, and the command of a ``command`` worker."""

    type: Annotated[str | None, _TYPE] = None
    display_name: str | None = None
    settings: dict[str, Any] = Field(
        default_factory=dict, description="a mapping of type-specific worker settings"
    )
    command: Annotated[
        list[str] | None,
        Field(min_length=1, description="the worker program and its arguments, as a list"),
    ] = None

    @field_validator("type")
    @classmethod
    def _known(cls, kind: str | None) -> str | None:
        if kind is not None:
            raise_if_any(type_problems(kind, ()))
        return kind


class PlayerSpec(_Worker):
    """One player of a game operator: the worker that chooses that player's actions."""

    type: Annotated[str, _TYPE]


class OperatorSpec(_Worker):
    """One operator of an evaluation: a worker subprocess with its own environment instance
    (``type``), or a multi-agent game the driver owns with one worker per player
    (``players``)."""

    id: Annotated[
        str, Field(pattern=NAME_PATTERN, description=f"a unique operator id {_NAME}")
    ]
    env: Annotated[
        str, Field(min_length=1, description="a Gymnasium environment id, e.g. CartPole-v1, or "
                                             "a PettingZoo game, e.g. pettingzoo:classic.chess_v6")
    ]
    players: Annotated[
        dict[str, PlayerSpec] | None,
        Field(min_length=1, description="a mapping of each player of the game to its worker"),
    ] = None
    env_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="a mapping of keyword arguments for gymnasium.make"
    )

    @property
    def label(self) -> str:
        """``display_name``, or the id when there is none."""
        return self.display_name or self.id

    @property
    def is_game(self) -> bool:
        """True for a multi-agent game (``players``): the driver owns the environment."""
        return self.players is not None

    @property
    def kind(self) -> str:
        """``type``, or ``game`` for a multi-agent game."""
        return self.type if self.type is not None else "game"


class EvaluationConfig(StrictModel):
    """A validated evaluation file. Build it with :func:`load_evaluation`."""

    uid: Annotated[
        str, Field(pattern=NAME_PATTERN, description=f"a run name {_NAME}, e.g. cartpole-eval")
    ]
    operators: Annotated[
        list[OperatorSpec], Field(min_length=1, description="a list of operator entries")
    ]
    seeds: Annotated[
        list[Annotated[int, Field(ge=0)]],
        Field(min_length=1, description="a list of seeds, each a whole number >= 0"),
    ]
    episodes: Annotated[
        int | None, Field(ge=1, description="a whole number >= 1 (episodes per operator)")
    ] = None
    seed: Annotated[
        int | None,
        Field(ge=0, lt=2**64, description="a whole number >= 0 (the evaluation's own seed)"),
    ] = None
    environment_mode: Annotated[
        Literal["procedural", "fixed"],
        Field(description="procedural (a new seed each episode) or fixed (one seed always)"),
    ] = "procedural"
    step_pacing: Annotated[
        float, Field(ge=0, description="a number >= 0 (seconds between steps; 0: no pause)")
    ] = 0.0
    max_steps: Annotated[
        int, Field(ge=0, description="a whole number >= 0 (steps per episode; 0: no limit)")
    ] = 0
    timeouts: TimeoutsSpec = TimeoutsSpec()
    max_fallback_fraction: Annotated[
        float,
        Field(ge=0, le=1, description="a number from 0 to 1 (the share of an LLM operator's "
                                      "actions that may come from its fallback)"),
    ] = DEFAULT_MAX_FALLBACK_FRACTION
    telemetry: Annotated[
        str | None, Field(min_length=1, description="a directory or a .jsonl file path")
    ] = None
    _source: str = PrivateAttr(default="<memory>")

    @property
    def source(self) -> str:
        """The file this configuration was read from (``<memory>`` when built from data)."""
        return self._source

    @property
    def episode_count(self) -> int:
        """Episodes per operator: ``episodes``, or its default for the mode."""
        if self.episodes is not None:
            return self.episodes
        return len(self.seeds) if self.environment_mode == "procedural" else 1

    def seed_for_episode(self, episode_index: int) -> int:
        """The reset seed of episode ``episode_index`` (0-based), the same for every operator.

        ``fixed``: always ``seeds[0]``. ``procedural``: ``seeds[k]`` while the list lasts, then a
        seed derived from the whole list and ``k`` with NumPy's ``SeedSequence`` (stable across
        platforms and NumPy versions), so longer runs stay reproducible.
        """
        if episode_index < 0:
            raise ValueError(f"episode_index must be >= 0, got {episode_index}")
        if self.environment_mode == "fixed":
            return self.seeds[0]
        if episode_index < len(self.seeds):
            return self.seeds[episode_index]
        sequence = np.random.SeedSequence(entropy=list(self.seeds), spawn_key=(episode_index,))
        return int(sequence.generate_state(1, dtype=np.uint32)[0])

    @property
    def run_seed(self) -> int:
        """The evaluation's own seed: ``seed``, else one derived from the list of ``seeds``."""
        if self.seed is not None:
            return self.seed
        sequence = np.random.SeedSequence(entropy=list(self.seeds))
        return int(sequence.generate_state(1, dtype=np.uint32)[0])

    def operator_seed(self, operator_index: int) -> int:
        """The seed of operator ``operator_index``'s own randomness (its actions), derived from
        :attr:`run_seed` and its position in the file, never from the environment's seeds."""
        return operator_seed(self.run_seed, operator_index)

    def episode_seeds(self) -> list[int]:
        """The seed of every episode, in order."""
        return [self.seed_for_episode(k) for k in range(self.episode_count)]
