"""The ``params`` of :class:`~mosaic.agents.learners.PolicyGradientBrain` and
``PolicyGradientMuscle``, as one pydantic model: the agent's ``params`` reach both, so one model
knows every key.

They are checked when the experiment file is loaded (``params_model`` of the brain and the
muscle), so that a bad value is reported with the file, line and key path before anything
starts, and again at setup by both (:func:`check_policy_gradient_params`), since params reach
them as plain data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field

from mosaic.agents.learners._params import check_params
from mosaic.agents.learners.ppo_params import AGENT_ID
from mosaic.core.config_problems import StrictModel

__all__ = ["PolicyGradientParams", "check_policy_gradient_params"]


class PolicyGradientParams(StrictModel):
    """REINFORCE's params, with their defaults; unknown keys are errors. The muscle reads only
    ``load_checkpoint``; the brain reads them all."""

    hidden_sizes: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=lambda: [64, 64],
        description="a list of whole numbers >= 1 (hidden layer widths of both networks)")
    learning_rate: float = Field(default=0.003, gt=0.0, description="a number > 0 (Adam, policy)")
    value_learning_rate: float = Field(default=0.003, gt=0.0,
                                       description="a number > 0 (Adam, value network)")
    value_iterations: int = Field(default=20, ge=0, description="a whole number >= 0 "
                                  "(value-network steps per update)")
    discount: float = Field(default=0.99, ge=0.0, le=1.0, description="a number in [0, 1] (gamma)")
    gae_lambda: float = Field(default=1.0, ge=0.0, le=1.0,
                              description="a number in [0, 1] (1: plain REINFORCE)")
    batch_episodes: int = Field(default=8, ge=1,
                                description="a whole number >= 1 (episodes per update)")
    entropy_coef: float = Field(default=0.0, ge=0.0, description="a number >= 0")
    normalize_advantages: bool = Field(default=True, description="true or false")
    max_grad_norm: float = Field(default=1.0, ge=0.0, description="a number >= 0 (0: no clip)")
    load_checkpoint: str | None = Field(default=None, description="a path to an mlp checkpoint")
    save_checkpoint: str | None = Field(default=None, description="a path")
    agent_id: Literal["none", "one_hot"] = Field(default="none", description=AGENT_ID)


def check_policy_gradient_params(params: Mapping[str, Any], owner: str) -> PolicyGradientParams:
    """``params`` checked; :class:`~mosaic.core.errors.MosaicError` listing every problem
    otherwise."""
    return check_params(PolicyGradientParams, params, owner)
