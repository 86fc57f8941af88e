"""The run state machine: named states, a transition table, errors, and a record of moves."""

from __future__ import annotations

import pytest

from mosaic.core.errors import IllegalTransition
from mosaic.orchestration.state_machine import FINAL_STATES, TRANSITIONS, RunState, RunStateMachine


def test_a_normal_run_goes_through_every_state_and_records_them():
    recorded = []
    machine = RunStateMachine(on_transition=recorded.append)
    for state in (RunState.SETTING_UP, RunState.RUNNING, RunState.STOPPING, RunState.FINISHED):
        machine.transition(state, f"to {state.value}")
    assert machine.state is RunState.FINISHED and machine.state.final
    assert [(t.source, t.target) for t in recorded] == [
        (RunState.CREATED, RunState.SETTING_UP), (RunState.SETTING_UP, RunState.RUNNING),
        (RunState.RUNNING, RunState.STOPPING), (RunState.STOPPING, RunState.FINISHED)]
    assert [t.seq for t in machine.history] == [1, 2, 3, 4]
    assert machine.history[1].reason == "to running"


def test_a_failed_set_up_stops_without_running():
    machine = RunStateMachine()
    machine.transition(RunState.SETTING_UP)
    machine.transition(RunState.STOPPING, "environment died")
    machine.transition(RunState.FAILED)
    assert machine.state is RunState.FAILED


@pytest.mark.parametrize("source", list(RunState))
@pytest.mark.parametrize("target", list(RunState))
def test_every_transition_outside_the_table_raises_and_changes_nothing(source, target):
    machine = RunStateMachine()
    machine._state = source  # place the machine in `source` without a path to it
    if target in TRANSITIONS[source]:
        machine.transition(target)
        assert machine.state is target
    else:
        with pytest.raises(IllegalTransition, match=f"from {source.value} to {target.value}"):
            machine.transition(target)
        assert machine.state is source and machine.history == ()


def test_final_states_are_final():
    assert all(not TRANSITIONS[state] for state in FINAL_STATES)
    assert {RunState.FINISHED, RunState.FAILED, RunState.CANCELLED} == FINAL_STATES
