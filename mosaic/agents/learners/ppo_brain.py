"""PPO's brain, :class:`PPOBrain`; its muscle is :class:`~mosaic.agents.learners.PPOMuscle`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mosaic.agents.brain import Brain
from mosaic.agents.context import BrainContext
from mosaic.agents.learners._common import AgentIds, RestorableState, SlotSpaces, load_mlp
from mosaic.agents.learners.mlp import MLP, Adam
from mosaic.agents.learners.ppo import ppo_spaces
from mosaic.agents.learners.ppo_params import PPOParams, check_ppo_params
from mosaic.agents.learners.ppo_policy import (
    Minibatch,
    annealed_fraction,
    gae,
    policy_update,
    ppo_step,
)
from mosaic.agents.policies import mlp_arrays, save_mlp
from mosaic.core.errors import MosaicError

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["PPOBrain"]

METRICS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm")


@dataclass(frozen=True)
class _Rollout:
    """A checked rollout, flattened over its segments, with advantages and value targets."""

    observations: np.ndarray
    actions: np.ndarray
    log_probs: np.ndarray
    masks: np.ndarray | None
    advantages: np.ndarray
    returns: np.ndarray


def _shuffled(rollout: _Rollout, order: np.ndarray) -> _Rollout:
    """``rollout``'s steps in ``order``."""
    return _Rollout(rollout.observations[order], rollout.actions[order],
                    rollout.log_probs[order], None if rollout.masks is None
                    else rollout.masks[order], rollout.advantages[order], rollout.returns[order])


def _minibatch(rollout: _Rollout, rows: slice) -> Minibatch:
    """The ``rows`` of ``rollout`` (views), as a minibatch whose critic sees the observations."""
    observations = rollout.observations[rows]
    return Minibatch(observations, observations, rollout.actions[rows], rollout.log_probs[rows],
                     None if rollout.masks is None else rollout.masks[rows],
                     rollout.advantages[rows], rollout.returns[rows])


