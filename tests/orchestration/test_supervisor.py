"""The run's supervisor: a component that no longer serves fails a wait on it, unless the wait
allows for the component having ended in order (a brain stops once its last muscle is shut
down, maybe before that muscle's answer is read)."""

from __future__ import annotations

import pytest

from mosaic.conductors.run_context import Supervisor
from mosaic.core.errors import ComponentDied
from mosaic.runtime.placement import Placed

pytestmark = pytest.mark.timeout(10)


class Ended(Placed):
    """A process-placed component that has ended, in order or not."""

    def __init__(self, uid: str, code: int) -> None:
        self.uid, self.kind, self.placement, self.endpoint = uid, "brain", "process", ""
        self.code = code

    def alive(self) -> bool:
        return False

    def exit_cause(self) -> str | None:
        return f"exit code {self.code}"

    def ended_in_order(self) -> bool:
        return self.code == 0


def test_an_ended_component_fails_a_check_unless_it_ended_in_order_and_that_is_allowed() -> None:
    supervisor = Supervisor()
    supervisor.add(Ended("stopped", 0))
    supervisor.add(Ended("crashed", 1))
    with pytest.raises(ComponentDied, match="stopped"):
        supervisor.check(only=("stopped",))
    supervisor.check(only=("stopped",), in_order_ends=True)
    with pytest.raises(ComponentDied, match="crashed"):
        supervisor.check(only=("crashed",), in_order_ends=True)
