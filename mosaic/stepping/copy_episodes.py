"""The episode loop of an environment with ``copies:``, stepped in lockstep.

One request carries every copy's actions and one answer every copy's outcome. A copy whose
episode ends begins the next one in the same step (Gymnasium's auto-reset): the answer marks
it in ``starts``, and the loop then zeroes its step and return, and draws the seed of its next
episode when the environment reseeds every episode. ``episodes_done`` counts the episodes
ended over all copies: the run's ``episodes`` is the environment's total, and the episodes
past it (several copies can end in the last step) are not counted, though the muscle still
gets their outcome.

Each copy numbers its episodes on its own, and its seeds follow from the numbers. A run that
continues this one (``load:``, or ``--resume`` of a phase that loads one) starts each copy at
its next number (:attr:`CopyEpisodes.copy_episodes`): after the copy's last ended episode, and
after the one under way when the run stopped if that took a step (its steps are stored under
its number), so no number or seed of the saved run is taken again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np

from mosaic.core.batching import row
from mosaic.core.seeding import episode_seed
from mosaic.core.vector_info import info_row
from mosaic.messages import (
    AgentBatchRequest,
    AgentBatchResponse,
    BatchOutcome,
    EnvironmentPosition,
    Request,
    Response,
    VectorResetRequest,
    VectorStepRequest,
    VectorStepResponse,
)
from mosaic.messages.templates import TemplatePacker
from mosaic.stepping.episodes import Episodes, Recording, Schedule, chosen
from mosaic.stepping.ledger import Ledger

__all__ = ["AskBatch", "CopyEpisodes"]

#: Asks the environment's one muscle for every copy's action; returns its agent and answer.
AskBatch = Callable[[AgentBatchRequest], tuple[str, AgentBatchResponse]]


class CopyEpisodes(Episodes):
    """The episode loop of ``copies`` copies of an environment with one slot (see the module).

    ``reseeds``: whether the environment seeds every episode of every copy with the seeds it
    is sent (else it seeds them all once, at the first reset). ``first_copy``: the number of
    the first copy among the environment's, for copies stepped apart (a rollout worker's):
    seeds and records number the copies from it. ``episode`` holds each copy's episode under
    way, ``step`` the steps it has taken in it.
    """

    expects = VectorStepResponse

    def __init__(self, index: int, uid: str, mapping: dict[str, str], ledger: Ledger,
                 schedule: Schedule, recording: Recording, ask: AskBatch, slot: str,
                 copies: int, reseeds: bool, first_copy: int = 0) -> None:
        super().__init__(index, uid, mapping, ledger, schedule, recording)
        self._ask = ask
        self.slot = slot
        self.copies = copies
        self.reseeds = reseeds
        self.first_copy = first_copy
        self.needs_reset = True
        self.episodes_done = 0
        self.observations: Any = None
        self.actions: Any = None
        self.episode = np.zeros(copies, dtype=np.int64)
        self.step = np.zeros(copies, dtype=np.int64)
        self.returns = np.zeros(copies, dtype=np.float64)
        self.seeds = np.zeros(copies, dtype=np.uint64)
        self.next_seeds = np.zeros(copies, dtype=np.uint64)
        #: ``pack`` of each batch for the digest, from a template (the same bytes, cheaper).
        self._digest_packer = TemplatePacker()

    @property
    def position(self) -> tuple[int, int, int] | None:
        return max(self.copy_episodes), 0, 0

    @property
    def copy_episodes(self) -> tuple[int, ...]:
        # An episode under way that took no step (only its reset) is begun again by a run that
        # continues this one: none of it is stored.
        return tuple(int(number) for number in self.episode + (self.step > 0))

    def resume(self, at: EnvironmentPosition) -> None:
        """Start each copy at its next episode in ``at`` (this loop's copies are the
        environment's from ``first_copy`` on), one that ``at`` does not name at
        ``at.episode``; ``episodes`` still counts this run's episodes."""
        first = self.first_copy
        saved = at.copy_episodes[first:first + self.copies]
        self.episode[:] = at.episode
        self.episode[:len(saved)] = saved

    def request(self) -> Request:
        if not self.needs_reset:
            return VectorStepRequest(self.actions, self.next_seeds)
        seed, index, first = self.schedule.seed, self.index, self.first_copy
        for copy in range(self.copies):
            self.next_seeds[copy] = episode_seed(seed, index, int(self.episode[copy]),
                                                 first + copy)
        return VectorResetRequest(self.next_seeds)

    def accept(self, reply: Response) -> None:
        """Account for one reset or step of every copy, then ask the muscle for the next."""
        outcome = cast(VectorStepResponse, reply).outcome
        if self.needs_reset:
            self.needs_reset = False
        else:
            self._outcome(outcome)
        starts = outcome.starts.nonzero()[0].tolist()
        if starts:
            seed, index, reseeds = self.schedule.seed, self.index, self.reseeds
            for copy in starts:
                self.step[copy] = 0
                self.returns[copy] = 0.0
                self.seeds[copy] = self.next_seeds[copy]
                if reseeds:
                    self.next_seeds[copy] = episode_seed(seed, index, int(self.episode[copy]) + 1,
                                                         self.first_copy + copy)
        self.observations = outcome.observations
        agent, answer = self._ask(AgentBatchRequest(outcome))
        self.actions = answer.actions
        if answer.metrics:
            ledger = self.ledger
            ledger.reported.append((agent, answer.metrics))
            ledger.stamp_metrics()

    def _outcome(self, outcome: BatchOutcome) -> None:
        """The outcome of the copies' last actions: the digest, the step rows, ended episodes."""
        rewards, terminated, truncated = outcome.rewards, outcome.terminated, outcome.truncated
        acted, info, final_info = outcome.acted, outcome.info, outcome.final_info
        ledger = self.ledger
        ledger.digest.update(self._digest_packer.pack((self.uid, self.observations,
                                                       self.actions, rewards, terminated,
                                                       truncated, acted)))
        self.returns += rewards
        ledger.count_steps(int(np.count_nonzero(acted)))
        if self.record_steps:
            slot, run_id, rows = self.slot, ledger.run_id, ledger.rows
            agent = self.mapping[slot]
            keys = self.store_info if info or final_info else ()
            for copy in acted.nonzero()[0].tolist():
                stored = None
                if keys:
                    last = final_info.get(copy)
                    stored = chosen(keys, info_row(info, copy) if last is None else last)
                rows.append((run_id, self.uid, int(self.episode[copy]), int(self.step[copy]),
                             agent, slot, row(self.observations, copy), row(self.actions, copy),
                             float(rewards[copy]), bool(terminated[copy]),
                             bool(truncated[copy]), self.first_copy + copy, stored))
        self.step += acted
        ended = (terminated | truncated) & acted
        for copy in ended.nonzero()[0].tolist():
            if self.finished:
                # Past the environment's total: neither counted nor recorded, but its steps
                # are stored under its number, which a continuing run does not take again.
                self.episode[copy] += 1
                self.step[copy] = 0
            else:
                self._end_episode(copy, bool(terminated[copy]), bool(truncated[copy]))

    def _end_episode(self, copy: int, terminated: bool, truncated: bool) -> None:
        ledger = self.ledger
        total = float(self.returns[copy])
        ledger.progress.agent_ended_episode(self.mapping[self.slot], total)
        ledger.hand_over()  # an episode's record never goes to the store before its steps
        chain = ledger.link_chain()
        if self.record_episodes and ledger.record_episode is not None:
            # A vector that resets its copies itself seeds them all at once, not per episode.
            seed = int(self.seeds[copy]) if self.reseeds else None
            ledger.record_episode(ledger.run_id, self.uid, int(self.episode[copy]),
                                  int(self.step[copy]), total, {self.slot: total}, terminated,
                                  truncated, seed, self.first_copy + copy, chain=chain)
        self.episode[copy] += 1
        self.step[copy] = 0  # until its next episode's first step (the next answer's, if late)
        self.episodes_done += 1
        if self.episodes_done >= self.schedule.episodes:
            self.finished = True
        ledger.episode_ended(self.uid, total)
