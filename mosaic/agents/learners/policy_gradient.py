"""Policy gradient (REINFORCE with a learned value baseline) for Box observations and Discrete
actions (CartPole, Acrobot, LunarLander, ...), on the NumPy :class:`~mosaic.agents.learners.MLP`.

The muscle samples actions from the softmax policy and sends each finished episode to the brain;
the brain updates once it holds a batch of episodes and answers with the new policy weights.

Why one file of this length: the brain and the muscle of one algorithm share its episode format
and network, and change together.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mosaic.agents.batch import Batch
from mosaic.agents.brain import Brain
from mosaic.agents.context import BrainContext, MuscleContext
from mosaic.agents.learners._common import (
    AgentIds,
    RestorableState,
    SlotSpaces,
    mlp_from_update,
    pack_records,
    unpack_records,
    update_inputs,
)
from mosaic.agents.learners._common import legal_mask as _legal_mask
from mosaic.agents.learners._common import legal_masks as _legal_masks
from mosaic.agents.learners._common import load_mlp as _load_mlp
from mosaic.agents.learners._common import policy_shape as _policy_shape
from mosaic.agents.learners._common import unwrap as _unwrap
from mosaic.agents.learners.mlp import (
    MLP,
    Adam,
    masked_logits,
    sample_softmax,
    softmax,
    softmax_policy_loss,
)
from mosaic.agents.muscle import Muscle
from mosaic.agents.policies import mlp_arrays, save_mlp
from mosaic.core.errors import MosaicError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from mosaic.agents.learners.policy_gradient_params import PolicyGradientParams

__all__ = ["PolicyGradientBrain", "PolicyGradientMuscle"]


@dataclass(frozen=True)
class _Episode:
    """One checked episode, as the brain keeps it until its batch is full."""

    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    masks: np.ndarray | None
    final_observation: np.ndarray | None
    terminated: bool
    truncated: bool


def _params(params: Mapping[str, Any], owner: str) -> PolicyGradientParams:
    from mosaic.agents.learners.policy_gradient_params import check_policy_gradient_params

    return check_policy_gradient_params(params, owner)


def _params_model() -> type[BaseModel]:
    from mosaic.agents.learners.policy_gradient_params import PolicyGradientParams

    model: type[BaseModel] = PolicyGradientParams
    return model


class PolicyGradientMuscle(SlotSpaces, Muscle):
    """Samples actions from a softmax policy and sends whole episodes to the brain.

    Spaces: every slot has a ``Box`` observation (flattened to a float vector) and a
    ``Discrete`` action space starting at 0, of the same sizes across slots (one policy).

    Params (``context.params``, all optional; checked with
    :class:`~mosaic.agents.learners.policy_gradient_params.PolicyGradientParams`, which the
    brain shares):

    * ``load_checkpoint`` (unset): an ``mlp`` checkpoint (``.npz``) to act with from the start,
      for test runs; give it at agent level so that the brain starts from it too.
    * ``agent_id`` (``none``): ``one_hot`` appends the slot's one-hot to every observation the
      network sees (:class:`~mosaic.agents.learners._common.AgentIds`); the brain's network
      then takes one input more per slot.

    Several slots (parameter sharing) each collect their own episode, sent when it ends.

    Until the brain's first answer the policy is uniform, which is exactly the brain's initial
    policy (its last layer starts at zero), so the first batch is on-policy without a weight
    transfer.

    Promises: sampling draws only from ``context.rng``, so the same seed, weights and
    observations give the same actions. Actions honour ``legal_actions`` (a mask of length
    n_actions, or PettingZoo's ``{"observation", "action_mask"}`` observation). In ``"test"``
    mode the action is the arg-max logit over the legal actions (ties to the lowest, as in the
    checkpoint format) and :meth:`feedback` returns ``None``.

    Experience, sent from :meth:`feedback` once per slot when its episode ends: a dict with
    ``observations`` (T, d) float64, ``actions`` (T,) int64, ``rewards`` (T,) float64 (each the
    sum of the rewards that followed that action), ``masks`` (T, n_actions) bool or ``None``,
    ``final_observation`` (d,) float64 or ``None``, ``terminated``, ``truncated`` and
    ``version``, the number of the weights that acted. Updates: the weights dict the brain
    sends (``W0``, ``b0``, ... and ``version``) replaces the local policy.

    Copies (``context.copies``): :meth:`act_batch` samples every copy's action from one forward
    pass of the policy, and each copy collects its own episode; :meth:`feedback_batch` sends
    each copy's finished episode as its own item, in the format above, so the brain learns
    from them as from episodes of a muscle without copies. Updates change the policy of all
    copies at once. Sampling draws one uniform per copy and step from ``context.rng``, in copy
    order, the same draw :meth:`act` makes for one observation.
    """

    slots_spaces = staticmethod(_policy_shape)

    @classmethod
    def params_model(cls) -> type[BaseModel]:
        """:class:`~mosaic.agents.learners.policy_gradient_params.PolicyGradientParams`."""
        return _params_model()

    def setup(self, context: MuscleContext) -> None:
        super().setup(context)
        params = _params(context.params, type(self).__name__)
        self.observation_size, self.n_actions = _policy_shape(context.slots,
                                                              type(self).__name__)
        self.ids = AgentIds(context.slots, params.agent_id, type(self).__name__)
        self.n_inputs = self.observation_size + self.ids.width
        self.policy: MLP | None = None
        self.version = 0
        checkpoint = params.load_checkpoint
        if checkpoint:
            self.policy = _load_mlp(checkpoint, (self.n_inputs, self.n_actions),
                                    type(self).__name__)
        self.training = context.mode != "test"
        self.rng = context.rng
        self._uniform = np.zeros(self.n_actions)
        self._episodes: dict[str, dict[str, list[Any]]] = {}
        # For copies: slot -> the episode each copy is collecting (None: none yet).
        self._copy_episodes: dict[str, list[dict[str, list[Any]] | None]] = {}

    def reset(self) -> None:
        """Start an episode: drop what an unfinished previous episode collected."""
        self._episodes.clear()

    def _logits(self, x: np.ndarray) -> np.ndarray:
        return self._uniform if self.policy is None else self.policy.forward(x)

    def act(self, slot: str, observation: Any, legal_actions: Any = None) -> int:
        """A sample from the policy over the legal actions (the arg-max in test mode)."""
        observation, legal_actions = _unwrap(observation, legal_actions)
        x = np.asarray(observation, dtype=np.float64).reshape(1, -1)
        if x.shape[1] != self.observation_size:
            raise MosaicError(f"expected an observation of {self.observation_size} values; got "
                              f"{x.shape[1]}")
        x = self.ids.appended(x, slot)[0]
        mask = _legal_mask(legal_actions, self.n_actions)
        logits = masked_logits(self._logits(x), mask)
        if not self.training:
            return int(np.argmax(logits))
        cdf = np.cumsum(softmax(logits))
        action = int(np.searchsorted(cdf, self.rng.random() * cdf[-1], side="right"))
        if action >= self.n_actions or (mask is not None and not mask[action]):
            # Only reachable through rounding at the top of the cdf: take the last legal one.
            action = int(np.flatnonzero(mask)[-1]) if mask is not None else self.n_actions - 1
        episode = self._episodes.setdefault(
            slot, {"observations": [], "actions": [], "rewards": [], "masks": []})
        episode["observations"].append(x)
        episode["actions"].append(action)
        episode["rewards"].append(0.0)
        episode["masks"].append(mask)
        return action

    def feedback(
        self,
        slot: str,
        reward: float,
        terminated: bool,
        truncated: bool,
        observation: Any,
    ) -> dict[str, Any] | None:
        """At the end of ``slot``'s episode, the episode as experience; otherwise ``None``."""
        episode = self._episodes.get(slot)
        if episode is None:
            return None  # test mode, or a reward before this slot's first action
        episode["rewards"][-1] += float(reward)
        if not (terminated or truncated):
            return None
        del self._episodes[slot]
        return self._experience(slot, episode, terminated, truncated, observation)

    def _experience(self, slot: str, episode: dict[str, list[Any]], terminated: bool,
                    truncated: bool, observation: Any) -> dict[str, Any]:
        """A finished episode as the experience the brain learns from."""
        masks = episode["masks"]
        if any(m is None for m in masks):
            mask_array = None if all(m is None for m in masks) else np.array(
                [np.ones(self.n_actions, bool) if m is None else m for m in masks])
        else:
            mask_array = np.array(masks)
        final = None
        if observation is not None:
            final = self.ids.appended(np.asarray(_unwrap(observation, None)[0],
                                                 dtype=np.float64).reshape(1, -1), slot)[0]
        return {
            "observations": np.array(episode["observations"]),
            "actions": np.array(episode["actions"], dtype=np.int64),
            "rewards": np.array(episode["rewards"]),
            "masks": mask_array,
            "final_observation": final,
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "version": self.version,
        }

    def act_batch(self, slot: str, batch: Batch) -> np.ndarray:
        """A sample per copy from the policy over its legal actions (the arg-max in test mode),
        from one forward pass: int64 (copies,).

        A copy in ``batch.starts`` first drops what its unfinished episode collected, as
        :meth:`reset` does for one.
        """
        copies = batch.copies
        if copies != self.context.copies:
            raise MosaicError(f"a batch of {copies} copies for a muscle set up for "
                              f"{self.context.copies}")
        observations, legal_actions = _unwrap(batch.observations, batch.legal_actions)
        x = np.array(observations, dtype=np.float64).reshape(copies, -1)
        if x.shape[1] != self.observation_size:
            raise MosaicError(f"expected observations of {self.observation_size} values; got "
                              f"{x.shape[1]}")
        x = self.ids.appended(x, slot)
        masks = _legal_masks(legal_actions, self.n_actions, copies)
        episodes = self._copy_episodes.setdefault(slot, [None] * copies)
        for copy in np.flatnonzero(batch.starts).tolist():
            for collecting in self._copy_episodes.values():
                collecting[copy] = None
        logits = (np.zeros((copies, self.n_actions)) if self.policy is None
                  else self.policy.forward(x))
        logits = masked_logits(logits, masks)
        if not self.training:
            greedy: np.ndarray = np.argmax(logits, axis=1).astype(np.int64)
            return greedy
        actions = sample_softmax(logits, self.rng.random(copies))
        for copy, action in enumerate(actions.tolist()):
            episode = episodes[copy]
            if episode is None:
                episode = episodes[copy] = {"observations": [], "actions": [], "rewards": [],
                                            "masks": []}
            episode["observations"].append(x[copy])
            episode["actions"].append(action)
            episode["rewards"].append(0.0)
            episode["masks"].append(None if masks is None else masks[copy])
        return actions

    def feedback_batch(self, slot: str, batch: Batch) -> list[dict[str, Any]]:
        """The finished episodes of the copies in ``batch.acted`` whose episode ended, in copy
        order; an empty list in test mode or when none ended."""
        episodes = self._copy_episodes.get(slot)
        if episodes is None:
            return []
        finished = []
        for copy in np.flatnonzero(batch.acted).tolist():
            episode = episodes[copy]
            if episode is None:
                continue
            episode["rewards"][-1] += float(batch.rewards[copy])
            terminated, truncated = bool(batch.terminated[copy]), bool(batch.truncated[copy])
            if terminated or truncated:
                episodes[copy] = None
                finished.append(self._experience(slot, episode, terminated, truncated,
                                                 batch.outcome_observation(copy)))
        return finished

    def apply_update(self, update: Any) -> None:
        """Act with the weights in ``update`` from now on (``MosaicError`` if they do not fit)."""
        self.policy = mlp_from_update(update, (self.n_inputs, self.n_actions), "policy",
                                      self.ids.mismatch(update_inputs(update),
                                                        self.observation_size))
        self.version = int(update.get("version", self.version))


class PolicyGradientBrain(SlotSpaces, RestorableState, Brain):
    """REINFORCE with a learned value baseline, on a tanh MLP policy and value network.

    Spaces: as :class:`PolicyGradientMuscle`. Several muscles may share the brain: their
    episodes fill one batch.

    Params (``context.params``, all optional; checked with
    :class:`~mosaic.agents.learners.policy_gradient_params.PolicyGradientParams`, which the
    muscle shares):

    * ``hidden_sizes`` ([64, 64]): hidden layer widths of both networks.
    * ``learning_rate`` (0.003): Adam step size of the policy.
    * ``value_learning_rate`` (0.003): Adam step size of the value network.
    * ``value_iterations`` (20): value-network steps per update, on the whole batch.
    * ``discount`` (0.99): ``gamma`` in ``[0, 1]``.
    * ``gae_lambda`` (1.0): ``lambda`` of generalised advantage estimation; ``1.0`` is plain
      REINFORCE with the value as baseline (advantage = return - value); lower trades bias for
      variance.
    * ``batch_episodes`` (8): episodes per update.
    * ``entropy_coef`` (0.0): weight of the entropy bonus.
    * ``normalize_advantages`` (true): scale each batch's advantages to mean 0, std 1.
    * ``max_grad_norm`` (1.0): clip each network's gradient to this global norm (0: no clip).
    * ``load_checkpoint`` (unset): start the policy from an ``mlp`` checkpoint (its own layer
      sizes win over ``hidden_sizes``); the value network starts fresh.
    * ``save_checkpoint`` (unset): in ``"train"`` mode, write :meth:`greedy_checkpoint` there at
      teardown.

    Returns: a truncated episode bootstraps from the value of its final observation; a
    terminated one ends at 0. Initialisation draws only from ``context.rng``; the policy's last
    layer starts at zero (a uniform policy, matching a fresh muscle).

    :meth:`learn` adds the episode to the batch, updates once the batch is full, and answers
    ``muscle`` with the policy weights (``W0``, ``b0``, ..., ``version``) whenever the weights
    it acts with are older than the brain's; otherwise ``None``. Episodes that a muscle
    collected with older weights still count as on-policy (as in asynchronous actor-critic).
    :meth:`state` holds both networks, both optimizers' moments, the version and the episodes
    of the batch still being collected (``batch.*``), so a continued run updates when the saved
    one would have.

    Metrics, per update: ``policy_loss``, ``value_loss`` (after the last value step),
    ``entropy`` (of the policy on the batch) and ``grad_norm`` (the policy gradient's global
    norm, before clipping).
    """

    slots_spaces = staticmethod(_policy_shape)

    @classmethod
    def params_model(cls) -> type[BaseModel]:
        """:class:`~mosaic.agents.learners.policy_gradient_params.PolicyGradientParams`."""
        return _params_model()

    def setup(self, context: BrainContext) -> None:
        super().setup(context)
        params = _params(context.params, type(self).__name__)
        self.n_inputs, self.n_actions = _policy_shape(context.slots, type(self).__name__)
        self.n_inputs += AgentIds(context.slots, params.agent_id, type(self).__name__).width
        hidden = tuple(params.hidden_sizes)
        self.learning_rate = params.learning_rate
        value_lr = params.value_learning_rate
        self.value_iterations = params.value_iterations
        self.discount = params.discount
        self.gae_lambda = params.gae_lambda
        self.batch_episodes = params.batch_episodes
        self.entropy_coef = params.entropy_coef
        self.normalize_advantages = params.normalize_advantages
        clip = params.max_grad_norm
        rng = context.rng
        checkpoint = params.load_checkpoint
        if checkpoint:
            self.policy = _load_mlp(checkpoint, (self.n_inputs, self.n_actions),
                                    type(self).__name__)
            hidden = tuple(w.shape[1] for w, _ in self.policy.layers[:-1])
        else:
            self.policy = MLP([self.n_inputs, *hidden, self.n_actions], rng, output_gain=0.0)
        self.value = MLP([self.n_inputs, *hidden, 1], rng, output_gain=1.0)
        self.policy_optimizer = Adam(self.policy.parameters(), self.learning_rate,
                                     max_grad_norm=clip or None)
        self.value_optimizer = Adam(self.value.parameters(), value_lr, max_grad_norm=clip or None)
        self.save_path: str | None = params.save_checkpoint or None
        self.version = 0
        # A muscle starts with version 0: the uniform policy, or the checkpoint it loaded too.
        self._sent: dict[str, int] = {}
        self._batch: list[_Episode] = []
        self.last_stats: dict[str, float] = {}

    # -- learning -------------------------------------------------------------------------
    def learn(self, muscle: str, experience: Any) -> dict[str, np.ndarray] | None:
        """Add one episode; update when the batch is full; answer with weights if ``muscle``'s
        are stale."""
        self._batch.append(self._checked(experience))
        if len(self._batch) >= self.batch_episodes:
            self._update(self._batch)
            self._batch = []
            self.version += 1
        if self._sent.get(muscle, 0) < self.version:
            self._sent[muscle] = self.version
            return self.weights()
        return None

    def _checked(self, experience: Any) -> _Episode:
        try:
            obs = np.asarray(experience["observations"], dtype=np.float64)
            masks = experience.get("masks")
            final = experience.get("final_observation")
            episode = _Episode(
                observations=obs.reshape(obs.shape[0], -1),
                actions=np.asarray(experience["actions"], dtype=np.int64),
                rewards=np.asarray(experience["rewards"], dtype=np.float64),
                masks=None if masks is None else np.asarray(masks, dtype=bool),
                final_observation=None if final is None
                else np.asarray(final, dtype=np.float64).reshape(-1),
                terminated=bool(experience["terminated"]),
                truncated=bool(experience.get("truncated", False)),
            )
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise MosaicError(f"{type(self).__name__} expects the episode dict a "
                              f"PolicyGradientMuscle sends; got {experience!r:.120} "
                              f"({exc})") from exc
        t = episode.actions.shape[0]
        actions, masks_array = episode.actions, episode.masks
        if (episode.observations.shape != (t, self.n_inputs) or episode.rewards.shape != (t,)
                or (t and (actions.min() < 0 or actions.max() >= self.n_actions))
                or (masks_array is not None and masks_array.shape != (t, self.n_actions))):
            raise MosaicError(f"malformed episode: {t} actions, observations "
                              f"{episode.observations.shape}, rewards {episode.rewards.shape}; "
                              f"expected {self.n_inputs} inputs and {self.n_actions} actions")
        return episode

    def _advantages(self, episode: _Episode) -> tuple[np.ndarray, np.ndarray]:
        """Advantages and value targets of one episode (GAE; lambda 1 gives return - value)."""
        values = self.value.forward(episode.observations)[:, 0]
        last = 0.0
        if not episode.terminated and episode.final_observation is not None:
            last = float(self.value.forward(episode.final_observation)[0])
        next_values = np.append(values[1:], last)
        deltas = episode.rewards + self.discount * next_values - values
        advantages = np.empty_like(deltas)
        running = 0.0
        decay = self.discount * self.gae_lambda
        for t in range(deltas.shape[0] - 1, -1, -1):
            running = deltas[t] + decay * running
            advantages[t] = running
        return advantages, advantages + values

    def _update(self, batch: list[_Episode]) -> None:
        batch = [episode for episode in batch if episode.actions.shape[0]]
        if not batch:
            return
        pairs = [self._advantages(episode) for episode in batch]
        advantages = np.concatenate([a for a, _ in pairs])
        targets = np.concatenate([t for _, t in pairs])[:, None]
        obs = np.concatenate([episode.observations for episode in batch])
        actions = np.concatenate([episode.actions for episode in batch])
        masks = None
        if any(episode.masks is not None for episode in batch):
            masks = np.concatenate([
                np.ones((episode.actions.shape[0], self.n_actions), bool)
                if episode.masks is None else episode.masks for episode in batch])
        if self.normalize_advantages and advantages.shape[0] > 1:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)

        logits, inputs = self.policy.forward_cached(obs)
        loss, grad, entropy = softmax_policy_loss(logits, actions, advantages,
                                                  self.entropy_coef, masks)
        grads = self.policy.backward(inputs, grad)
        # Before clipping; reading the gradients changes nothing the optimizer computes.
        grad_norm = float(np.sqrt(sum(float(np.sum(g * g)) for g in grads)))
        self.policy_optimizer.step(grads)

        value_loss = 0.0
        n = obs.shape[0]
        for _ in range(self.value_iterations):
            predicted, inputs = self.value.forward_cached(obs)
            error = predicted - targets
            value_loss = float(0.5 * np.mean(error * error))
            self.value_optimizer.step(self.value.backward(inputs, error / n))
        self.last_stats = {"policy_loss": loss, "value_loss": value_loss, "entropy": entropy,
                           "grad_norm": grad_norm, "steps": float(n)}
        for name in ("policy_loss", "value_loss", "entropy", "grad_norm"):
            self.context.log_metric(name, self.last_stats[name])

    # -- weights and state ----------------------------------------------------------------
    def sync(self, muscle: str) -> dict[str, np.ndarray]:
        """The current policy, for a muscle that starts (a test phase after training)."""
        self._sent[muscle] = self.version
        return self.weights()

    def weights(self) -> dict[str, np.ndarray]:
        """The policy as an update for a muscle: ``W0``, ``b0``, ... and ``version`` (0-d)."""
        arrays = self.policy.to_arrays()
        arrays["version"] = np.array(self.version, dtype=np.int64)
        return arrays

    def state(self) -> dict[str, np.ndarray]:
        """Both networks (``policy.*``, ``value.*``), both optimizers (``*_adam.*``), and
        ``version``; all copies."""
        state = {**self.policy.to_arrays("policy."), **self.value.to_arrays("value."),
                 **self.policy_optimizer.state("policy_adam."),
                 **self.value_optimizer.state("value_adam.")}
        state["version"] = np.array(self.version, dtype=np.int64)
        state.update(pack_records([vars(episode) for episode in self._batch], "batch."))
        return state

    def _load(self, state: Mapping[str, np.ndarray]) -> None:
        self.policy.load_arrays(state, "policy.")
        self.value.load_arrays(state, "value.")
        self.policy_optimizer.load_state(state, "policy_adam.")
        self.value_optimizer.load_state(state, "value_adam.")
        self.version = int(state["version"])
        self._batch = [_Episode(**record) for record in
                       unpack_records(state, "batch.", tuple(_Episode.__dataclass_fields__))]

    def greedy_policy(self) -> dict[str, np.ndarray]:
        """The policy as an ``mlp`` policy."""
        return mlp_arrays(self.policy.layers)

    def greedy_checkpoint(self, path: str | os.PathLike[str]) -> Path:
        """Write the policy as an ``mlp`` checkpoint (:mod:`mosaic.agents.policies`).

        Its greedy action is the arg-max logit, exactly what the muscle does in test mode.
        Returns the path written (``.npz`` appended if missing).
        """
        return save_mlp(path, self.policy.layers)

    def teardown(self) -> None:
        """In ``"train"`` mode, write the checkpoint named by ``save_checkpoint``, if any."""
        if self.save_path is not None and self.context.mode != "test":
            self.greedy_checkpoint(self.save_path)