class PPOBrain(SlotSpaces, RestorableState, Brain):
    """PPO with a clipped surrogate objective, on tanh MLP policy and value networks.

    Spaces: as :class:`~mosaic.agents.learners.PPOMuscle`. Several muscles may share the brain;
    each rollout is one update. With ``agent_id: one_hot`` the networks take one more input per
    slot of the brain's muscles (the ids of all of them, sorted), which every muscle must serve.
    Params: :class:`~mosaic.agents.learners.ppo_params.PPOParams`
    (``rollout_steps`` is the muscle's; a ``load_checkpoint`` sets the policy of a Discrete
    head, whose layer sizes then win over ``hidden_sizes``).

    :meth:`learn` computes GAE(lambda) advantages per segment (bootstrapping from the value of
    ``last_observation`` unless the segment terminated), then runs ``epochs`` passes of
    shuffled minibatches of ``minibatch_size`` steps: each minimises the clipped surrogate,
    plus ``value_coef`` times the value network's mean squared error, minus ``entropy_coef``
    times the entropy, with advantages normalised per minibatch and one Adam step over both
    networks and the log std, clipped to the global norm ``max_grad_norm``. It answers with the
    new weights (``W0``, ``b0``, ..., ``log_std`` for Box actions, ``version``). With
    ``anneal_steps`` the update's learning rate and clip range are the params' times
    :func:`~mosaic.agents.learners.ppo_policy.annealed_fraction` of the env steps learnt from,
    its rollout's included.

    Promises: every draw (initial weights, minibatch order) comes from ``context.rng``. The
    policy's last layer starts at zero, so a fresh muscle already acts with the brain's policy.
    :meth:`state` holds both networks, the log std, the optimizer's moments, the version and
    the env steps learnt from (``steps``, which the annealing follows).

    Metrics, per update (means over its minibatches): ``policy_loss``, ``value_loss``,
    ``entropy``, ``approx_kl``, ``clip_fraction`` and ``grad_norm`` (before clipping).
    """

    slots_spaces = staticmethod(ppo_spaces)

    @classmethod
    def params_model(cls) -> type[BaseModel]:
        """:class:`~mosaic.agents.learners.ppo_params.PPOParams` (the muscle's too)."""
        return PPOParams

    def setup(self, context: BrainContext) -> None:
        super().setup(context)
        owner = type(self).__name__
        self.params = params = check_ppo_params(context.params, owner)
        self.ids = AgentIds(context.slots, params.agent_id, owner)
        self.spaces = ppo_spaces(context.slots, owner, self.ids.width)
        self.head = head = self.spaces.head
        rng = context.rng
        hidden = tuple(params.hidden_sizes)
        if params.load_checkpoint:
            if not head.discrete:
                raise MosaicError(f"{owner}: load_checkpoint holds an mlp, for Discrete actions")
            self.policy = load_mlp(params.load_checkpoint, (self.spaces.n_inputs, head.size),
                                    owner)
            hidden = tuple(w.shape[1] for w, _ in self.policy.layers[:-1])
        else:
            self.policy = MLP([self.spaces.n_inputs, *hidden, head.size], rng, output_gain=0.0)
        self.value = MLP([self.spaces.n_inputs, *hidden, 1], rng, output_gain=1.0)
        self.log_std = np.full(head.size, params.initial_log_std)
        extra = [] if head.discrete else [self.log_std]
        self.optimizer = Adam([*self.policy.parameters(), *extra, *self.value.parameters()],
                              params.learning_rate, max_grad_norm=params.max_grad_norm or None)
        self.version = 0
        #: The env steps (rows of rollouts) learnt from, which ``anneal_steps`` counts.
        self.steps = 0
        #: The clip range of the last update (annealed with ``anneal_steps``).
        self.clip_range = params.clip_range
        self.last_stats: dict[str, float] = {}

    # -- learning -------------------------------------------------------------------------
    def learn(self, muscle: str, experience: Any) -> dict[str, np.ndarray]:
        """Update on one rollout and answer with the new weights."""
        rollout = self._checked(experience)
        if rollout.actions.shape[0]:
            self.steps += rollout.actions.shape[0]
            self._update(rollout)
            self.version += 1
        return self.weights()

    def _segment(self, segment: Any) -> tuple[np.ndarray, ...]:
        n_inputs, size = self.spaces.n_inputs, self.head.size
        obs = np.asarray(segment["observations"], dtype=np.float64)
        t = obs.shape[0]
        obs = obs.reshape(t, -1)
        dtype = np.int64 if self.head.discrete else np.float64
        actions = np.asarray(segment["actions"], dtype=dtype)
        log_probs = np.asarray(segment["log_probs"], dtype=np.float64)
        rewards = np.asarray(segment["rewards"], dtype=np.float64)
        masks = segment.get("masks")
        masks = np.ones((t, size), bool) if masks is None else np.asarray(masks, dtype=bool)
        last = segment.get("last_observation")
        terminated = bool(segment["terminated"])
        if (obs.shape != (t, n_inputs) or rewards.shape != (t,) or log_probs.shape != (t,)
                or masks.shape != (t, size)
                or actions.shape != ((t,) if self.head.discrete else (t, size))
                or (self.head.discrete and t and (actions.min() < 0 or actions.max() >= size))
                or (last is None and not terminated)):
            raise MosaicError(f"malformed segment: {t} steps, observations {obs.shape}, actions "
                              f"{actions.shape}; expected {n_inputs} inputs and {size} outputs")
        values = self.value.forward(obs)[:, 0]
        last_value = 0.0
        if not terminated:
            x = np.asarray(last, dtype=np.float64).reshape(-1)
            last_value = float(self.value.forward(x)[0])
        advantages, returns = gae(rewards, values, last_value, self.params.discount,
                                  self.params.gae_lambda)
        return obs, actions, log_probs, masks, advantages, returns

    def _checked(self, experience: Any) -> _Rollout:
        try:
            parts = [self._segment(segment) for segment in experience["segments"]
                     if len(segment["actions"])]
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise MosaicError(f"{type(self).__name__} expects the rollout a PPOMuscle sends; "
                              f"got {experience!r:.120} ({exc})") from exc
        if not parts:
            empty = np.zeros(0)
            return _Rollout(empty, empty, empty, None, empty, empty)
        obs, actions, log_probs, masks, advantages, returns = (
            np.concatenate(column) for column in zip(*parts, strict=True))
        # Every action legal (CartPole's case) masks nothing: no mask spares each minibatch
        # the masking, with the same numbers.
        legal = masks if self.head.discrete and not masks.all() else None
        return _Rollout(obs, actions, log_probs, legal, advantages, returns)

    def _update(self, rollout: _Rollout) -> None:
        params, rng = self.params, self.context.rng
        # x * 1.0 is x: without annealing the rates are the params' to the last bit.
        left = annealed_fraction(params.anneal_steps, self.steps)
        self.clip_range = params.clip_range * left
        self._set_learning_rate(params.learning_rate * left)
        n = rollout.actions.shape[0]
        totals = dict.fromkeys(METRICS, 0.0)
        steps = 0
        for _ in range(params.epochs):
            # The epoch's order applied once: each minibatch is then a slice of it (a view).
            shuffled = _shuffled(rollout, rng.permutation(n))
            for start in range(0, n, params.minibatch_size):
                self._step(shuffled, slice(start, start + params.minibatch_size), totals)
                steps += 1
        self.last_stats = {name: total / steps for name, total in totals.items()}
        for name in METRICS:
            self.context.log_metric(name, self.last_stats[name])

    def _set_learning_rate(self, rate: float) -> None:
        """The optimizer's learning rate from now on."""
        self.optimizer.learning_rate = rate

    def _step(self, rollout: _Rollout, rows: slice, totals: dict[str, float]) -> None:
        """One Adam step on the minibatch ``rows`` of the epoch's shuffled ``rollout``; adds its
        stats to ``totals``."""
        ppo_step(self.policy, self.value, self.optimizer, self.head, self.log_std, self.params,
                 _minibatch(rollout, rows), totals, self.clip_range)

    # -- weights and state ----------------------------------------------------------------
    def sync(self, muscle: str) -> dict[str, np.ndarray]:
        """The current policy, for a muscle that starts (a test phase after training)."""
        return self.weights()

    def weights(self) -> dict[str, np.ndarray]:
        """The policy as an update for a muscle (see :func:`policy_update`)."""
        return policy_update(self.policy, self.head, self.log_std, self.version)

    def state(self) -> dict[str, np.ndarray]:
        """Both networks (``policy.*``, ``value.*``), ``log_std``, the optimizer (``adam.*``),
        ``version`` and ``steps``; all copies."""
        return {**self.policy.to_arrays("policy."), **self.value.to_arrays("value."),
                **self.optimizer.state("adam."), "log_std": self.log_std.copy(),
                "version": np.array(self.version, dtype=np.int64),
                "steps": np.array(self.steps, dtype=np.int64)}

    def _load(self, state: Mapping[str, np.ndarray]) -> None:
        log_std = np.asarray(state["log_std"], dtype=np.float64)
        if log_std.shape != self.log_std.shape:
            raise ValueError(f"log_std of shape {log_std.shape}; expected {self.log_std.shape}")
        self.policy.load_arrays(state, "policy.")
        self.value.load_arrays(state, "value.")
        self.optimizer.load_state(state, "adam.")
        self.log_std[...] = log_std  # in place: the optimizer holds this array
        self.version = int(state["version"])
        # A state saved before ``steps`` was kept: nothing to anneal from, so it is refused
        # only when annealing would need it.
        if "steps" in state or self.params.anneal_steps:
            self.steps = int(state["steps"])
        else:
            self.steps = 0

    def greedy_policy(self) -> dict[str, np.ndarray]:
        """The policy as an ``mlp`` policy, for Discrete actions (empty for Box: the format
        has no Gaussian policy)."""
        return mlp_arrays(self.policy.layers) if self.head.discrete else {}

    def greedy_checkpoint(self, path: str | os.PathLike[str]) -> Path:
        """Write the policy as an ``mlp`` checkpoint (:mod:`mosaic.agents.policies`), whose
        greedy action is the muscle's test-mode action; Discrete actions only (MosaicError)."""
        if not self.head.discrete:
            raise MosaicError("an mlp checkpoint holds a Discrete policy; this brain's actions "
                              "are Box")
        return save_mlp(path, self.policy.layers)

    def teardown(self) -> None:
        """In ``"train"`` mode, write the checkpoint named by ``save_checkpoint``, if any."""
        if self.params.save_checkpoint and self.context.mode != "test":
            self.greedy_checkpoint(self.params.save_checkpoint)
