"""An evaluation's record in the results store, beside its telemetry.

Script mode records an evaluation as experiments are recorded, so that ``mosaic runs list`` and
``mosaic runs show`` read both: one ``experiments`` row per evaluation (its uid, file and validated
configuration), one run per operator (``<run id>-<operator id>``, its index the operator's position
in the file), the run's state transitions under the names experiments use (``created → setting_up →
running → stopping → finished | failed | cancelled``), one ``episodes`` row per episode and one
``steps`` row per step. A step row holds the action, reward and termination of the worker's ``step``
reply; the observation is not stored, as workers send it only when asked to. A game's step row is
its player's (agent: the player's worker ``<operator>.<player>``, slot: the player) and its episode
row holds every player's return. A step with an LLM account (:mod:`mosaic.operators.llm_accounting`)
also gets ``metrics`` rows (``llm.fallback``, the token counts and, on a fallback, its reason),
stamped with the episode and the operator's steps so far.

Only the evaluation and its runs are recorded synchronously, before any worker starts; the rest
goes through the writer's queue, so that the rounds never wait for the database. Whoever owns
the writer commits what was queued (``flush`` or ``close``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mosaic.core.run_states import RunState, RunStatus
from mosaic.environments.gymnasium_adapter import GYMNASIUM_SLOT
from mosaic.operators.llm_accounting import account_metrics

if TYPE_CHECKING:
    from mosaic.operators.evaluation._models import EvaluationConfig
    from mosaic.store.writer import StoreWriter


#: The states of a run that has not begun to stop.
_GOING = (RunState.SETTING_UP, RunState.RUNNING)


@dataclass
class _Run:
    """One operator's run while it is recorded."""

    id: int
    environment: str
    state: RunState = RunState.SETTING_UP
    episodes: int = 0
    steps: int = 0


class StoreRecorder:
    """Records one evaluation run of ``config`` (run id ``run_id``) through ``writer``.

    The constructor records the evaluation and one run per operator, each ``setting_up``; it
    raises :class:`~mosaic.core.errors.StoreError` if the store refuses them (waiting at most the
    writer's call timeout). The other methods only enqueue, from the driving thread.
    """

    def __init__(self, writer: StoreWriter, config: EvaluationConfig, run_id: str) -> None:
        self._writer = writer
        source = None if config.source == "<memory>" else str(Path(config.source).resolve())
        experiment = writer.experiment_started(config.uid, source, config.model_dump(mode="json"))
        self._runs: dict[str, _Run] = {}
        for index, spec in enumerate(config.operators):
            run = _Run(writer.run_started(experiment, f"{run_id}-{spec.id}", index, None), spec.env)
            writer.record_transition(run.id, RunState.CREATED, RunState.SETTING_UP,
                                     "evaluation started")
            self._runs[spec.id] = run
        self._ending: tuple[RunStatus, str, str | None] = (RunStatus.FAILED, "no outcome", None)

    def running(self, operator_id: str) -> None:
        """The worker of ``operator_id`` started."""
        run = self._runs[operator_id]
        self._move(run, RunState.RUNNING, "worker started")

    def write(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Store the ``step`` and ``episode`` records of the telemetry; a ``failure`` record
        ends its operator's run as ``failed`` with the failure's message, unless the evaluation
        is already stopping (a worker stopped under a step fails it)."""
        steps = []
        metrics: list[tuple[Any, ...]] = []
        for record in records:
            run = self._runs[record["operator"]]
            kind = record["kind"]
            if kind == "step":
                run.steps += 1
                # A game's step is its player's: the player's worker is the agent.
                agent = record.get("actor", record["operator"])
                steps.append((
                    run.id, run.environment, record["episode"], record["step_index"],
                    agent, record.get("player", GYMNASIUM_SLOT), None, record["action"],
                    record["reward"], record["terminated"], record["truncated"],
                ))
                if "llm" in record:
                    now = time.time()
                    metrics.extend(
                        (run.id, agent, agent, name, value, record["episode"], run.steps, now)
                        for name, value in account_metrics(record["llm"]))
            elif kind == "episode":
                run.episodes += 1
                total = record["total_reward"]
                players = record.get("players")
                returns = ({player: part["return"] for player, part in players.items()}
                           if players else {GYMNASIUM_SLOT: total})
                self._writer.record_episode(
                    run.id, run.environment, record["episode"], record["length"], total,
                    returns, record["terminated"], record["truncated"], record["seed"])
            elif kind == "failure" and run.state in _GOING:
                phase, cause = record["phase"], record["cause"]
                why = ("failed to launch" if phase == "launch"
                       else "too many LLM fallbacks" if phase == "fallbacks"
                       else f"failed in {phase}: {cause}")
                self._move(run, RunState.STOPPING, why)
                self._end(run, RunStatus.FAILED, record["message"], record["message"])
        if steps:
            self._writer.record_steps(steps)
        if metrics:
            self._writer.record_metrics(metrics)

    def stopping(self, status: RunStatus, reason: str, error: str | None = None) -> None:
        """Every run still going is stopping, to end as ``status`` (see :meth:`finish`)."""
        self._ending = (status, reason, error)
        for run in self._runs.values():
            if run.state in _GOING:
                self._move(run, RunState.STOPPING, reason)

    def finish(self) -> None:
        """End every run not ended yet as :meth:`stopping` said (``failed`` if it was not
        called), with its episode and step counts; call it once every worker is stopped."""
        status, reason, error = self._ending
        for run in self._runs.values():
            if run.state in _GOING:
                self._move(run, RunState.STOPPING, reason)
            if run.state == RunState.STOPPING:
                self._end(run, status, error or "worker stopped", error)

    def _move(self, run: _Run, state: RunState, reason: str) -> None:
        self._writer.record_transition(run.id, run.state, state, reason)
        run.state = state

    def _end(self, run: _Run, status: RunStatus, reason: str, error: str | None) -> None:
        self._move(run, RunState(status), reason)
        self._writer.run_finished(run.id, status, error, run.episodes, run.steps)
