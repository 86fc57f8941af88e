"""MAPPO's brain, :class:`MAPPOBrain`; its muscle is
:class:`~mosaic.agents.learners.mappo.MAPPOMuscle`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from mosaic.agents.brain import Brain
from mosaic.agents.context import BrainContext
from mosaic.agents.learners._common import AgentIds, RestorableState, SlotSpaces
from mosaic.agents.learners.mappo_params import MAPPOParams, check_mappo_params
from mosaic.agents.learners.mlp import MLP, Adam
from mosaic.agents.learners.ppo import ppo_spaces
from mosaic.agents.learners.ppo_policy import Minibatch, gae, policy_update, ppo_step
from mosaic.agents.policies import mlp_arrays
from mosaic.core.errors import MosaicError

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["METRICS", "MAPPOBrain"]

METRICS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm")

_Columns = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                 np.ndarray]


class ValueScale:
    """The running mean and variance of the value targets (MAPPO's value normalisation):
    the value network learns ``(target - mean) / std`` and its outputs are read back as
    ``output * std + mean``. Off, it is the identity."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self.mean, self.var, self.count = 0.0, 1.0, 0.0

    @property
    def std(self) -> float:
        return float(np.sqrt(max(self.var, 1e-8)))

    def values(self, outputs: np.ndarray) -> np.ndarray:
        """The values the network's ``outputs`` stand for."""
        return outputs * self.std + self.mean if self.on else outputs

    def targets(self, returns: np.ndarray) -> np.ndarray:
        """What the network learns for ``returns``."""
        return (returns - self.mean) / self.std if self.on else returns

    def add(self, returns: np.ndarray) -> None:
        """Take ``returns`` into the running mean and variance (Chan et al.'s merge)."""
        if not self.on or not returns.shape[0]:
            return
        n, mean, var = float(returns.shape[0]), float(returns.mean()), float(returns.var())
        total = self.count + n
        delta = mean - self.mean
        if self.count:
            self.var = (self.var * self.count + var * n
                        + delta * delta * self.count * n / total) / total
        else:
            self.var = var
        self.mean += delta * n / total
        self.count = total

    def state(self) -> dict[str, np.ndarray]:
        return {"value_scale": np.array([self.mean, self.var, self.count])}

    def load(self, state: Mapping[str, np.ndarray]) -> None:
        scale = np.asarray(state["value_scale"], dtype=np.float64)
        if scale.shape != (3,):
            raise ValueError(f"value_scale of shape {scale.shape}; expected (3,)")
        self.mean, self.var, self.count = (float(x) for x in scale)


class MAPPOBrain(SlotSpaces, RestorableState, Brain):
    """PPO's update with a value network on what the muscles' critic inputs hold: the global
    state (MAPPO, ``critic: centralised`` or ``state``) or each slot's observation (IPPO,
    ``critic: local``).

    Spaces and params: as :class:`~mosaic.agents.learners.mappo.MAPPOMuscle`. The policy
    (``MLP([observation (+ agent id), *hidden_sizes, actions])``, a zero last layer) is built
    at setup; the value network (``MLP([critic inputs, *hidden_sizes, 1])``) and the Adam
    optimizer over both at the first rollout, whose critic inputs give its size (the global
    state's size is known only once the environment gave one).

    :meth:`learn` computes GAE(lambda) per segment, that is per slot and episode, bootstrapping
    from the value of ``last_critic_input`` unless the segment terminated, then runs
    ``epochs`` passes of shuffled minibatches as :class:`~mosaic.agents.learners.PPOBrain`
    does: the clipped surrogate on the policy, ``value_coef`` times the squared error of the
    value network, minus ``entropy_coef`` times the entropy, one Adam step clipped to
    ``max_grad_norm``. It answers with the new policy weights.

    With ``normalize_values`` (the default) the value network learns the value targets
    standardised by their running mean and variance over all rollouts so far
    (:class:`ValueScale`), and its outputs are read back through them for GAE.

    Promises: every draw (initial weights, minibatch order) comes from ``context.rng``;
    :meth:`state` holds the policy, the value network and the optimizer once built, the log
    std and the version, so a continued run goes on as the uninterrupted one. Raises
    :class:`MosaicError` for a rollout whose critic inputs change size.

    Metrics, per update (means over its minibatches): ``policy_loss``, ``value_loss``,
    ``entropy``, ``approx_kl``, ``clip_fraction`` and ``grad_norm`` (before clipping).
    """

    slots_spaces = staticmethod(ppo_spaces)

    @classmethod
    def params_model(cls) -> type[BaseModel]:
        """:class:`~mosaic.agents.learners.mappo_params.MAPPOParams` (the muscle's too)."""
        return MAPPOParams

    def setup(self, context: BrainContext) -> None:
        super().setup(context)
        owner = type(self).__name__
        self.params = params = check_mappo_params(context.params, owner)
        spaces = ppo_spaces(context.slots, owner)
        self.head = head = spaces.head
        ids = AgentIds(context.slots, params.agent_id, owner)
        self.n_inputs = spaces.n_inputs + ids.width
        self.hidden = tuple(params.hidden_sizes)
        self.policy = MLP([self.n_inputs, *self.hidden, head.size], context.rng, output_gain=0.0)
        self.log_std = np.full(head.size, params.initial_log_std)
        self.value: MLP | None = None
        self.optimizer: Adam | None = None
        self.scale = ValueScale(params.normalize_values)
        self.version = 0
        self.last_stats: dict[str, float] = {}

    def _build_critic(self, value: MLP) -> Adam:
        """Take ``value`` as the value network, with a new optimizer over both (returned)."""
        extra = [] if self.head.discrete else [self.log_std]
        optimizer = Adam([*self.policy.parameters(), *extra, *value.parameters()],
                         self.params.learning_rate,
                         max_grad_norm=self.params.max_grad_norm or None)
        self.value, self.optimizer = value, optimizer
        return optimizer

    # -- learning -------------------------------------------------------------------------
    def learn(self, muscle: str, experience: Any) -> dict[str, np.ndarray]:
        """Update on one rollout and answer with the new policy."""
        try:
            segments = [segment for segment in experience["segments"] if len(segment["actions"])]
        except (KeyError, TypeError) as exc:
            raise MosaicError(f"{type(self).__name__} expects the rollout a MAPPOMuscle sends; "
                              f"got {experience!r:.120} ({exc})") from exc
        if segments:
            if self.value is None:
                width = np.asarray(segments[0]["critic_inputs"]).reshape(
                    len(segments[0]["actions"]), -1).shape[1]
                self._build_critic(MLP([width, *self.hidden, 1], self.context.rng))
            self._update(self._columns(segments))
            self.version += 1
        return self.weights()

    def _columns(self, segments: list[Any]) -> _Columns:
        try:
            parts = [self._segment(segment) for segment in segments]
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise MosaicError(f"{type(self).__name__} expects the rollout a MAPPOMuscle sends "
                              f"({exc})") from exc
        obs, critic, actions, log_probs, masks, advantages, returns = (
            np.concatenate(column) for column in zip(*parts, strict=True))
        # The advantages used the scale as it was; the value network learns on the new one.
        self.scale.add(returns)
        return obs, critic, actions, log_probs, masks, advantages, self.scale.targets(returns)

    def _segment(self, segment: Any) -> _Columns:
        value = self.value
        if value is None:
            raise MosaicError("the value network is built before a segment is read")
        size = self.head.size
        obs = np.asarray(segment["observations"], dtype=np.float64)
        t = obs.shape[0]
        obs = obs.reshape(t, -1)
        critic = np.asarray(segment["critic_inputs"], dtype=np.float64).reshape(t, -1)
        actions = np.asarray(segment["actions"],
                             dtype=np.int64 if self.head.discrete else np.float64)
        log_probs = np.asarray(segment["log_probs"], dtype=np.float64)
        rewards = np.asarray(segment["rewards"], dtype=np.float64)
        masks = segment.get("masks")
        masks = np.ones((t, size), bool) if masks is None else np.asarray(masks, dtype=bool)
        last = segment.get("last_critic_input")
        terminated = bool(segment["terminated"])
        if critic.shape[1] != value.n_inputs:
            raise MosaicError(f"{type(self).__name__}: the critic inputs have {critic.shape[1]} "
                              f"values; its value network takes {value.n_inputs} (the global "
                              "state must keep its size)")
        if (obs.shape != (t, self.n_inputs) or rewards.shape != (t,)
                or log_probs.shape != (t,) or masks.shape != (t, size)
                or actions.shape != ((t,) if self.head.discrete else (t, size))
                or (self.head.discrete and (actions.min() < 0 or actions.max() >= size))
                or (last is None and not terminated)):
            raise MosaicError(f"malformed segment: {t} steps, observations {obs.shape}, actions "
                              f"{actions.shape}; expected {self.n_inputs} inputs and {size} "
                              "outputs")
        values = self.scale.values(value.forward(critic)[:, 0])
        last_value = 0.0
        if not terminated:
            x = np.asarray(last, dtype=np.float64).reshape(1, -1)
            last_value = float(self.scale.values(value.forward(x)[0])[0])
        advantages, returns = gae(rewards, values, last_value, self.params.discount,
                                  self.params.gae_lambda)
        return obs, critic, actions, log_probs, masks, advantages, returns

    def _update(self, columns: _Columns) -> None:
        params, rng = self.params, self.context.rng
        n = columns[2].shape[0]
        totals = dict.fromkeys(METRICS, 0.0)
        steps = 0
        for _ in range(params.epochs):
            order = rng.permutation(n)
            for start in range(0, n, params.minibatch_size):
                self._step(columns, order[start:start + params.minibatch_size], totals)
                steps += 1
        self.last_stats = {name: total / steps for name, total in totals.items()}
        for name in METRICS:
            self.context.log_metric(name, self.last_stats[name])

    def _step(self, columns: _Columns, rows: np.ndarray, totals: dict[str, float]) -> None:
        """One Adam step on the minibatch ``rows``; adds its stats to ``totals``."""
        value, optimizer = self.value, self.optimizer
        if value is None or optimizer is None:
            raise MosaicError("the value network is built before an update")
        obs, critic, actions, log_probs, masks, advantages, returns = columns
        ppo_step(self.policy, value, optimizer, self.head, self.log_std, self.params,
                 Minibatch(obs[rows], critic[rows], actions[rows], log_probs[rows],
                           masks[rows] if self.head.discrete else None, advantages[rows],
                           returns[rows]), totals)

    # -- weights and state ----------------------------------------------------------------
    def sync(self, muscle: str) -> dict[str, np.ndarray]:
        """The current policy, for a muscle that starts (a test phase after training)."""
        return self.weights()

    def weights(self) -> dict[str, np.ndarray]:
        """The policy as an update for a muscle (see :func:`policy_update`)."""
        return policy_update(self.policy, self.head, self.log_std, self.version)

    def state(self) -> dict[str, np.ndarray]:
        """The policy (``policy.*``), ``log_std``, ``version`` and the value scale
        (``value_scale``: mean, variance, count), and once built the value network
        (``value.*``) and the optimizer (``adam.*``); all copies."""
        state = {**self.policy.to_arrays("policy."), "log_std": self.log_std.copy(),
                 "version": np.array(self.version, dtype=np.int64), **self.scale.state()}
        if self.value is not None and self.optimizer is not None:
            state.update(self.value.to_arrays("value."))
            state.update(self.optimizer.state("adam."))
        return state

    def _load(self, state: Mapping[str, np.ndarray]) -> None:
        log_std = np.asarray(state["log_std"], dtype=np.float64)
        if log_std.shape != self.log_std.shape:
            raise ValueError(f"log_std of shape {log_std.shape}; expected {self.log_std.shape}")
        value = MLP.from_arrays(state, "value.") if "value.W0" in state else None
        if value is not None and (value.n_outputs != 1 or len(value.layers)
                                  != len(self.hidden) + 1):
            raise ValueError(f"a value network of {len(value.layers)} layers and "
                             f"{value.n_outputs} outputs; expected {len(self.hidden) + 1} and 1")
        self.policy.load_arrays(state, "policy.")
        self.scale.load(state)
        self.log_std[...] = log_std  # in place: the optimizer holds this array
        if value is None:
            self.value = self.optimizer = None
        else:
            self._build_critic(value).load_state(state, "adam.")
        self.version = int(state["version"])

    def greedy_policy(self) -> dict[str, np.ndarray]:
        """The policy as an ``mlp`` policy, for Discrete actions without an agent id (empty
        otherwise: the format has no Gaussian policy, and a player gives no agent id)."""
        if self.head.discrete and self.params.agent_id == "none":
            return mlp_arrays(self.policy.layers)
        return {}
