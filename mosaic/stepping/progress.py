"""The run's progress: the counters its episode loops update and its executor reads."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

__all__ = ["RECENT_EPISODES", "Progress"]

#: How many of the last episodes the recent mean return is over (progress and the summary).
RECENT_EPISODES = 100


@dataclass
class Progress:
    """Counters the run's episode loops update and the executor reads (plain ints: atomic)."""

    episodes: int = 0
    steps: int = 0
    episodes_total: int = 0
    return_sum: float = 0.0
    #: agent uid -> sum of its episode returns (its slots' rewards), and how many episodes it
    #: played, for per-agent means.
    agent_return_sums: dict[str, float] = field(default_factory=dict)
    agent_episodes: dict[str, int] = field(default_factory=dict)
    last_return: float | None = None
    #: The returns of the last RECENT_EPISODES episodes, and of each agent in them.
    recent_returns: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT_EPISODES))
    agent_recent_returns: dict[str, deque[float]] = field(default_factory=dict)
    #: Hex digest of every step taken so far (set when the simulation stops).
    digest: str | None = None
    #: The digest chain at the last episode end (hex), and where each environment's loop stood
    #: then, with each copy's next episode for an environment with copies: what a checkpoint
    #: keeps for a run that continues this one.
    chain: str = ""
    positions: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    copy_episodes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    first_step_at: float | None = None
    last_step_at: float | None = None
    #: Why a termination condition ended the run before its episodes (None: it did not).
    ended_early: str | None = None
    #: A run of a search: whether its pruner ended it (``ended_early`` says why), and the
    #: (episodes, value) of its metric at each episode end (see mosaic.orchestration.pruning).
    pruned: bool = False
    reported: list[tuple[int, float]] = field(default_factory=list)

    def agent_ended_episode(self, agent: str, total: float) -> None:
        """Count ``total``, ``agent``'s return in an episode that ended."""
        self.agent_return_sums[agent] = self.agent_return_sums.get(agent, 0.0) + total
        self.agent_episodes[agent] = self.agent_episodes.get(agent, 0) + 1
        recent = self.agent_recent_returns.get(agent)
        if recent is None:
            recent = self.agent_recent_returns[agent] = deque(maxlen=RECENT_EPISODES)
        recent.append(total)

    @property
    def recent_mean(self) -> float | None:
        """The mean return of the last :data:`RECENT_EPISODES` episodes (None before any)."""
        recent = list(self.recent_returns)  # a copy: the controller appends meanwhile
        return sum(recent) / len(recent) if recent else None
