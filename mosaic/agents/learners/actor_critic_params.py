"""The ``params`` of :class:`~mosaic.agents.learners.TD3Brain` / ``TD3Muscle`` and
:class:`~mosaic.agents.learners.SACBrain` / ``SACMuscle``, one pydantic model per learner: the
agent's ``params`` reach its brain and muscle, so one model knows every key.

Each model is checked when the experiment file is loaded (the muscle's ``params_model``), so that
a bad value is reported with the file, line and key path (and a did-you-mean for a misspelt key),
and again by both ``setup`` methods, since params reach a learner as plain data.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from mosaic.agents.learners.ppo_params import AGENT_ID
from mosaic.core.config_problems import Problem, raise_problems

__all__ = ["ActorCriticParams", "SACParams", "TD3Params"]


class ActorCriticParams(BaseModel):
    """What TD3 and SAC share: networks, replay, schedule and exploration before learning."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hidden_sizes: tuple[Annotated[int, Field(ge=1)], ...] = Field(default=(64, 64), min_length=1)
    learning_rate: float = Field(default=1e-3, gt=0)
    discount: float = Field(default=0.99, ge=0, le=1)
    buffer_size: int = Field(default=100_000, ge=1)
    batch_size: int = Field(default=128, ge=1)
    #: Transitions before the first update.
    learning_starts: int = Field(default=1_000, ge=0)
    #: Each muscle's first env steps (every copy's step counts) act uniformly at random.
    random_steps: int = Field(default=1_000, ge=0)
    train_every: int = Field(default=1, ge=1)
    #: Polyak rate of the target networks.
    tau: float = Field(default=0.005, gt=0, le=1)
    #: Updates between weights sent to a muscle (and between metric reports).
    sync_every: int = Field(default=10, ge=1)
    agent_id: Literal["none", "one_hot"] = Field(default="none", description=AGENT_ID)


class TD3Params(ActorCriticParams):
    """Every TD3 param with its default (see :class:`~mosaic.agents.learners.TD3Brain`); unknown
    keys are refused. Noise is in units of half the action range (the actor's tanh output)."""

    #: The exploring actions' noise: its standard deviation (``gaussian``), or the ``sigma`` of
    #: the Ornstein-Uhlenbeck process.
    exploration_noise: float = Field(default=0.1, ge=0)
    #: ``gaussian``: drawn afresh every step; ``ornstein-uhlenbeck``: one process per slot, copy
    #: and action value, started at 0 with each episode, that drifts and reverts slowly
    #: (:class:`~mosaic.agents.learners.exploration_noise.OrnsteinUhlenbeck`).
    noise: Literal["gaussian", "ornstein-uhlenbeck"] = Field(
        default="gaussian", description="gaussian or ornstein-uhlenbeck (exploration noise)")
    #: The Ornstein-Uhlenbeck process's rate of reversion and time step (Stable-Baselines3's
    #: defaults): it forgets where it was after about ``1 / (noise_theta * noise_dt)`` steps.
    noise_theta: float = Field(default=0.15, gt=0,
                               description="a number > 0 (Ornstein-Uhlenbeck reversion rate)")
    noise_dt: float = Field(default=0.01, gt=0,
                            description="a number > 0 (Ornstein-Uhlenbeck time step)")
    policy_noise: float = Field(default=0.2, ge=0)
    noise_clip: float = Field(default=0.5, ge=0)
    policy_delay: int = Field(default=2, ge=1)

    @field_validator("noise_dt")
    @classmethod
    def _one_step_reverts_at_most_all_the_way(cls, value: float,
                                              info: ValidationInfo) -> float:
        theta = info.data.get("noise_theta")
        if isinstance(theta, float | int) and theta * value > 1:
            raise_problems(Problem((), f"expected noise_theta * noise_dt <= 1, got {theta} * "
                                   f"{value} = {theta * value:g}: a step would overshoot 0",
                                   "a smaller noise_dt (0.01 by default)"))
        return value


class SACParams(ActorCriticParams):
    """Every SAC param with its default (see :class:`~mosaic.agents.learners.SACBrain`); unknown
    keys are refused. ``target_entropy`` ``None`` is minus the number of action values. A fixed
    entropy coefficient (Stable-Baselines3's ``ent_coef: 0.1``) is ``learn_alpha: false`` with
    ``initial_alpha: 0.1``."""

    initial_alpha: float = Field(default=1.0, gt=0)
    learn_alpha: bool = True
    target_entropy: float | None = None
    #: ``gaussian``: the actor gives a mean and a log std per action value, and the muscle draws
    #: fresh noise every step; ``gsde``: generalised state-dependent exploration (Raffin et al.,
    #: 2021), the actor gives the means and the noise is its last hidden layer's features times
    #: an exploration matrix that the muscle keeps for many steps (``sde_sample_freq``), so that
    #: one push is kept up while the state changes slowly (:mod:`~mosaic.agents.learners.sac`).
    exploration: Literal["gaussian", "gsde"] = Field(
        default="gaussian", description="gaussian or gsde (SAC's exploration)")
    #: With ``gsde``: the muscle draws a new exploration matrix at the start of each episode
    #: (``-1``) and, given ``N >= 1``, also every ``N`` exploring steps.
    sde_sample_freq: int = Field(default=-1, ge=-1,
                                 description="-1 (once an episode) or an integer >= 1 (steps)")
    #: With ``gsde``: the initial log standard deviation of each exploration matrix entry (one
    #: learnt value per hidden feature and action value; Stable-Baselines3's SAC default).
    log_std_init: float = -3.0
    #: With ``gsde``: whether the actor's gradient reaches its hidden layers through the
    #: features' part in the noise and its variance too (Stable-Baselines3's SAC), or only
    #: through the means (the features held constant).
    sde_learn_features: bool = True

    @field_validator("sde_sample_freq")
    @classmethod
    def _not_zero(cls, value: int) -> int:
        if value == 0:
            raise_problems(Problem((), "expected -1 (a new exploration matrix each episode) or "
                                   "an integer >= 1 (also every that many steps), got 0",
                                   "-1 (the default)"))
        return value
