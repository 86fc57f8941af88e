"""Ready-made learners for mosaic agents, in NumPy (and three brains on PyTorch).

* :class:`TabularQBrain` / :class:`TabularQMuscle`: Q-learning for Discrete observations and
  actions (FrozenLake, Taxi, ...).
* :class:`PolicyGradientBrain` / :class:`PolicyGradientMuscle`: REINFORCE with a value baseline
  for Box observations and Discrete actions (CartPole, ...), on :class:`MLP` with :class:`Adam`.
* :class:`DQNBrain` / :class:`DQNMuscle`: deep Q-learning (Double DQN by default) with a replay
  buffer and a target network, for Box observations and Discrete actions, on :class:`MLP`.
* :class:`PPOBrain` / :class:`PPOMuscle`: proximal policy optimisation (clipped surrogate, GAE)
  for Box observations and Discrete or Box actions (CartPole, Pendulum, ...), on :class:`MLP`.
* :class:`MAPPOBrain` / :class:`MAPPOMuscle`: PPO with a centralised critic (MAPPO) or a local
  one (IPPO) for PettingZoo parallel environments, the slots of an agent sharing one policy.
* :class:`TD3Brain` / :class:`TD3Muscle` and :class:`SACBrain` / :class:`SACMuscle`: TD3 and soft
  actor-critic with a replay buffer and twin critics, for Box observations and bounded Box
  actions (Pendulum, MountainCarContinuous, ...), on :class:`MLP`.
* ``mosaic.agents.learners.torch_ppo:TorchPPOBrain``: PPO's brain on PyTorch (the ``torch``
  extra), with :class:`PPOMuscle`; not imported here, so that mosaic works without torch.
* ``mosaic.agents.learners.torch_actor_critic:TorchTD3Brain`` and ``...:TorchSACBrain``: TD3's
  and SAC's brains on PyTorch (the ``torch`` extra), with :class:`TD3Muscle` and
  :class:`SACMuscle`; not imported here either.
* :class:`Harness`: drives a brain and its muscle on a Gymnasium env in this process, in mosaic's
  call order, for tests and debugging; real runs go through ``mosaic experiment-start``.

Each takes PettingZoo's ``{"observation", "action_mask"}`` observations as they are and plays
only the legal actions (connect_four_v3, tictactoe_v3, ...). Each serves several slots with one
network or table (parameter sharing: ``policy_mapping`` maps several env agents to the agent),
keeping every slot's trajectory apart; the network learners take ``agent_id: one_hot`` to see
which slot acts (:class:`~mosaic.agents.learners._common.AgentIds`).

Name them in an experiment file as ``mosaic.agents.learners:TabularQBrain`` and so on. Each
brain's ``greedy_checkpoint(path)`` writes the :mod:`mosaic.agents.policies` format that the
RL worker plays.
"""

from mosaic.agents.learners.dqn import DQNBrain, DQNMuscle
from mosaic.agents.learners.harness import EpisodeStats, Harness
from mosaic.agents.learners.mappo import MAPPOMuscle
from mosaic.agents.learners.mappo_brain import MAPPOBrain
from mosaic.agents.learners.mlp import MLP, Adam, log_softmax, softmax, softmax_policy_loss
from mosaic.agents.learners.policy_gradient import PolicyGradientBrain, PolicyGradientMuscle
from mosaic.agents.learners.ppo import PPOMuscle
from mosaic.agents.learners.ppo_brain import PPOBrain
from mosaic.agents.learners.replay import ReplayBuffer
from mosaic.agents.learners.sac import SACBrain, SACMuscle
from mosaic.agents.learners.tabular_q import TabularQBrain, TabularQMuscle, Transition
from mosaic.agents.learners.td3 import TD3Brain, TD3Muscle

__all__ = [
    "MLP",
    "Adam",
    "DQNBrain",
    "DQNMuscle",
    "EpisodeStats",
    "Harness",
    "MAPPOBrain",
    "MAPPOMuscle",
    "PPOBrain",
    "PPOMuscle",
    "PolicyGradientBrain",
    "PolicyGradientMuscle",
    "ReplayBuffer",
    "SACBrain",
    "SACMuscle",
    "TD3Brain",
    "TD3Muscle",
    "TabularQBrain",
    "TabularQMuscle",
    "Transition",
    "log_softmax",
    "softmax",
    "softmax_policy_loss",
]
