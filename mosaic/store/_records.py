"""What reading a store returns: frozen records of runs, transitions, episodes and steps."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple


@dataclass(frozen=True)
class RunSummary:
    """One run as listed. Times are UTC; ``duration`` is in seconds, None if unknown.

    ``episodes`` and ``steps`` are the run's totals once it ended, and the totals of the
    episodes recorded so far while it has not. ``mean_return`` is over its recorded (training)
    episodes, ``recent_mean_return`` over the last 100 of them.
    ``params`` are the values of the experiment's sweep the run was given, by key path;
    ``digest`` is the fingerprint of its trajectory, stored when it ended (None before).
    A run of several agents (multi-agent, self-play) has both means per agent too, in
    ``agent_recent_means`` and ``agent_means`` (agent uid -> mean of its returns; empty for a
    run of one agent): in a zero-sum game the total says nothing.
    ``status`` is text, not a :class:`~mosaic.core.run_states.RunStatus`: it may be
    ``interrupted`` (a running run whose process is gone), which is never stored.
    """

    id: int
    uid: str
    experiment: str
    run_index: int
    seed: int | None
    status: str
    started_at: datetime | None
    ended_at: datetime | None
    duration: float | None
    episodes: int
    steps: int
    mean_return: float | None
    error: str | None
    params: dict[str, Any] = field(default_factory=dict)
    digest: str | None = None
    recent_mean_return: float | None = None
    agent_recent_means: dict[str, float] = field(default_factory=dict)
    agent_means: dict[str, float] = field(default_factory=dict)
    #: A run of a search (``sweep: {search: ...}``): what it reported (None: not one).
    search: SearchReport | None = None


#: The source of the metric rows that keep what a search's run reported at each episode end.
SEARCH_SOURCE = "search"


@dataclass(frozen=True)
class SearchReport:
    """What a run of a search reported of the search's ``metric`` at its last episode end
    (``value``; None if it reported nothing), and the search's ``direction``
    (``maximize``/``minimize``)."""

    metric: str
    direction: str
    value: float | None


@dataclass(frozen=True)
class Transition:
    """One state change of a run, in order of ``seq``."""

    seq: int
    from_state: str | None
    to_state: str
    reason: str | None
    at: datetime


@dataclass(frozen=True)
class EpisodeSummary:
    """One recorded episode; ``returns`` maps environment agent ids to returns; ``copy`` is the
    copy of an environment with ``copies:`` (0 otherwise) whose episode it was."""

    environment: str
    episode: int
    steps: int
    total_return: float | None
    returns: dict[str, float]
    terminated: bool
    truncated: bool
    seed: int | None
    copy: int = 0


@dataclass(frozen=True)
class EpisodeStats:
    """Aggregates over all recorded episodes of a run (None when there are none).

    ``recent_mean_return`` is the mean return of the last ``recent`` episodes to end: all of
    them when the run recorded fewer than it was asked for; ``agent_recent_means`` the same
    per agent in a run of several agents (empty otherwise).
    """

    count: int
    total_steps: int
    mean_steps: float | None
    mean_return: float | None
    min_return: float | None
    max_return: float | None
    recent: int = 0
    recent_mean_return: float | None = None
    agent_recent_means: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RunDetail:
    """Everything about one run that fits on a screen.

    ``first_episodes`` and ``last_episodes`` hold a few episodes each; together they are all of
    them when there are few (``last_episodes`` is then empty). ``step_rows`` counts the stored
    step rows, which a run still in progress keeps adding to.
    """

    run: RunSummary
    experiment_file: str | None
    pid: int | None
    hostname: str | None
    digest: str | None
    last_heartbeat: datetime | None
    transitions: list[Transition]
    episode_stats: EpisodeStats
    first_episodes: list[EpisodeSummary] = field(default_factory=list)
    last_episodes: list[EpisodeSummary] = field(default_factory=list)
    step_rows: int = 0

    @property
    def uid(self) -> str:
        """The run's uid."""
        return self.run.uid

    @property
    def status(self) -> str:
        """The run's status, ``interrupted`` included."""
        return self.run.status

    @property
    def error(self) -> str | None:
        """The error the run ended with, if any."""
        return self.run.error

    @property
    def mean_return(self) -> float | None:
        """The mean total return over recorded episodes."""
        return self.run.mean_return


class StepRecord(NamedTuple):
    """One stored step row with observation, action and info decoded.

    ``info`` holds the keys of the step's info that the environment's ``store_info`` chose
    (``None``: none chosen, or none of them in this step's info).
    """

    environment: str
    episode: int
    step: int
    agent: str | None
    slot: str | None
    observation: Any
    action: Any
    reward: float | None
    terminated: bool
    truncated: bool
    info: dict[str, Any] | None = None
