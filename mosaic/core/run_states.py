"""The states a run moves through and the status it is stored with, named once.

:class:`RunState` is what a run's transitions record (``transitions.from_state`` and
``to_state``): the run governor's state machine moves through it, and so does an evaluation's
recorder. :class:`RunStatus` is the run's ``runs.status``. Both are ``StrEnum``\\ s: a member is
the text the store holds, and compares equal to it. They live in the core, not in the store
that keeps them, so that a process that steps a run names them without loading the store's
database library.
"""

from __future__ import annotations

import enum

__all__ = ["FINAL_STATUSES", "SUCCESSFUL_STATUSES", "RunState", "RunStatus"]


class RunState(enum.StrEnum):
    """Where a run is. The last three are final."""

    CREATED = "created"
    SETTING_UP = "setting_up"
    RUNNING = "running"
    STOPPING = "stopping"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def final(self) -> bool:
        """Whether no transition leaves the state."""
        return self in (RunState.FINISHED, RunState.FAILED, RunState.CANCELLED)


class RunStatus(enum.StrEnum):
    """How a run is stored: going, or how it ended. ``pruned``: a run of a search that its
    pruner ended early (its transitions end in ``finished``)."""

    CREATED = "created"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"
    PRUNED = "pruned"


#: The statuses a run ends with.
FINAL_STATUSES = frozenset({RunStatus.FINISHED, RunStatus.FAILED, RunStatus.CANCELLED,
                            RunStatus.PRUNED})
#: The statuses of a run that did what it was asked to: the command exits 0 when all its runs
#: end with one of them.
SUCCESSFUL_STATUSES = frozenset({RunStatus.FINISHED, RunStatus.PRUNED})
