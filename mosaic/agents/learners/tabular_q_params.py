"""The ``params`` of :class:`~mosaic.agents.learners.TabularQBrain` and ``TabularQMuscle``, as one
pydantic model: the agent's ``params`` reach both, so one model knows every key.

They are checked when the experiment file is loaded (``params_model`` of the brain and the
muscle), so that a bad value is reported with the file, line and key path before anything
starts, and again at setup by both (:func:`check_tabular_q_params`), since params reach them as
plain data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, field_validator

from mosaic.agents.learners._params import check_params
from mosaic.core.config_problems import Problem, StrictModel, raise_problems

__all__ = ["TabularQParams", "check_tabular_q_params"]


class TabularQParams(StrictModel):
    """Tabular Q-learning's params, with their defaults; unknown keys are errors. The brain
    reads ``learning_rate`` to ``initial_value`` and ``save_checkpoint``, the muscle the
    ``epsilon`` keys; both read ``load_checkpoint``."""

    learning_rate: float = Field(default=0.1, gt=0.0, le=1.0,
                                 description="a number in (0, 1] (the step size alpha)")
    discount: float = Field(default=0.99, ge=0.0, le=1.0, description="a number in [0, 1] (gamma)")
    update_every: int = Field(default=0, ge=0, description="a whole number >= 0 (a muscle's "
                              "transitions between two tables sent to it; 0: at its episode ends)")
    initial_value: float = Field(default=0.0, allow_inf_nan=False,
                                 description="a finite number (the value every entry starts at)")
    epsilon: float | None = Field(default=None, ge=0.0, le=1.0, description="a number in [0, 1] "
                                  "(a fixed exploration rate, in place of the schedule)")
    epsilon_start: float = Field(default=1.0, ge=0.0, le=1.0,
                                 description="a number in [0, 1] (exploration at first)")
    epsilon_end: float = Field(default=0.05, ge=0.0, le=1.0,
                               description="a number in [0, 1] (exploration after the decay)")
    epsilon_decay_episodes: int = Field(default=200, ge=0, description="a whole number >= 0 "
                                        "(the muscle's episodes from epsilon_start to epsilon_end)")
    load_checkpoint: str | None = Field(default=None, description="a path to a q_table checkpoint")
    save_checkpoint: str | None = Field(default=None, description="a path")
    agent_id: str = Field(default="none", description="none")

    @field_validator("agent_id")
    @classmethod
    def _no_agent_ids(cls, value: str) -> str:
        if value != "none":
            raise_problems(Problem((), f"expected none, got {value!r}: tabular Q has no network "
                                   "to append an agent id to (its table has one row per "
                                   "observed state, shared by the agent's slots)",
                                   "map the slots to agents of their own for a table each, or "
                                   "use a network learner (PPO, DQN) with agent_id: one_hot"))
        return value


def check_tabular_q_params(params: Mapping[str, Any], owner: str) -> TabularQParams:
    """``params`` checked; :class:`~mosaic.core.errors.MosaicError` listing every problem
    otherwise."""
    return check_params(TabularQParams, params, owner)
