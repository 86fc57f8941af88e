"""The step core: one environment's episode loop, free of transport.

An :class:`Episodes` holds the step bookkeeping of one environment of a run: the pending
actions, the settlement of rewards, evaluation rounds, self-play snapshots, the rows for the
store and ended episodes, adding to the run's :class:`~mosaic.stepping.ledger.Ledger`
(the digest chain, progress, termination). It talks to nothing but plain callables: the
muscles are asked through the ``ask`` it is built with, and the environment is stepped by
whoever drives it, in one of two ways:

* ask and tell, for a driver that scatters the requests of several environments before it
  gathers their replies (the SimulationController): send :meth:`Episodes.request`, receive an
  answer of type :attr:`Episodes.expects`, give it to :meth:`Episodes.accept`;
* :meth:`Episodes.advance` with a callable that steps the environment, for a driver in the
  environment's own thread (and the tests);
* a per-player environment's ``accept`` in two halves,
  :meth:`~mosaic.stepping.player_episodes.PlayerEpisodes.settle` and ``ask``, for a driver
  that asks its players only when it steps (Manual and Script mode's games).

Two implementations: :class:`~mosaic.stepping.player_episodes.PlayerEpisodes` for
per-player environments (PettingZoo AEC and parallel, Gymnasium) and
:class:`~mosaic.stepping.copy_episodes.CopyEpisodes` for an environment's ``copies:``,
stepped in lockstep.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mosaic.messages import EnvironmentPosition, Request, Response
from mosaic.stepping.ledger import Ledger

__all__ = ["Episodes", "Recording", "Schedule", "chosen"]


@dataclass(frozen=True, slots=True)
class Schedule:
    """What the run asks of every environment's loop: its seed (the episodes' seeds derive
    from it), the training ``episodes`` per environment, ``max_steps`` per episode (None: no
    limit), and a round of ``evaluate_episodes`` evaluation episodes after every
    ``evaluate_every`` training episodes (0: none)."""

    seed: int
    episodes: int
    max_steps: int | None = None
    evaluate_every: int = 0
    evaluate_episodes: int = 0


@dataclass(frozen=True, slots=True)
class Recording:
    """What the store keeps of an environment: every step, its episodes, and the keys of a
    step's info kept with it (``store_info``)."""

    steps: bool = False
    episodes: bool = False
    info: tuple[str, ...] = ()


class Episodes(ABC):
    """The episode loop of one environment (see the module's docstring).

    ``index`` is the environment's position in the file (its seeds derive from it);
    ``mapping`` maps each slot to the agent that plays it. The loop adds itself to the
    ledger's loops: a termination condition met in any loop finishes them all.
    """

    #: The environment's copies (0: a per-player environment, which has none).
    copies: int = 0
    #: The type of the environment's answer to the last :meth:`request`.
    expects: type[Response]

    def __init__(self, index: int, uid: str, mapping: dict[str, str], ledger: Ledger,
                 schedule: Schedule, recording: Recording) -> None:
        self.index = index
        self.uid = uid
        self.mapping = mapping
        self.ledger = ledger
        self.schedule = schedule
        self.record_steps = recording.steps
        self.record_episodes = recording.episodes and ledger.record_episode is not None
        self.store_info = recording.info
        self.finished = False
        ledger.loops.append(self)

    @abstractmethod
    def request(self) -> Request:
        """The environment's next request: a reset, or a step with the muscles' actions."""

    @abstractmethod
    def accept(self, reply: Response) -> None:
        """Account for the environment's ``reply`` to the last :meth:`request` and ask the
        muscles for the next actions. Errors of the callables propagate unchanged."""

    def advance(self, step_environment: Callable[[Request], Response]) -> None:
        """One reset or step, the environment stepped by ``step_environment``."""
        self.accept(step_environment(self.request()))

    @property
    def position(self) -> tuple[int, int, int] | None:
        """Where the loop stands, for a run that continues this one: the next training
        episode, the evaluation rounds and the evaluation episodes done (None: it has none)."""
        return None

    @property
    def copy_episodes(self) -> tuple[int, ...] | None:
        """Each copy's next training episode, for a run that continues this one (None: a loop
        without copies; see :class:`~mosaic.messages.EnvironmentPosition`)."""
        return None

    def resume(self, at: EnvironmentPosition) -> None:  # noqa: B027 - optional for a loop
        """Start at ``at``, where a saved run's loop stood. A loop without a position starts
        afresh (its episodes continue the digest chain all the same)."""


def chosen(keys: tuple[str, ...], info: Any) -> dict[str, Any] | None:
    """The ``keys`` of ``info`` that it has, for the store; ``None`` when it has none."""
    if not keys or not info:
        return None
    picked = {key: info[key] for key in keys if key in info}
    return picked or None
