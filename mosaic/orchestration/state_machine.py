"""The explicit state machine of one run, over the store's states
(:class:`~mosaic.core.run_states.RunState`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from mosaic.core.errors import IllegalTransition
from mosaic.core.run_states import RunState

__all__ = ["FINAL_STATES", "TRANSITIONS", "RunState", "RunStateMachine", "Transition"]

FINAL_STATES = frozenset(state for state in RunState if state.final)

#: from-state -> the states it may move to. Everything else is an illegal transition.
TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    RunState.CREATED: frozenset({RunState.SETTING_UP, RunState.CANCELLED}),
    RunState.SETTING_UP: frozenset({RunState.RUNNING, RunState.STOPPING}),
    RunState.RUNNING: frozenset({RunState.STOPPING}),
    RunState.STOPPING: frozenset({RunState.FINISHED, RunState.FAILED, RunState.CANCELLED}),
    RunState.FINISHED: frozenset(),
    RunState.FAILED: frozenset(),
    RunState.CANCELLED: frozenset(),
}


@dataclass(frozen=True)
class Transition:
    """One recorded move of the state machine."""

    seq: int
    source: RunState
    target: RunState
    reason: str
    at: float


class RunStateMachine:
    """Holds a run's state, refuses illegal moves, and records every transition.

    ``on_transition`` (for example the store) is called with each :class:`Transition` after
    it happened. Thread-safe.
    """

    def __init__(self, on_transition: Callable[[Transition], None] | None = None) -> None:
        self._state = RunState.CREATED
        self._history: list[Transition] = []
        self._on_transition = on_transition
        self._lock = threading.Lock()

    @property
    def state(self) -> RunState:
        return self._state

    @property
    def history(self) -> tuple[Transition, ...]:
        return tuple(self._history)

    def can(self, target: RunState) -> bool:
        return target in TRANSITIONS[self._state]

    def transition(self, target: RunState, reason: str = "") -> Transition:
        """Move to ``target``; raises :class:`IllegalTransition` if the table forbids it."""
        with self._lock:
            source = self._state
            if target not in TRANSITIONS[source]:
                allowed = ", ".join(sorted(s.value for s in TRANSITIONS[source])) or "none (final)"
                raise IllegalTransition(
                    f"run cannot go from {source.value} to {target.value}; allowed: {allowed}"
                )
            record = Transition(len(self._history) + 1, source, target, reason, time.time())
            self._state = target
            self._history.append(record)
        if self._on_transition is not None:
            self._on_transition(record)
        return record
