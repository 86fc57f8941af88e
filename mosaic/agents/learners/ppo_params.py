"""The ``params`` of :class:`~mosaic.agents.learners.PPOBrain` and ``PPOMuscle``, as a pydantic
model.

They are checked twice: when the experiment file is loaded (``PPOMuscle.params_model``), so that
a bad value is reported with the file, line and key path before anything starts, and again at
setup by the brain and the muscle (:func:`check_ppo_params`), since params reach them as plain
data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field

from mosaic.core.config_problems import StrictModel, config_error, validate
from mosaic.core.errors import MosaicError

__all__ = ["AGENT_ID", "PPOParams", "check_ppo_params"]

#: What a network learner's ``agent_id`` param takes (parameter sharing).
AGENT_ID = ("none or one_hot (one_hot: the one-hot of the slot's index among the agent's "
            "sorted slot ids is appended to each observation the network sees)")


class PPOParams(StrictModel):
    """PPO's hyper-parameters, with their defaults; unknown keys are errors."""

    rollout_steps: int = Field(default=2048, ge=1, description="a whole number >= 1 (env steps "
                               "per update, over all copies and slots of a muscle)")
    epochs: int = Field(default=10, ge=1, description="a whole number >= 1 (passes per rollout)")
    minibatch_size: int = Field(default=64, ge=1, description="a whole number >= 1 (steps per "
                                "gradient step)")
    clip_range: float = Field(default=0.2, gt=0.0, description="a number > 0 (epsilon of the clip)")
    discount: float = Field(default=0.99, ge=0.0, le=1.0, description="a number in [0, 1] (gamma)")
    gae_lambda: float = Field(default=0.95, ge=0.0, le=1.0, description="a number in [0, 1]")
    learning_rate: float = Field(default=3e-4, gt=0.0, description="a number > 0 (Adam)")
    hidden_sizes: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=lambda: [64, 64], description="a list of whole numbers >= 1")
    entropy_coef: float = Field(default=0.0, ge=0.0, description="a number >= 0")
    value_coef: float = Field(default=0.5, ge=0.0, description="a number >= 0")
    max_grad_norm: float = Field(default=0.5, ge=0.0,
                                 description="a number >= 0 (0: no clip)")
    normalize_advantages: bool = Field(default=True, description="true or false")
    anneal_steps: int = Field(
        default=0, ge=0, description="a whole number >= 0 (learning_rate and clip_range fall "
        "linearly to 0 over this many env steps learnt from, as the RL Zoo's lin_ schedules; "
        "0: they stay as given)")
    initial_log_std: float = Field(default=0.0, description="a number")
    load_checkpoint: str | None = Field(default=None, description="a path to an mlp checkpoint")
    save_checkpoint: str | None = Field(default=None, description="a path")
    agent_id: Literal["none", "one_hot"] = Field(default="none", description=AGENT_ID)


def check_ppo_params(params: Mapping[str, Any], owner: str) -> PPOParams:
    """``params`` checked; :class:`MosaicError` listing every problem otherwise."""
    checked, problems = validate(PPOParams, dict(params), ("params",))
    if checked is None:
        raise MosaicError(str(config_error(owner, problems, {})))
    return checked
