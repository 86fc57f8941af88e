"""One operator's lane in an evaluation, and the lock-step rounds that step the lanes.

Script mode and Manual mode both drive lanes, through the session of :mod:`._session`. A lane
plays one worker's episodes and keeps its results, and records every worker error as that
operator's failure; its worker is started and stopped by the session's
:class:`~mosaic.operators.driver.multi_operator.MultiOperatorService`. :class:`Rounds` runs one
call per lane, in parallel threads where that is safe. A game with one worker per player is a
lane too (:class:`~mosaic.operators.evaluation._game.GameLane`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from mosaic.core.errors import (
    WorkerCrashed,
    WorkerError,
    WorkerProtocolError,
    WorkerTimeout,
)
from mosaic.operators.driver.handle import MissingEpisodeEnd
from mosaic.operators.driver.multi_operator import MultiOperatorService
from mosaic.operators.evaluation._results import EpisodeResult, OperatorFailure, OperatorResult
from mosaic.operators.llm_accounting import (
    DEFAULT_MAX_FALLBACK_FRACTION,
    FallbackTally,
    account_of,
    bdi_account_of,
)
from mosaic.runtime.processes.child import describe_exit

if TYPE_CHECKING:
    from mosaic.operators.evaluation._models import TimeoutsSpec

_T = TypeVar("_T")


class Launcher(Protocol):
    """What starts a lane's worker: an
    :class:`~mosaic.operators.driver.launcher.OperatorLauncher`."""

    def launch(self, config: Any, run_id: str | None = None) -> Any: ...

    def launch_multi_agent(self, config: Any, run_id: str | None = None) -> Any: ...


class Lane:
    """One operator: its worker handle, its current episode and its results.

    The seed of the next episode arrives by the session's seed broadcast
    (:class:`~mosaic.operators.api.services.ActorService`, through the lane's actor), which sets
    :attr:`next_seed`; :meth:`reset` sends it to the worker.

    Every method that talks to the worker turns a ``WorkerError`` into a recorded failure and
    stops the worker; no worker error escapes a lane. A lane is used by one thread at a time.
    The episode ends on the worker's ``episode_end``, on a ``step`` flagged terminated or
    truncated, or after ``operator_config.max_steps`` steps.

    Replies with an ``llm`` account (:mod:`mosaic.operators.llm_accounting`) are tallied in
    ``result.llm``, a BDI worker's ``bdi`` accounts in ``result.bdi``; at the end of an
    episode, an operator whose share of fallback actions so far is above
    ``max_fallback_fraction`` in either fails (cause ``fallbacks``).
    """

    def __init__(self, operator_config: Any, timeouts: TimeoutsSpec,
                 max_fallback_fraction: float = DEFAULT_MAX_FALLBACK_FRACTION) -> None:
        self.config = operator_config
        self.max_fallback_fraction = max_fallback_fraction
        #: The LLM accounts of the current episode (None before its first accounted step).
        self.episode_llm: FallbackTally | None = None
        self.operator_id: str = operator_config.operator_id
        self.label: str = operator_config.display_name or self.operator_id
        self.timeouts = timeouts
        self._records: list[dict[str, Any]] = []
        self.result = OperatorResult(self.operator_id, self.label)
        self.handle: Any = None
        self._workers: MultiOperatorService | None = None
        self.episode_index: int | None = None
        #: The seed of the current episode, and the one the next reset will use.
        self.seed: int | None = None
        self.next_seed: int | None = None
        self.in_episode = False
        self.steps = 0
        self.episode_reward = 0.0
        self.last_step: dict[str, Any] | None = None
        self.last_episode: EpisodeResult | None = None
        self.last_render: dict[str, Any] | None = None

    @property
    def alive(self) -> bool:
        return self.handle is not None and self.result.failure is None

    def results(self) -> dict[str, OperatorResult]:
        """What the run reports for this lane: its operator's result, by operator id."""
        return {self.operator_id: self.result}

    def _write(self, record: dict[str, Any]) -> None:
        self._records.append(record)

    def drain(self) -> list[dict[str, Any]]:
        """The telemetry records produced since the last call, oldest first.

        Lanes may step in parallel threads; the driver writes their records in lane order, so
        the file does not depend on thread timing.
        """
        records, self._records = self._records, []
        return records

    def launch(self, workers: MultiOperatorService) -> bool:
        """Start this operator's worker with ``workers`` (where its config was added); False
        (and a failure) if it cannot start."""
        self._workers = workers
        try:
            self.handle = workers.start(self.operator_id)
        except Exception as exc:  # any launch problem fails this operator only
            self._record_failure("launch", "launch", f"could not start its worker: {exc}", None)
            return False
        return True

    def reset(self, episode_index: int) -> bool:
        """Start episode ``episode_index`` on the seed last broadcast (:attr:`next_seed`);
        False (and a failure) if the worker fails."""
        seed = self._begin(episode_index)
        if seed is None:
            return False
        try:
            ready = self.handle.reset(seed, timeout=self.timeouts.reset)
        except WorkerError as exc:
            self._fail("reset", exc, self.timeouts.reset)
            return False
        self.last_render = ready.get("render_payload") if isinstance(ready, dict) else None
        self.in_episode = True
        return True

    def _begin(self, episode_index: int) -> int | None:
        """The seed last broadcast (:attr:`next_seed`), on which episode ``episode_index``
        starts now, the episode's counts cleared; None when the lane has failed."""
        if not self.alive:
            return None
        if self.next_seed is None:
            raise RuntimeError(f"operator {self.operator_id!r}: no seed was broadcast before "
                               "its reset")
        seed = self.next_seed
        self.episode_index, self.seed = episode_index, seed
        self.in_episode, self.steps, self.episode_reward = False, 0, 0.0
        self.last_step = None
        self.episode_llm = None
        return seed

    def step(self) -> bool:
        """Take one step of the current episode; False when none was taken."""
        if not self.alive or not self.in_episode:
            return False
        try:
            reply, end = self.handle.step(timeout=self.timeouts.step)
        except MissingEpisodeEnd as exc:  # the step was taken: record it, then the failure
            self._record_step(exc.step)
            self._fail("episode_end", exc, self.timeouts.step)
            return False
        except WorkerError as exc:
            self._fail("step", exc, self.timeouts.step)
            return False
        self._record_step(reply)
        max_steps = self.config.max_steps
        if end is not None or reply.get("terminated") or reply.get("truncated"):
            # The step flags end the episode even without an ``episode_end`` line.
            self._finish(end or {}, reply, "environment")
        elif max_steps and self.steps >= max_steps:
            self._finish({}, reply, "max_steps")
        return True

    def _record_step(self, reply: Mapping[str, Any]) -> None:
        step_index = reply.get("step_index", self.steps)
        self.steps += 1
        reward = reply.get("reward", 0.0)
        self.episode_reward = reply.get("episode_reward", self.episode_reward + reward)
        self.last_step = dict(reply)
        if reply.get("render_payload") is not None:
            self.last_render = reply["render_payload"]
        record = {
            "kind": "step",
            "operator": self.operator_id,
            "episode": self.episode_index,
            "seed": self.seed,
            "step_index": step_index,
            "action": reply.get("action"),
            "reward": reward,
            "terminated": reply.get("terminated", False),
            "truncated": reply.get("truncated", False),
            "episode_reward": self.episode_reward,
        }
        account = account_of(reply)
        if account is not None:
            for tally in self._tallies():
                tally.add(account)
            account.pop("endpoint", None)  # in every reply; the tally keeps it once
            record["llm"] = account
        bdi = bdi_account_of(reply)  # a BDI worker's account of its decision
        if bdi is not None:
            if self.result.bdi is None:
                self.result.bdi = FallbackTally(kind="bdi")
            self.result.bdi.add(bdi)
            record["bdi"] = bdi
        self._write(record)

    def _tallies(self) -> tuple[FallbackTally, FallbackTally]:
        if self.result.llm is None:
            self.result.llm = FallbackTally()
        if self.episode_llm is None:
            self.episode_llm = FallbackTally()
        return self.result.llm, self.episode_llm

    def _finish(self, end: Mapping[str, Any], reply: Mapping[str, Any], ended_by: str) -> None:
        truncated = bool(end.get("truncated", reply.get("truncated", False)))
        episode = EpisodeResult(
            operator_id=self.operator_id,
            episode_index=self.episode_index if self.episode_index is not None else 0,
            seed=self.seed if self.seed is not None else 0,
            total_reward=end.get("total_reward", self.episode_reward),
            length=end.get("episode_length", self.steps),
            terminated=bool(end.get("terminated", reply.get("terminated", False))),
            truncated=truncated or ended_by == "max_steps",
            ended_by=ended_by,
        )
        self.result.episodes.append(episode)
        self.last_episode = episode
        self.in_episode = False
        self._write(self.episode_record(
            "episode", total_reward=episode.total_reward, length=episode.length,
            terminated=episode.terminated, truncated=episode.truncated, ended_by=ended_by))
        for tally in self.result.tallies:
            if tally.exceeds(self.max_fallback_fraction):
                detail = tally.failure(self.max_fallback_fraction)
                self._record_failure("fallbacks", "fallbacks", detail, self.stop())
                return

    def episode_record(self, kind: str, **fields: Any) -> dict[str, Any]:
        """A telemetry record ``kind`` of the current episode: operator, episode and seed, then
        ``fields``, then the episode's LLM counts if its replies had any."""
        record = {"kind": kind, "operator": self.operator_id, "episode": self.episode_index,
                  "seed": self.seed, **fields}
        if self.episode_llm is not None:
            record["llm"] = self.episode_llm.counts()
        return record

    def _fail(self, phase: str, exc: WorkerError, timeout: float) -> None:
        exit_code: int | None = None
        if isinstance(exc, WorkerCrashed):
            cause = "crashed"
            exit_code = exc.exit_code
            tail = exc.stderr_tail.strip().splitlines()[-5:]
            detail = f"its worker exited ({describe_exit(exit_code)})"
            if tail:
                detail += "; stderr ends with: " + " | ".join(tail)
        elif isinstance(exc, WorkerTimeout):
            cause = "timeout"
            detail = f"its worker sent no reply within {timeout:g} s (the {phase} timeout)"
        elif isinstance(exc, MissingEpisodeEnd):
            cause = "protocol"
            detail = str(exc).replace(f"worker {self.operator_id} sent", "its worker sent", 1)
        elif isinstance(exc, WorkerProtocolError):
            cause = "protocol"
            detail = f"its worker sent a malformed reply: {exc}"
        else:
            cause = "error"
            detail = f"its worker reported an error: {exc}"
        stopped = self.stop()
        if exit_code is None:
            exit_code = stopped
            if cause != "crashed":
                detail += f"; stopped it ({describe_exit(stopped)})"
        self._record_failure(phase, cause, detail, exit_code)

    def _record_failure(self, phase: str, cause: str, detail: str, exit_code: int | None) -> None:
        if phase == "launch":
            where = "to launch"
        elif phase == "fallbacks":
            where = f"after episode {self.episode_index} (seed {self.seed})"
        elif phase == "episode_end":
            where = (f"after step {self.steps - 1} of episode {self.episode_index} "
                     f"(seed {self.seed})")
        elif phase == "step":
            where = f"during step {self.steps} of episode {self.episode_index} (seed {self.seed})"
        else:
            where = f"during reset for episode {self.episode_index} (seed {self.seed})"
        name = repr(self.operator_id)
        if self.label != self.operator_id:
            name += f" ({self.label})"
        message = f"operator {name} failed {where}: {detail}"
        failure = OperatorFailure(
            operator_id=self.operator_id,
            phase=phase,
            cause=cause,
            message=message,
            episode_index=self.episode_index,
            seed=self.seed,
            step_index=(self.steps if phase == "step"
                        else self.steps - 1 if phase == "episode_end" else None),
            exit_code=exit_code,
        )
        self.result.failure = failure
        self.in_episode = False
        self._write(
            {
                "kind": "failure",
                "operator": failure.operator_id,
                "episode": failure.episode_index,
                "seed": failure.seed,
                "step_index": failure.step_index,
                "phase": phase,
                "cause": cause,
                "exit_code": exit_code,
                "message": message,
            }
        )

    def stop(self) -> int | None:
        """Stop and reap the worker (idempotent); its exit code, or None if unknown."""
        handle, self.handle = self.handle, None
        if handle is None or self._workers is None:
            return None
        return self._workers.stop(self.operator_id)  # logs, never raises, if stopping fails


def _has_human(config: Any) -> bool:
    """True when ``config``'s worker, or one of its players' workers, is a human's."""
    return config.operator_type == "human" or any(
        assignment.worker_type == "human" for assignment in config.worker_assignments.values())


def new_run_id(uid: str) -> str:
    """A run id for the evaluation ``uid``: the uid and a random suffix."""
    return f"{uid}-{uuid.uuid4().hex[:8]}"


class Rounds:
    """Runs one call per lane, in parallel threads when there is more than one lane.

    An LLM can take seconds per step; in parallel a round takes as long as the slowest
    operator instead of the sum of them. Results do not depend on the threads: each lane talks
    only to its own worker, and records are written in lane order afterwards. A round with a
    human operator runs sequentially, so that two prompts never share the terminal at once.
    """

    def __init__(self, size: int) -> None:
        self._pool = (
            ThreadPoolExecutor(max_workers=size, thread_name_prefix="mosaic-lane")
            if size > 1
            else None
        )

    def run(self, lanes: Sequence[Lane], call: Callable[[Lane], _T]) -> list[_T]:
        """``call(lane)`` for every lane; the results in lane order."""
        sequential = any(_has_human(lane.config) for lane in lanes)
        if self._pool is None or len(lanes) < 2 or sequential:
            return [call(lane) for lane in lanes]
        return [future.result() for future in [self._pool.submit(call, lane) for lane in lanes]]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
