"""How a run's end, as text off the wire (its governor's answer, a Ray task's result), becomes
the status the executor stores: a final state's text is that status; any other text fails the
run and its error says what was said."""

from __future__ import annotations

import pytest

from mosaic.core.run_states import RunStatus
from mosaic.orchestration.governing import final_status


@pytest.mark.parametrize("text", ["finished", "failed", "cancelled"])
def test_a_final_state_is_the_status_the_run_ends_with(text: str) -> None:
    status, error = final_status(text, "why")
    assert status is RunStatus(text) and error == "why"


@pytest.mark.parametrize("text", ["stopping", "running", "pruned", "interrupted", ""])
def test_any_other_text_fails_the_run_saying_so(text: str) -> None:
    assert final_status(text, None) == (
        RunStatus.FAILED, f"the run was said to end as {text!r}, which is no final state")
    status, error = final_status(text, "the governor died")
    assert status is RunStatus.FAILED
    assert error is not None and error.endswith("; the governor died") and repr(text) in error
