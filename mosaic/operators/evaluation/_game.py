"""A game lane: one multi-agent game the driver owns, each player's actions from a worker.

A single-agent lane's worker owns its environment and steps it. A game lane owns the game (a
PettingZoo environment, made as an experiment makes it) and asks its players for their actions,
as MOSAIC's SessionController does in a multi-agent game:

* one worker per player, all under one
  :class:`~mosaic.operators.driver.multi_handle.MultiAgentOperatorHandle` that the session's
  :class:`~mosaic.operators.driver.multi_operator.MultiOperatorService` starts; each gets
  ``init_agent`` (its player, the game, the number of actions, its own seed);
* each player's worker is an actor (:class:`PlayerActor`, id ``<lane>.<player>``) of the lane's
  own :class:`~mosaic.operators.api.services.ActorService` (the first player's is active
  first), and a :class:`~mosaic.operators.api.services.PolicyMappingService` maps each player
  to its actor; each step, ``select_action_for`` activates the actor of the player whose turn
  it is and asks it, and ``notify_step`` hands it the outcome;
* Reset All: the seed the session broadcast to the lane is broadcast again, with
  ``ActorService.seed``, to every player's actor, which resets its worker on it; the game is
  reset on the same seed.

The seeds' error table holds: a player the game makes act that no actor plays raises
``KeyError``; ``None`` from a player is the no-op action (the first legal action, or the
space's origin); an exception from a player or from the game aborts the episode, and the lane
fails with the cause (its workers stopped, the other lanes going on).

One lane step is one step of the game: one player's move in a turn-based (AEC) game; in a
parallel game every acting player's action, all of them asked before any answer is awaited
(``send_select_action``, then ``gather_actions``), so their workers think side by side.
Telemetry names the player of each step and keeps returns, actions and LLM fallbacks per player.

The game's episode is kept by the step core an experiment's environment has
(:class:`~mosaic.stepping.player_episodes.PlayerEpisodes`): its returns, its ``max_steps``, its
reward rule (each player's feedback, given to its actor's ``notify_step``, is every reward
since its last action, when it is about to act again or the episode ends: a loser's -1 goes
to its last move) and its digest (each ``episode`` record's ``digest``: the same seed and the
same moves give the same one). The lane asks its players when it steps, not as soon as the
last step is settled (the core's ``settle``, then ``ask``), so a person's move is asked for
only once Step All is clicked, after it was typed.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from gymnasium import spaces

from mosaic.core.errors import MosaicError, WorkerCrashed, WorkerError
from mosaic.environments.answers import reset_answer, update_answer
from mosaic.environments.factory import make_environment
from mosaic.environments.info import InfoFilter
from mosaic.messages import (
    AgentEvaluateRequest,
    AgentUpdateRequest,
    AgentUpdateResponse,
    EnvironmentResetRequest,
    EnvironmentResetResponse,
    EnvironmentUpdateRequest,
    EnvironmentUpdateResponse,
    Request,
    Response,
)
from mosaic.operators import protocol as p
from mosaic.operators.api.llm_routing import is_chess
from mosaic.operators.api.operator import NamedOperator, StepSnapshot
from mosaic.operators.api.services import ActorService, PolicyMappingService
from mosaic.operators.evaluation._lanes import Lane
from mosaic.operators.evaluation._results import EpisodeResult, OperatorResult, fallback_share
from mosaic.operators.llm_accounting import FallbackTally, account_of, bdi_account_of
from mosaic.operators.moves import MoveChoice, move_choices
from mosaic.operators.worker.runtime import discrete_actions, noop_action
from mosaic.runtime.processes.child import describe_exit
from mosaic.stepping.episodes import Recording, Schedule
from mosaic.stepping.ledger import Ledger
from mosaic.stepping.player_episodes import PlayerEpisodes

if TYPE_CHECKING:
    from mosaic.environments.adapter import EnvironmentAdapter
    from mosaic.operators.driver.multi_operator import MultiOperatorService
    from mosaic.operators.evaluation._models import TimeoutsSpec

__all__ = ["GAME_SETTINGS", "GameLane", "PlayerActor", "PlayerView"]

log = logging.getLogger(__name__)

#: Where the game stands for its players: the environment's last answer, or the step core's
#: question to them (each has the observations, the acting players and their action masks).
_Turn = (EnvironmentResetResponse | EnvironmentUpdateResponse | AgentUpdateRequest
         | AgentEvaluateRequest)

#: The keys of a game operator's ``OperatorConfig.settings``: the game's keyword arguments,
#: the render modes to try in order, and each player's display name.
GAME_SETTINGS = ("env_kwargs", "render_modes", "display_names")


class PlayerActor(NamedOperator):
    """One player's worker, in the game's
    :class:`~mosaic.operators.driver.multi_handle.MultiAgentOperatorHandle` ``handle``, as an
    actor (a real one: the driver applies what it chooses).

    ``seed(n)`` keeps ``n`` for the next :meth:`reset`, which sends the worker ``reset`` on it;
    ``select_action`` sends ``select_action`` and returns the chosen action, keeping the reply
    in :attr:`last_reply`. Each call waits at most its timeout and raises the handle's
    ``WorkerError`` unchanged.
    """

    def __init__(self, handle: Any, operator_id: str, name: str, player: str,
                 timeouts: TimeoutsSpec) -> None:
        self.handle = handle
        self._id = operator_id
        self._name = name
        self.player = player
        self._timeouts = timeouts
        self.next_seed: int | None = None
        self.last_reply: dict[str, Any] = {}

    def seed(self, n: int) -> None:
        self.next_seed = n

    def reset(self, seed: int | None = None) -> None:
        self.handle[self.player].reset(seed if seed is not None else self.next_seed,
                                       self._timeouts.reset)

    def select_action(self, observation: Any, legal_actions: Sequence[Any] | None = None) -> Any:
        reply: dict[str, Any] = self.handle.select_action(
            self.player, observation, list(legal_actions) if legal_actions is not None else None,
            timeout=self._timeouts.step)
        self.last_reply = reply
        return reply.get("action")

    def on_step_result(self, observation: Any, action: Any, reward: float, terminated: bool,
                       truncated: bool) -> None:
        return None  # agent mode has no command for it: the driver owns the game


class _Player:
    """One player's part of the lane: its actor, its results and the current episode's."""

    def __init__(self, player: str, actor_id: str, label: str, kind: str) -> None:
        self.player = player
        self.actor_id = actor_id
        self.label = label
        self.kind = kind
        self.result = OperatorResult(actor_id, label)
        self.episode_return = 0.0
        self.actions = 0
        self.episode_llm: FallbackTally | None = None
        self.last_action: Any = None
        self.last_move: str | None = None

    def new_episode(self) -> None:
        self.episode_return, self.actions, self.episode_llm = 0.0, 0, None
        self.last_action = self.last_move = None

    def account(self, account: dict[str, Any]) -> None:
        if self.result.llm is None:
            self.result.llm = FallbackTally()
        if self.episode_llm is None:
            self.episode_llm = FallbackTally()
        self.result.llm.add(account)
        self.episode_llm.add(account)

    def summary(self) -> dict[str, Any]:
        """This player's part of an episode record."""
        summary: dict[str, Any] = {"operator": self.actor_id, "return": self.episode_return,
                                   "actions": self.actions}
        if self.episode_llm is not None:
            summary["llm"] = self.episode_llm.counts()
        return summary


