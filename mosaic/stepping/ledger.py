"""The run's ledger: what every environment's episodes add to, in the order they step.

One per run, shared by the episode loops of all its environments (see
:mod:`mosaic.stepping.episodes`): the digest and its chain, the rows for the store, the
metrics awaiting their stamp, and the run's progress and termination. It holds no socket and
no run context: the rows leave through the ``hand_over`` callable, the episode records through
``record_episode``.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from mosaic.messages import Metric
from mosaic.stepping.progress import Progress
from mosaic.stepping.termination import Termination

__all__ = ["EpisodeRecorder", "Ledger", "Pruner", "chained"]

log = logging.getLogger(__name__)


class EpisodeRecorder(Protocol):
    """Where an ended episode's record goes: the store's ``record_episode``."""

    def __call__(self, run_id: int, environment: str, episode: int, steps: int,
                 total_return: float | None, returns: Mapping[str, float], terminated: bool,
                 truncated: bool, seed: int | None, copy: int = 0, evaluation: bool = False,
                 snapshots: Mapping[str, int] | None = None, chain: str | None = None) -> None:
        ...


class Pruner(Protocol):
    """A search's pruner for one run of it (:class:`~mosaic.orchestration.pruning.Pruning`):
    it sees the run's metric rows as they are stamped, and may end the run at an episode end
    (its reason; None: go on)."""

    def logged(self, rows: Iterable[tuple[Any, ...]]) -> None: ...

    def reached(self, progress: Progress) -> str | None: ...


class _Loop(Protocol):
    finished: bool

    @property
    def uid(self) -> str: ...

    @property
    def position(self) -> tuple[int, int, int] | None: ...

    @property
    def copy_episodes(self) -> tuple[int, ...] | None: ...


class Ledger:
    """The run-wide book of the episode loops.

    ``chain``: the digest chain to continue (a resumed run's; empty: from nothing).
    ``hand_over``: gives :attr:`rows` and :attr:`metric_rows` to the store (and empties them);
    it is called before every ended episode's record, which never reaches the store before its
    steps. ``record_episode``: ``None`` when nothing is stored. ``pruning``: a run of a
    search's point, which its pruner may end at an episode end.
    """

    def __init__(self, run_id: int, progress: Progress, termination: Termination, chain: str,
                 hand_over: Callable[[], None], record_episode: EpisodeRecorder | None,
                 run_uid: str = "", pruning: Pruner | None = None) -> None:
        self.run_id = run_id
        self.progress = progress
        self.termination = termination
        self.pruning = pruning
        self.hand_over = hand_over
        self.record_episode = record_episode
        self.run_uid = run_uid
        # The run's fingerprint: every step's observation, action, reward and end flags, in
        # order, exactly as encoded on the wire. Equal digests mean equal trajectories. It is
        # a chain: each episode end starts a new hash from the last one's value (the chain),
        # so a run that continues a saved one from its chain ends with the digest of one run
        # of both.
        self.chain = chain
        self.digest = chained(chain)
        #: Step rows and stamped metric rows for the store, until handed over.
        self.rows: list[tuple[Any, ...]] = []
        self.metric_rows: list[tuple[Any, ...]] = []
        #: (agent, metrics) that came with the muscles' answers, awaiting their stamp.
        self.reported: list[tuple[str, tuple[Metric, ...]]] = []
        #: The episode loops of the run, which a termination condition finishes all at once.
        self.loops: list[_Loop] = []

    @classmethod
    def in_process(cls, record_episode: EpisodeRecorder) -> Ledger:
        """The ledger of a loop driven in-process and stored nowhere (the harness, Manual and
        Script mode's games): no rows to hand over, no termination condition, no chain to
        continue; ended episodes go to ``record_episode``."""
        return cls(0, Progress(), Termination(), "", hand_over=_keep_nothing,
                   record_episode=record_episode)

    def link_chain(self) -> str:
        """An episode ended: link the digest chain, and return its new link (hex), which the
        episode's record keeps (a run resumed from this episode's end starts from it)."""
        self.chain = self.digest.digest().hex()
        self.digest = chained(self.chain)
        return self.chain

    def count_steps(self, steps: int) -> None:
        """Count ``steps`` taken (not evaluation steps)."""
        progress = self.progress
        progress.steps += steps
        if progress.first_step_at is None:
            progress.first_step_at = time.time()

    def episode_ended(self, environment: str, total: float) -> None:
        """Count an ended episode (its chain linked); finish every loop of the run if a
        termination condition is met."""
        progress = self.progress
        progress.episodes += 1
        progress.return_sum += total
        progress.last_return = total
        progress.recent_returns.append(total)
        progress.last_step_at = time.time()
        if progress.ended_early is not None:
            return  # the rest of a round under way when a condition was met: counted only
        reason = self.termination.reached(environment, total, progress)
        if reason is None and self.pruning is not None:
            reason = self.pruning.reached(progress)
            progress.pruned = reason is not None
        if reason is not None:
            log.info("run %s: %s", self.run_uid, reason)
            progress.ended_early = f"{reason} after {progress.episodes} episodes"
            for loop in self.loops:
                loop.finished = True

    def stamp_metrics(self) -> None:
        """Stamp the metrics that came with the muscles' answers with the run's episodes ended
        and steps taken so far, as rows for the store."""
        progress, run_id, rows = self.progress, self.run_id, self.metric_rows
        episode, step = progress.episodes, progress.steps
        first = len(rows)
        for agent, metrics in self.reported:
            for metric in metrics:
                rows.append((run_id, agent, metric.source, metric.name, metric.value, episode,
                             step, metric.at))
        self.reported = []
        if self.pruning is not None:
            self.pruning.logged(rows[first:])

    def report_position(self) -> None:
        """The run's digest, and where it stands for a run that continues it: the chain at
        the last episode end, each environment's position and, with copies, each copy's next
        episode."""
        progress = self.progress
        progress.digest = self.digest.hexdigest()
        progress.chain = self.chain
        progress.positions = {loop.uid: position for loop in self.loops
                              if (position := loop.position) is not None}
        progress.copy_episodes = {loop.uid: copies for loop in self.loops
                                  if (copies := loop.copy_episodes) is not None}


def _keep_nothing() -> None:
    """The hand-over of a ledger whose rows go nowhere (:meth:`Ledger.in_process`)."""


def chained(chain: str) -> hashlib.blake2b:
    """A digest that starts from ``chain`` (hex; empty: from nothing)."""
    digest = hashlib.blake2b(digest_size=16)
    if chain:
        digest.update(bytes.fromhex(chain))
    return digest
