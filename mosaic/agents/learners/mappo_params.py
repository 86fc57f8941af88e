"""The ``params`` of :class:`~mosaic.agents.learners.MAPPOBrain` and ``MAPPOMuscle``: PPO's,
and where the critic looks.

Checked when the experiment file is loaded (``params_model``) and again at setup
(:func:`check_mappo_params`), as every built-in learner's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, field_validator

from mosaic.agents.learners._params import check_params
from mosaic.agents.learners.ppo_params import PPOParams
from mosaic.core.config_problems import Problem, raise_problems

__all__ = ["CRITICS", "MAPPOParams", "check_mappo_params"]

#: The values of ``critic``: what the value network sees.
CRITICS = ("centralised", "state", "local")


class MAPPOParams(PPOParams):
    """PPO's hyper-parameters (:class:`~mosaic.agents.learners.ppo_params.PPOParams`), plus
    ``critic``: ``centralised`` (the value network sees the environment's global state beside
    the slot's own observation, MAPPO's agent-specific state), ``state`` (the global state and
    the slot's one-hot id alone, MAPPO's environment-provided state) or ``local`` (it sees the
    slot's own observation alone, independent PPO), and
    ``normalize_values`` (MAPPO's value normalisation). The policy always sees
    the slot's own observation. MAPPO has no ``mlp`` checkpoint (``load_checkpoint``,
    ``save_checkpoint``): a phase's checkpoint continues it (``load:``), and no annealing
    (``anneal_steps`` is refused)."""

    critic: Literal["centralised", "state", "local"] = Field(
        default="centralised",
        description="centralised (the critic sees the environment's global state and the "
        "slot's observation: give the environment params: {global_state: true}), state (the "
        "global state and the slot's id alone) or local (it sees the slot's observation)")

    normalize_values: bool = Field(
        default=True, description="true or false (the value network learns the value targets "
        "standardised by their running mean and standard deviation)")

    @field_validator("load_checkpoint", "save_checkpoint")
    @classmethod
    def _no_mlp_checkpoint(cls, value: str | None) -> str | None:
        if value is not None:
            raise_problems(Problem((), f"expected nothing, got {value!r}: MAPPO reads and "
                                   "writes no mlp checkpoint (PPO's greedy policy file)",
                                   "continue a run from its phase checkpoint with load: "
                                   "instead"))
        return value

    @field_validator("anneal_steps")
    @classmethod
    def _no_annealing(cls, value: int) -> int:
        if value:
            raise_problems(Problem((), f"expected 0, got {value}: MAPPO keeps its learning "
                                   "rate and clip range as given (PPOBrain anneals them)",
                                   "leave anneal_steps out"))
        return value


def check_mappo_params(params: Mapping[str, Any], owner: str) -> MAPPOParams:
    """``params`` checked; :class:`MosaicError` listing every problem otherwise."""
    return check_params(MAPPOParams, params, owner)
