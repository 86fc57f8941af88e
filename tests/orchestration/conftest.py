"""One fixture, ``placement``, runs each orchestration test in every placement of a run's parts.

As Thespian runs one test suite over every system base, each test that takes ``placement`` runs
twice: once with every component (environment, brain, muscle) in a thread of the test's own
process, reached over inproc ZeroMQ, and once with each in a process of its own, reached over
ipc (see tests.orchestration.placements). Whatever a failing test leaves behind is ended at
teardown.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mosaic.runtime.placement import kill_all_processes
from tests.orchestration.placements import PLACEMENTS, Placement


@pytest.fixture(params=PLACEMENTS)
def placement(request: pytest.FixtureRequest, tmp_path: Path,
              process_tag: str) -> Iterator[Placement]:
    """Every component of the test's runs in a thread (inproc), or each in a process (ipc)."""
    try:
        yield Placement(request.param, tmp_path, process_tag)
    finally:
        # A test that failed mid-run may have left component processes: mosaic's own register
        # of them ends them (the process_tag guard then checks that none is left).
        kill_all_processes()
