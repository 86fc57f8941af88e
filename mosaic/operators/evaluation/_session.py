"""The evaluation session: what MOSAIC's SessionController is for Script and Manual mode.

A session holds the evaluation's lanes and drives them through the operator services:

* :class:`~mosaic.operators.driver.multi_operator.MultiOperatorService` keeps one worker per
  operator side by side, each with its own environment instance; the session launches each one
  on its own (a worker that cannot start fails only its operator) and stops them all on close.
* :class:`~mosaic.operators.api.services.ActorService` holds one actor per lane, registered in
  the file's order (the first one is active). Before every Reset All the session broadcasts the
  episode seed with ``ActorService.seed(n)``: that broadcast is how every lane learns the seed
  its worker resets on, so every operator faces the same seed.

A lane's actor is a placeholder actor in the seeds' sense: the lane's worker owns its
environment, chooses its actions and steps it, so the actor's ``select_action`` answers
``None`` (the driver applies no action of its own) and the session steps lanes, not actions.

A multi-agent config (one worker per player of a game the driver owns) makes a
:class:`~mosaic.operators.evaluation._game.GameLane`: its workers start as one operator of the
MultiOperatorService (under a MultiAgentOperatorHandle), and inside the lane each player's
worker is a real actor of the lane's own ActorService, chosen for each turn by a
PolicyMappingService; the seed the session broadcasts reaches them through the lane.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mosaic.operators.api.operator import NamedOperator
from mosaic.operators.api.services import ActorService
from mosaic.operators.driver.multi_operator import MultiOperatorService
from mosaic.operators.evaluation._game import GameLane
from mosaic.operators.evaluation._lanes import Lane, Launcher, Rounds

if TYPE_CHECKING:
    from mosaic.operators.evaluation._models import TimeoutsSpec

__all__ = ["EvaluationSession", "LaneActor"]


class LaneActor(NamedOperator):
    """One lane as an actor of the session's :class:`ActorService` (a placeholder actor).

    ``seed(n)`` and ``reset(n)`` set the seed the lane's next reset sends to its worker;
    ``select_action`` answers ``None``, since the worker chooses and steps by itself.
    """

    def __init__(self, lane: Lane) -> None:
        self.lane = lane
        self._id = lane.operator_id
        self._name = lane.label

    def seed(self, n: int) -> None:
        self.lane.next_seed = n

    def select_action(self, observation: Any, legal_actions: Sequence[Any] | None = None) -> None:
        return None

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self.lane.next_seed = seed

    def on_step_result(
        self, observation: Any, action: Any, reward: float, terminated: bool, truncated: bool
    ) -> None:
        return None


class EvaluationSession:
    """The lanes of one evaluation, their workers and their actors (see the module docstring).

    ``configs`` are :class:`~mosaic.operators.api.config.OperatorConfig` objects (single-agent,
    or multi-agent for a game) with unique ids (``ValueError`` otherwise). Nothing starts
    until :meth:`launch_all`; call :meth:`close` (idempotent) to stop and reap every worker.
    """

    def __init__(
        self,
        configs: Sequence[Any],
        timeouts: TimeoutsSpec,
        max_fallback_fraction: float,
        *,
        launcher: Launcher | None,
        run_id: str,
    ) -> None:
        self.lanes = [(GameLane if c.is_multi_agent else Lane)(c, timeouts, max_fallback_fraction)
                      for c in configs]
        self.workers = MultiOperatorService(launcher, run_id=run_id, stop_timeout=timeouts.stop)
        self.actors = ActorService()
        for lane in self.lanes:
            self.workers.add_operator(lane.config)  # ValueError on a repeated id
            self.actors.register_actor(
                LaneActor(lane), activate=len(self.actors) == 0,
                backend_label=f"{lane.config.operator_type} worker")
        self._rounds = Rounds(len(self.lanes))

    def launch_all(self) -> None:
        """Start every lane's worker, one by one from this thread (a worker is tied to the
        thread that started it); a worker that cannot start fails its operator only."""
        for lane in self.lanes:
            lane.launch(self.workers)

    def reset_all(self, episode_index: int, seed: int) -> list[Lane]:
        """Broadcast ``seed`` to every actor, then start episode ``episode_index`` in every
        live lane (in parallel); returns the lanes now in an episode."""
        self.actors.seed(seed)
        live = [lane for lane in self.lanes if lane.alive]
        self._rounds.run(live, lambda lane: lane.reset(episode_index))
        return [lane for lane in live if lane.in_episode]

    def step(self, lanes: Sequence[Lane]) -> int:
        """One step for each of ``lanes`` (in parallel); returns how many stepped."""
        return sum(self._rounds.run(lanes, lambda lane: lane.step()))

    def close(self) -> None:
        """Stop and reap every worker (idempotent)."""
        self._rounds.close()
        for lane in self.lanes:
            lane.stop()
        self.workers.stop_all()
