"""Your own PyTorch model as a mosaic agent: REINFORCE on CartPole (README: Writing agents)."""
import numpy as np
import torch

from mosaic.agents import Brain, Muscle


def make_model(context):  # for the spaces of the (single) slot; float32 observations
    slot = next(iter(context.slots.values()))
    return torch.nn.Sequential(torch.nn.Linear(slot.observation_space.shape[0], 64),
                               torch.nn.Tanh(), torch.nn.Linear(64, slot.action_space.n))


class TorchMuscle(Muscle):  # acts with a copy of the brain's model
    def setup(self, context):
        super().setup(context)
        self.model, self.episode = make_model(context), []

    def act(self, slot, observation, legal_actions=None):
        probs = np.array(torch.softmax(self.model(torch.as_tensor(observation)), -1).tolist())
        action = int(self.context.rng.choice(len(probs), p=probs / probs.sum()))
        self.episode.append([observation, action, 0.0])
        return action

    def feedback(self, slot, reward, terminated, truncated, observation):
        self.episode[-1][2] += reward
        if terminated or truncated:  # the whole episode goes to the brain
            columns, self.episode = [np.array(c) for c in zip(*self.episode, strict=True)], []
            return dict(zip(("observations", "actions", "rewards"), columns, strict=True))

    def apply_update(self, update):  # the brain's weights: at start, then after each episode
        self.model.load_state_dict({k: torch.as_tensor(v) for k, v in update.items()})


class TorchBrain(Brain):  # owns the model and its optimizer
    def setup(self, context):
        super().setup(context)
        torch.manual_seed(context.seed)  # the same run seed, the same initial weights
        self.model = make_model(context)
        self.optimizer = torch.optim.Adam(self.model.parameters(), context.params["learning_rate"])

    def learn(self, muscle, experience):
        returns = np.cumsum(experience["rewards"][::-1])[::-1]  # reward to go, normalised
        returns = torch.as_tensor((returns - returns.mean()) / (returns.std() + 1e-8))
        log_probs = torch.log_softmax(self.model(torch.as_tensor(experience["observations"])), -1)
        taken = log_probs.gather(1, torch.as_tensor(experience["actions"])[:, None])[:, 0]
        self.optimizer.zero_grad()
        (-(taken * returns).mean()).backward()
        self.optimizer.step()
        return self.state()  # the new weights, for the muscle

    def state(self):  # {name: np.ndarray}: what mosaic sends, and saves (.npz) after a phase
        return {k: v.detach().numpy().copy() for k, v in self.model.state_dict().items()}

    def load_state(self, state):  # a checkpoint: the next phase's, or `load:`
        self.model.load_state_dict({k: torch.as_tensor(v) for k, v in state.items()})

    def sync(self, muscle):  # what a muscle acts with when it starts (a test phase's, too)
        return self.state()
