"""The episode loop of a per-player environment: PettingZoo (AEC and parallel) and Gymnasium.

Each slot acts when the environment lists it as acting; its action stays outstanding until
its outcome goes back to its muscle, when the slot is about to act again or the episode ends,
with every reward since that action (in a turn-based game the loser's -1 comes with the
winner's move). Evaluation rounds (``evaluate_every``) run the muscles' greedy instances and
count for nothing of the run: not the digest, the steps table, its progress or termination.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from mosaic.core.agent_returns import agent_returns
from mosaic.core.seeding import episode_seed, evaluation_episode_seed
from mosaic.messages import (
    AgentEvaluateRequest,
    AgentUpdateRequest,
    AgentUpdateResponse,
    EnvironmentPosition,
    EnvironmentResetRequest,
    EnvironmentResetResponse,
    EnvironmentUpdateRequest,
    EnvironmentUpdateResponse,
    Request,
    Response,
)
from mosaic.messages.codec import pack_each
from mosaic.messages.trusted import trusted_constructor
from mosaic.stepping.episodes import Episodes, Recording, Schedule, chosen
from mosaic.stepping.ledger import Ledger

__all__ = ["AskMuscles", "PlayerEpisodes"]

# The loop's own messages, built each step from the fields of messages validated when they
# were made (the environment's answers, the muscles' actions) and values the loop makes to fit.
_step_request = trusted_constructor(EnvironmentUpdateRequest)
_update_request = trusted_constructor(AgentUpdateRequest)
_evaluate_request = trusted_constructor(AgentEvaluateRequest)

#: Asks the muscles of an environment for their slots' actions: each muscle gets the part of
#: the request about its slots. Returns (agent, answer) per muscle asked, in the file's order
#: of agents.
AskMuscles = Callable[[AgentUpdateRequest | AgentEvaluateRequest],
                      Sequence[tuple[str, AgentUpdateResponse]]]


class PlayerEpisodes(Episodes):
    """The episode loop of an environment whose slots act per player (see the module)."""

    def __init__(self, index: int, uid: str, mapping: dict[str, str], ledger: Ledger,
                 schedule: Schedule, recording: Recording, ask: AskMuscles) -> None:
        super().__init__(index, uid, mapping, ledger, schedule, recording)
        self._ask = ask
        self.expects = EnvironmentResetResponse
        self.episode = 0
        self.step = 0
        self.needs_reset = True
        self.observations: dict[str, Any] = {}
        self.actions: dict[str, Any] = {}
        self.returns: dict[str, float] = {}
        #: self-play agent -> the snapshot it plays this episode with (the episode it was
        #: taken at).
        self.snapshots: dict[str, int] = {}
        #: slot -> [step, observation, action, reward so far] of its last action, until the
        #: outcome goes back to its muscle: when the slot acts again or the episode ends.
        self.outstanding: dict[str, list[Any]] = {}
        self.episode_seed = 0
        #: The number of the loop's first training episode in this run (not 0 when it
        #: continues a saved run).
        self.first_episode = 0
        #: Evaluation episodes left in the round under way (0: training), the rounds done, the
        #: evaluation episodes done, and whether the loop ends once the round is over.
        self.evaluating = 0
        self.evaluation_round = 0
        self.evaluations_done = 0
        self.finish_after_evaluation = False
        #: What :meth:`ask` asks the muscles next (the arguments of ``_ask_muscles``; None:
        #: asked), and how the step it follows ended the episode (None: it did not).
        self.question: tuple[Any, ...] | None = None
        self._ended: tuple[bool, bool] | None = None

    @property
    def position(self) -> tuple[int, int, int] | None:
        return self.episode, self.evaluation_round, self.evaluations_done

    def resume(self, at: EnvironmentPosition) -> None:
        self.episode = at.episode
        self.first_episode = at.episode if at.first_episode is None else at.first_episode
        self.evaluation_round, self.evaluations_done = at.evaluation_round, at.evaluations

    def request(self) -> Request:
        if not self.needs_reset:
            self.expects = EnvironmentUpdateResponse
            return _step_request(self.actions)
        schedule = self.schedule
        if self.evaluating:
            self.episode_seed = evaluation_episode_seed(
                schedule.seed, self.index, self.evaluation_round,
                schedule.evaluate_episodes - self.evaluating)
        else:
            self.episode_seed = episode_seed(schedule.seed, self.index, self.episode)
        self.expects = EnvironmentResetResponse
        return EnvironmentResetRequest(self.episode_seed,
                                       None if self.evaluating else self.episode)

    def accept(self, reply: Response) -> None:
        if self.needs_reset:
            self._on_reset(cast(EnvironmentResetResponse, reply))
            self.ask()
            return
        # The hot path: the muscles asked at once, without keeping the question (settle, ask).
        self._on_update(cast(EnvironmentUpdateResponse, reply), True)
        if self.ledger.reported:
            self.ledger.stamp_metrics()

    def settle(self, reply: Response) -> None:
        """The first half of :meth:`accept`: account for the environment's ``reply`` (the
        digest and rows of the actions it settles), keeping the question for the muscles that
        :meth:`ask` puts. A driver that asks its players when it steps (Manual mode's game,
        which waits for a person's move) calls the two apart; :meth:`ask` must come before the
        next :meth:`request`."""
        if self.needs_reset:
            self._on_reset(cast(EnvironmentResetResponse, reply))
        else:
            self._on_update(cast(EnvironmentUpdateResponse, reply), False)

    def ask(self) -> None:
        """The second half of :meth:`accept`: ask the muscles the question the last
        :meth:`settle` left (their next actions, and the feedback of the actions it settled),
        then end the episode if that step ended it."""
        question, self.question = self.question, None
        if question is None:
            raise RuntimeError(f"environment {self.uid!r}: nothing to ask (settle first)")
        self.actions = self._ask_muscles(*question)
        ended = self._ended
        if ended is not None:
            self._ended = None
            self._end(*ended)
        if self.ledger.reported:
            self.ledger.stamp_metrics()

    @property
    def ending(self) -> bool:
        """Whether the step :meth:`settle` took last ended the episode: :meth:`ask` gives the
        muscles their last feedback and ends it."""
        return self._ended is not None

    def _on_reset(self, reset: EnvironmentResetResponse) -> None:
        self.needs_reset = False
        self.step = 0
        self.returns = {}
        self.outstanding = {}
        self.snapshots = {}
        self.observations = dict(reset.observations)
        self.question = (0, reset.observations, {}, False, False, reset.acting,
                         reset.legal_actions, reset.infos)

    def _on_update(self, update: EnvironmentUpdateResponse, ask: bool) -> None:
        """One step: rewards to the slots' last actions, the settled actions recorded and fed
        back, the muscles asked for the next (``ask``; else the question is kept for
        :meth:`ask`). An evaluation step counts for nothing of the run (progress, digest, steps
        table) and asks the greedy instances."""
        evaluation = self.evaluating > 0
        step = self.step
        self.step = step + 1
        terminated = update.terminated
        max_steps = self.schedule.max_steps
        truncated = update.truncated or (max_steps is not None and self.step >= max_steps)
        outstanding, returns = self.outstanding, self.returns
        for slot, action in self.actions.items():
            outstanding[slot] = [step, self.observations[slot], action, 0.0]
        # A reward belongs to the slot's last action, whenever it arrives (in a turn-based game
        # the loser's -1 comes with the winner's move).
        for slot, reward in update.rewards.items():
            returns[slot] = returns.get(slot, 0.0) + reward
            entry = outstanding.get(slot)
            if entry is not None:
                entry[3] += reward
        if not evaluation:
            self.ledger.count_steps(1)
        self.observations.update(update.observations)
        done = terminated or truncated
        settled = list(outstanding) if done else [s for s in update.acting if s in outstanding]
        if evaluation:
            feedback = {slot: outstanding.pop(slot)[3] for slot in settled}
        else:
            feedback = self._close_actions(settled, terminated, truncated, update.infos)
        if ask:
            self.actions = self._ask_muscles(self.step, update.observations, feedback,
                                             terminated, truncated, update.acting,
                                             update.legal_actions, update.infos)
            if done:
                self._end(terminated, truncated)
            return
        self.question = (self.step, update.observations, feedback, terminated, truncated,
                         update.acting, update.legal_actions, update.infos)
        self._ended = (terminated, truncated) if done else None

    def _end(self, terminated: bool, truncated: bool) -> None:
        if self.evaluating:
            self._end_evaluation_episode(terminated, truncated)
        else:
            self._end_episode(terminated, truncated)

    def _close_actions(self, slots: list[str], terminated: bool, truncated: bool,
                       infos: dict[str, Any]) -> dict[str, float]:
        """Close the outstanding actions of ``slots``: record them and return their rewards.

        Each slot gets one feedback per action, with every reward since that action, when it
        is about to act again or the episode ends: the contract of Muscle.feedback, also in
        turn-based games. A row keeps the ``store_info`` keys of the slot's info of this step.
        """
        if not slots:
            return {}
        ledger = self.ledger
        uid, outstanding = self.uid, self.outstanding
        settled = [(slot, outstanding.pop(slot)) for slot in slots]
        # The digest takes each action's encoding in turn; all of this step's in one call.
        ledger.digest.update(pack_each([
            (uid, slot, observation, action, reward, terminated, truncated)
            for slot, (_, observation, action, reward) in settled]))
        if self.record_steps:
            run_id, episode, mapping, keys = (ledger.run_id, self.episode, self.mapping,
                                              self.store_info)
            ledger.rows.extend(
                (run_id, uid, episode, step, mapping[slot], slot, observation, action, reward,
                 terminated, truncated, 0, chosen(keys, infos.get(slot)))
                for slot, (step, observation, action, reward) in settled)
        return {slot: entry[3] for slot, entry in settled}

    def _ask_muscles(self, step: int, observations: dict[str, Any], rewards: dict[str, float],
                     terminated: bool, truncated: bool, acting: tuple[str, ...],
                     legal: dict[str, Any], infos: dict[str, Any]) -> dict[str, Any]:
        request: AgentUpdateRequest | AgentEvaluateRequest
        if self.evaluating:
            request = _evaluate_request(step, observations, rewards, terminated, truncated,
                                        acting, legal, infos)
        else:
            request = _update_request(step, observations, rewards, terminated, truncated, acting,
                                      legal, infos)
        answers = self._ask(request)
        reported = self.ledger.reported
        if len(answers) == 1:
            agent, answer = answers[0]
            actions = answer.actions
            if answer.metrics:
                reported.append((agent, answer.metrics))
            if answer.snapshot is not None:
                self.snapshots[agent] = answer.snapshot
            return actions
        actions = {}
        for agent, answer in answers:
            actions.update(answer.actions)
            if answer.metrics:
                reported.append((agent, answer.metrics))
            if answer.snapshot is not None:
                self.snapshots[agent] = answer.snapshot
        return actions

    def _end_episode(self, terminated: bool, truncated: bool) -> None:
        ledger, schedule = self.ledger, self.schedule
        total = sum(self.returns.values())
        # Each agent's return as every reader of the store computes it from the episode's row.
        for agent, value in agent_returns(self.returns, self.mapping).items():
            ledger.progress.agent_ended_episode(agent, value)
        ledger.hand_over()  # an episode's record never goes to the store before its steps
        chain = ledger.link_chain()
        if self.record_episodes and ledger.record_episode is not None:
            ledger.record_episode(ledger.run_id, self.uid, self.episode, self.step, total,
                                  dict(self.returns), terminated, truncated, self.episode_seed,
                                  snapshots=self.snapshots or None, chain=chain)
        self.episode += 1
        self.needs_reset = True
        done = self.episode - self.first_episode >= schedule.episodes
        every = schedule.evaluate_every
        if every and self.episode % every == 0:
            self.evaluating = schedule.evaluate_episodes
            self.finish_after_evaluation = done
        else:
            self.finished = done
        ledger.episode_ended(self.uid, total)

    def _end_evaluation_episode(self, terminated: bool, truncated: bool) -> None:
        """Record the evaluation episode (numbered among the environment's evaluation
        episodes, from 0); after the round's last, training resumes or the loop ends."""
        ledger = self.ledger
        if self.record_episodes and ledger.record_episode is not None:
            ledger.record_episode(ledger.run_id, self.uid, self.evaluations_done, self.step,
                                  sum(self.returns.values()), dict(self.returns), terminated,
                                  truncated, self.episode_seed, evaluation=True,
                                  snapshots=self.snapshots or None)
        self.evaluations_done += 1
        self.evaluating -= 1
        self.needs_reset = True
        if not self.evaluating:
            self.evaluation_round += 1
            self.finished = self.finished or self.finish_after_evaluation
