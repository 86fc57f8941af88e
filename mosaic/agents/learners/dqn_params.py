"""The ``params`` of :class:`~mosaic.agents.learners.DQNBrain` and ``DQNMuscle``, as one pydantic
model: the agent's ``params`` reach both, so one model knows every key.

The model is checked when the experiment file is loaded (``DQNMuscle.params_model``), so that a bad
value is reported with the file, line and key path, and again by both ``setup`` methods
(:func:`check_params`), since params reach a learner as plain data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mosaic.agents.learners.ppo_params import AGENT_ID
from mosaic.core.config_problems import config_error, validate
from mosaic.core.errors import MosaicError

__all__ = ["DQNParams", "check_params"]


class DQNParams(BaseModel):
    """Every DQN param with its default (see :class:`~mosaic.agents.learners.DQNBrain` and
    ``DQNMuscle`` for what each does); unknown keys are refused. The defaults are those of
    ``examples/cartpole_dqn.yml``, measured by ``benchmarks/learning_targets.py``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hidden_sizes: tuple[Annotated[int, Field(ge=1)], ...] = Field(default=(64, 64), min_length=1)
    learning_rate: float = Field(default=2.5e-4, gt=0)
    discount: float = Field(default=0.99, ge=0, le=1)
    buffer_size: int = Field(default=50_000, ge=1)
    batch_size: int = Field(default=128, ge=1)
    learning_starts: int = Field(default=1_000, ge=0)
    train_every: int = Field(default=1, ge=1)
    target_update_every: int = Field(default=250, ge=1)
    tau: float = Field(default=0.0, ge=0, le=1)
    double_dqn: bool = True
    huber_delta: float = Field(default=1.0, gt=0)
    max_grad_norm: float = Field(default=10.0, ge=0)
    sync_every: int = Field(default=10, ge=1)
    epsilon_start: float = Field(default=1.0, ge=0, le=1)
    epsilon_end: float = Field(default=0.01, ge=0, le=1)
    epsilon_decay_steps: int = Field(default=10_000, ge=0)
    load_checkpoint: str | None = None
    save_checkpoint: str | None = None
    agent_id: Literal["none", "one_hot"] = Field(default="none", description=AGENT_ID)


def check_params(params: Mapping[str, Any], source: str) -> DQNParams:
    """``params`` checked; :class:`MosaicError` listing every problem, worded as when the
    experiment file is loaded (``<source>: params.learning_rate: ...``)."""
    checked, problems = validate(DQNParams, dict(params), ("params",))
    if checked is None:
        raise MosaicError(str(config_error(source, problems, {})))
    return checked