class GameLane(Lane):
    """One game operator (a multi-agent ``OperatorConfig``): the game, one worker per player.

    The same contract as :class:`Lane` (every worker error, and every exception of a player or
    the game, is recorded as the lane's failure and stops its workers; nothing escapes), with
    :attr:`players` (the lane's ActorService), :attr:`mapping` (player -> actor id) and
    :meth:`results` giving one result per player. ``max_steps`` counts the game's steps.
    """

    def __init__(self, operator_config: Any, timeouts: TimeoutsSpec,
                 max_fallback_fraction: float) -> None:
        super().__init__(operator_config, timeouts, max_fallback_fraction)
        settings = operator_config.settings
        names: Mapping[str, str] = settings.get("display_names") or {}
        self._env_kwargs: dict[str, Any] = dict(settings.get("env_kwargs") or {})
        self._render_modes: tuple[str, ...] = tuple(settings.get("render_modes") or ())
        self._render_mode: str | None = None
        self.players = ActorService()
        self.mapping = PolicyMappingService()
        self.player_state: dict[str, _Player] = {}
        for player, assignment in operator_config.worker_assignments.items():
            actor_id = f"{self.operator_id}.{player}"
            self.player_state[player] = _Player(player, actor_id, names.get(player, player),
                                                assignment.worker_type)
            self.mapping.set_mapping(player, actor_id)
        self._env: EnvironmentAdapter | None = None
        self._info = InfoFilter(self.operator_id)
        #: The episode under way on the step core (a new one each reset), and the game's last
        #: answer.
        self._loop: PlayerEpisodes | None = None
        self._outcome: EnvironmentResetResponse | EnvironmentUpdateResponse | None = None
        #: The actions the players chose for the step under way, with their workers' replies.
        self._chosen: dict[str, tuple[Any, dict[str, Any]]] = {}
        #: The digest of the episode that ended last (hex).
        self._digest: str | None = None
        self._culprit: str | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def launch(self, workers: MultiOperatorService) -> bool:
        """Make the game, start one worker per player and send each ``init_agent``; False (and
        a failure) if any of it fails."""
        self._workers = workers
        try:
            self._env = self._make_game()
        except Exception as exc:  # the game's own code may raise anything
            self._record_failure("launch", "launch", f"could not make {self.config.task}: "
                                 f"{type(exc).__name__}: {exc}", None)
            return False
        if not super().launch(workers):
            return False
        try:
            self.handle.send_init_agents(settings=self._init_settings(),
                                         timeout=self.timeouts.reset)
        except WorkerError as exc:
            self._fail("launch", exc, self.timeouts.reset)
            return False
        for index, (player, state) in enumerate(self.player_state.items()):
            self.players.register_actor(
                PlayerActor(self.handle, state.actor_id, state.label, player, self.timeouts),
                activate=index == 0, backend_label=f"{state.kind} worker")
        return True

    def _make_game(self) -> EnvironmentAdapter:
        kwargs = dict(self._env_kwargs)
        game = make_environment(self.config.task, kwargs)
        declared = getattr(getattr(game, "env", None), "metadata", {}).get("render_modes", ())
        mode = next((m for m in self._render_modes if m in declared), None)
        if mode is None:
            return game
        game.close()  # made again, rendering
        self._render_mode = mode
        return make_environment(self.config.task, {**kwargs, "render_mode": mode})

    def _init_settings(self) -> dict[str, dict[str, Any]]:
        """Each player's ``init_agent`` settings: its number of actions (a Discrete space from
        0) and its own seed."""
        if self._env is None:
            raise RuntimeError("the game is not made")
        settings: dict[str, dict[str, Any]] = {}
        for player, assignment in self.config.worker_assignments.items():
            space = self._env.slots[player][1]
            own: dict[str, Any] = {}
            if isinstance(space, spaces.Discrete) and int(space.start) == 0:
                own["n_actions"] = int(space.n)
            if assignment.settings.get("seed") is not None:
                own["seed"] = assignment.settings["seed"]
            settings[player] = own
        return settings

    def stop(self) -> int | None:
        """Stop and reap every player's worker and close the game (idempotent)."""
        env, self._env = self._env, None
        if env is not None:
            try:
                env.close()
            except Exception:  # closing must go on to the workers
                log.exception("closing the game of operator %r failed", self.operator_id)
        return super().stop()

    def results(self) -> dict[str, OperatorResult]:
        """One result per player, by its actor id."""
        return {state.actor_id: state.result for state in self.player_state.values()}

    # -- episodes -------------------------------------------------------------------------------

    def reset(self, episode_index: int) -> bool:
        """Broadcast the seed to every player's actor, reset each one's worker on it, and the
        game; False (and a failure) if one fails."""
        seed = self._begin(episode_index)
        if seed is None:
            return False
        for state in self.player_state.values():
            state.new_episode()
        self.players.seed(seed)
        try:
            for actor_id in self.players.actor_ids():
                self._culprit = actor_id
                self.players.get_actor(actor_id).reset()
            self._culprit = None
            self._loop = self._episode_loop()
            self._loop.settle(self._play(self._loop.request()))
        except WorkerError as exc:
            self._fail("reset", exc, self.timeouts.reset)
            return False
        except Exception as exc:  # the game's reset: the episode cannot start
            self._abort("reset", exc)
            return False
        self._render()
        self.in_episode = True
        return True

    def step(self) -> bool:
        """One step of the game: ask the acting players, apply their actions; False when none
        was taken (the lane failed, or is not in an episode)."""
        loop = self._loop
        if not self.alive or not self.in_episode or loop is None or self._env is None:
            return False
        try:
            loop.ask()  # the acting players' actions, after the feedback of the last step
            request = loop.request()
            after = cast(EnvironmentUpdateResponse, self._play(request))
            loop.settle(after)
            self._record_game_step(after)
            if loop.ending:
                loop.ask()  # every player's last feedback; the core ends the episode
        except WorkerError as exc:
            self._fail("step", exc, self.timeouts.step)
            return False
        except Exception as exc:  # the seeds' table: an exception aborts the episode
            self._abort("step", exc)
            return False
        self._render()
        if loop.needs_reset:
            self._finish_game(after.terminated, after.truncated or not after.terminated,
                              "environment" if after.terminated or after.truncated
                              else "max_steps")
        return True

    def _episode_loop(self) -> PlayerEpisodes:
        """The step core for one episode of the game: the players are its slots, each played
        by its actor; it takes the game's ``max_steps``; its digest starts afresh."""
        ledger = Ledger.in_process(self._episode_ended)
        mapping = {player: state.actor_id for player, state in self.player_state.items()}
        return PlayerEpisodes(0, self.operator_id, mapping, ledger,
                              Schedule(0, sys.maxsize, self.config.max_steps or None),
                              Recording(episodes=True), self._ask_players)

    def _play(self, request: Request) -> Response:
        """The game's answer to the step core's ``request``: reset on the episode's seed (the
        session's, not the core's own), or step with the players' actions."""
        if self._env is None:
            raise RuntimeError("the game is closed")
        if isinstance(request, EnvironmentUpdateRequest):
            self._outcome = update_answer(self._env, request, self._info)
        else:
            self._outcome = reset_answer(self._env, EnvironmentResetRequest(self.seed),
                                         self._info)
        return self._outcome

    def _ask_players(self, question: AgentUpdateRequest | AgentEvaluateRequest
                     ) -> tuple[tuple[str, AgentUpdateResponse]]:
        """The step core's ``ask``: each settled action's feedback to its player's actor
        (``notify_step``), then the actions of the players who act next, through the policy
        mapping (none once the game is over)."""
        self._chosen = {}
        for player, reward in question.rewards.items():  # the step just taken settled these
            state = self.player_state[player]
            self._culprit = state.actor_id
            self.players.set_active_actor(self._culprit)
            self.players.notify_step(StepSnapshot(
                step_index=question.step - 1, observation=question.observations.get(player),
                reward=float(reward), terminated=question.terminated,
                truncated=question.truncated, agent_id=player, action=state.last_action,
                episode_index=self.episode_index or 0, seed=self.seed))
        if not (question.terminated or question.truncated):
            if len(question.acting) > 1:
                self._chosen = self._ask_together(question)
            else:
                self._chosen = {player: self._ask(player, question)
                                for player in question.acting}
        self._culprit = None
        return ((self.operator_id,
                 AgentUpdateResponse({player: action
                                      for player, (action, _) in self._chosen.items()})),)

    def _episode_ended(self, run_id: int, environment: str, episode: int, steps: int,
                       total_return: float | None, returns: Mapping[str, float],
                       terminated: bool, truncated: bool, seed: int | None, copy: int = 0,
                       evaluation: bool = False, snapshots: Mapping[str, int] | None = None,
                       chain: str | None = None) -> None:
        """The step core's episode record: the lane keeps its digest."""
        self._digest = chain

    def _ask(self, player: str, turn: _Turn) -> tuple[Any, dict[str, Any]]:
        """The action of ``player`` through the policy mapping, and its worker's reply."""
        legal = self._legal(player, turn)
        snapshot = StepSnapshot(step_index=self.steps, observation=turn.observations[player],
                                agent_id=player, legal_actions=legal,
                                episode_index=self.episode_index or 0, seed=self.seed)
        action = self.mapping.select_action_for(player, snapshot, self.players)  # KeyError
        actor = self.players.get_active_actor()
        reply = actor.last_reply if isinstance(actor, PlayerActor) else {}
        return self._taken(player, action, legal), reply

    def _ask_together(self, turn: _Turn) -> dict[str, tuple[Any, dict[str, Any]]]:
        """The actions of a parallel game's acting players, all asked before any answer is
        awaited (``send_select_action``, then ``gather_actions``): their workers think side by
        side, so one LLM player's wait does not add to the next one's. Each player's actor is
        the one the policy mapping names (``KeyError`` when none plays it, before any is
        asked); its answer is taken as :meth:`_ask` takes one."""
        legal: dict[str, list[int] | None] = {}
        actors: dict[str, str] = {}
        for player in turn.acting:
            legal[player] = self._legal(player, turn)
            actors[player] = self.mapping.get_actor_id(player)  # KeyError: no actor plays it
            self.players.get_actor(actors[player])  # KeyError: mapped to no registered actor
        for player in turn.acting:
            self._culprit = actors[player]
            self.handle.send_select_action(player, turn.observations[player], legal[player])
        try:
            replies = self.handle.gather_actions(self.timeouts.step)
        except WorkerCrashed as exc:  # the worker that exited: operator <lane>.<player>
            self._culprit = exc.operator_id
            raise
        chosen = {}
        for player in turn.acting:
            self._culprit = actors[player]
            reply = self.handle.action_reply(player, replies[player], self.timeouts.step)
            self.players.set_active_actor(actors[player])
            actor = self.players.get_active_actor()
            if isinstance(actor, PlayerActor):
                actor.last_reply = reply
            chosen[player] = self._taken(player, reply.get("action"), legal[player]), reply
        return chosen

    def _legal(self, player: str, turn: _Turn) -> list[int] | None:
        """The legal actions of ``player`` in ``turn`` (None: all), and it is the culprit of
        what goes wrong next."""
        state = self.player_state.get(player)
        self._culprit = state.actor_id if state is not None else None
        return _legal_actions(turn, player)

    def _taken(self, player: str, action: Any, legal: list[int] | None) -> Any:
        """``player``'s ``action`` as the game takes it: None is the no-op; anything outside
        its action space is refused (MosaicError)."""
        space = self._env.slots[player][1] if self._env is not None else None
        if action is None:  # the no-op
            return noop_action(space, legal)
        if isinstance(space, spaces.Discrete) and (isinstance(action, bool)
                                                   or not isinstance(action, int)):
            raise MosaicError(f"it chose {action!r}, which is not in its action space {space}")
        if space is not None and not space.contains(action):
            raise MosaicError(f"it chose {action!r}, which is not in its action space {space}")
        return action

    def _record_game_step(self, after: EnvironmentUpdateResponse) -> None:
        """The step lines of the step just taken, one per player who acted (its own reward
        in this step, and every player's), and the players' returns so far (the core's)."""
        loop = cast(PlayerEpisodes, self._loop)
        step_index = self.steps
        self.steps = loop.step
        for player, value in loop.returns.items():
            state = self.player_state.get(player)
            if state is not None:
                state.episode_return = value
        self.episode_reward = sum(s.episode_return for s in self.player_state.values())
        for player, (action, reply) in self._chosen.items():
            state = self.player_state[player]
            state.actions += 1
            state.last_action = action
            move = reply.get("move")
            state.last_move = move if isinstance(move, str) else None
            reward = float(after.rewards.get(player, 0.0))
            record: dict[str, Any] = {
                "kind": "step", "operator": self.operator_id, "player": player,
                "actor": state.actor_id, "episode": self.episode_index, "seed": self.seed,
                "step_index": step_index, "action": action, "reward": reward,
                "rewards": {name: float(value) for name, value in after.rewards.items()},
                "terminated": after.terminated, "truncated": after.truncated,
                "episode_reward": state.episode_return,
            }
            if state.last_move is not None:
                record["move"] = state.last_move
            bdi = bdi_account_of(reply)
            if bdi is not None:
                if state.result.bdi is None:
                    state.result.bdi = FallbackTally(kind="bdi")
                state.result.bdi.add(bdi)
                record["bdi"] = bdi
            account = account_of(reply)
            if account is not None:
                state.account(account)
                account.pop("endpoint", None)  # in every reply; the tally keeps it once
                record["llm"] = account
            self.last_step = {"action": action, "player": player, "reward": reward,
                              "terminated": after.terminated, "truncated": after.truncated}
            self._write(record)

    def _finish_game(self, terminated: bool, truncated: bool, ended_by: str) -> None:
        index = self.episode_index if self.episode_index is not None else 0
        seed = self.seed if self.seed is not None else 0
        episode = EpisodeResult(self.operator_id, index, seed, self.episode_reward, self.steps,
                                terminated, truncated, ended_by)
        self.result.episodes.append(episode)
        self.last_episode = episode
        self.in_episode = False
        for state in self.player_state.values():
            state.result.episodes.append(EpisodeResult(
                state.actor_id, index, seed, state.episode_return, state.actions, terminated,
                truncated, ended_by))
        self._write(self.episode_record(
            "episode", total_reward=self.episode_reward, length=self.steps,
            terminated=terminated, truncated=truncated, ended_by=ended_by,
            digest=self._digest))
        for state in self.player_state.values():
            for tally in state.result.tallies:
                if tally.exceeds(self.max_fallback_fraction):
                    self._culprit = state.actor_id
                    self._record_failure("fallbacks", "fallbacks",
                                         tally.failure(self.max_fallback_fraction), self.stop())
                    return

    def episode_record(self, kind: str, **fields: Any) -> dict[str, Any]:
        """A telemetry record ``kind`` of the current episode: operator, episode and seed, then
        ``fields``, then ``players`` (each one's actor id, return, actions and LLM counts)."""
        return {"kind": kind, "operator": self.operator_id, "episode": self.episode_index,
                "seed": self.seed, **fields,
                "players": {player: state.summary()
                            for player, state in self.player_state.items()}}

    # -- failures and frames ---------------------------------------------------------------------

    def _abort(self, phase: str, exc: BaseException) -> None:
        detail = f"the episode was aborted: {type(exc).__name__}: {exc}"
        stopped = self.stop()
        self._record_failure(phase, "error", f"{detail}; stopped its workers "
                                             f"({describe_exit(stopped)})", stopped)

    def _record_failure(self, phase: str, cause: str, detail: str, exit_code: int | None) -> None:
        culprit, self._culprit = self._culprit, None
        if culprit is not None:
            detail = f"its player {culprit!r}: {detail}"
        super()._record_failure(phase, cause, detail, exit_code)
        for state in self.player_state.values():
            state.result.failure = self.result.failure

    def _render(self) -> None:
        if self._render_mode is None or self._env is None:
            return
        try:
            frame = self._env.env.render()  # type: ignore[attr-defined]
            self.last_render = (p.ansi_payload(frame) if self._render_mode == "ansi"
                                else p.rgb_payload(frame))
        except Exception:  # a frame is for the eye: the game goes on without it
            log.warning("operator %r: rendering the game failed; no more frames",
                        self.operator_id, exc_info=True)
            self._render_mode = None

    def human_turns(self) -> dict[str, list[MoveChoice]]:
        """The legal moves of each human player the game waits for now, named as a person
        types them (:func:`~mosaic.operators.moves.move_choices`: SAN in chess); empty when
        it waits for no human, or is not in an episode."""
        outcome = self._outcome
        if outcome is None or self._env is None or not self.alive or not self.in_episode:
            return {}
        turns: dict[str, list[MoveChoice]] = {}
        for player in outcome.acting:
            if self.player_state[player].kind != "human":
                continue
            legal = _legal_actions(outcome, player)
            if legal is None:
                legal = discrete_actions(self._env.slots[player][1]) or []
            names = self.config.worker_assignments[player].settings.get("action_names") or ()
            turns[player] = move_choices(outcome.observations[player], legal,
                                         chess=is_chess(self.config.task), action_names=names)
        return turns

    def views(self) -> tuple[PlayerView, ...]:
        """What a screen shows of each player, in the game's order."""
        acting = (set(self._outcome.acting) if self._outcome is not None and self.in_episode
                  else set())
        return tuple(
            PlayerView(player=player, operator_id=state.actor_id, display_name=state.label,
                       operator_type=state.kind, to_act=player in acting,
                       last_action=state.last_action, last_move=state.last_move,
                       episode_return=state.episode_return, actions=state.actions,
                       fallbacks=fallback_share(state.result))
            for player, state in self.player_state.items())


def _legal_actions(turn: _Turn, player: str) -> list[int] | None:
    """The legal actions of ``player`` in ``turn`` from its mask (None: no mask, all)."""
    mask = turn.legal_actions.get(player)
    return [int(i) for i in np.flatnonzero(np.asarray(mask))] if mask is not None else None


@dataclass(frozen=True)
class PlayerView:
    """What a Manual-mode screen shows of one player of a game after the last command."""

    player: str
    operator_id: str
    display_name: str
    operator_type: str
    #: Whether the game waits for this player's action.
    to_act: bool
    last_action: Any
    #: The last move in the game's notation, when the worker names it (the chess worker: UCI).
    last_move: str | None
    episode_return: float
    actions: int
    #: ``fallbacks/actions`` of an LLM player's run so far, else None.
    fallbacks: str | None
