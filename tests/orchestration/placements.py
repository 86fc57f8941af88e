"""Running experiments in the test's own process, with every component placed one way.

:class:`Placement` runs a run as ``mosaic experiment-start`` does, without the command: the
experiment file is loaded with ``load_experiment``, recorded by a ``StoreWriter`` in a SQLite
file of the test's folder, and run by an ``Executor``. The Executor, the RunGovernor, the
SimulationController and the conductors are threads of the test's process; the environment,
brain and muscle are threads too (inproc ZeroMQ) or each a process of its own (ipc).
After every run it asserts that nothing of the run is left running: no actor, no thread it
started, no component process.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pykka

from mosaic.experiment import load_experiment
from mosaic.orchestration.executor import Executor, ProgressCallback, RunResult
from mosaic.store import RunDetail, StoreWriter, open_store
from mosaic.transport.security import GATEKEEPER_THREAD
from tests.e2e.cli import cartpole, write_experiment
from tests.processes import tagged_processes

PLACEMENTS = ("thread", "process")
#: Seconds the store writer gets to commit what is left when the run is over.
CLOSE_TIMEOUT_S = 30.0
#: Seconds the threads of a finished run get to end after Executor.execute() returned.
THREAD_GRACE_S = 2.0


@dataclass(frozen=True)
class Outcome:
    """What one Executor.execute() returned, and the store it recorded the runs in."""

    results: list[RunResult]
    store: Path

    def detail(self, index: int = 0) -> RunDetail:
        """The stored record of the ``index``-th run (phase) of the results."""
        with open_store(self.store) as store:
            return store.show_run(self.results[index].uid)

    def transitions(self, index: int = 0) -> list[tuple[str | None, str]]:
        """The stored state transitions of the ``index``-th run, in order."""
        return [(t.from_state, t.to_state) for t in self.detail(index).transitions]


class Placement:
    """Runs CartPole experiments in the test's process with every component placed in ``kind``."""

    def __init__(self, kind: str, folder: Path, tag: str) -> None:
        self.kind = kind
        self.folder = folder
        self.tag = tag
        self.store = folder / "results.sqlite"
        self._threads = set(threading.enumerate())
        self._experiments = 0

    def run(self, on_progress: ProgressCallback | None = None, **settings: Any) -> Outcome:
        """Run ``tests.e2e.cli.cartpole(**settings)``, placed in this placement unless
        ``settings`` say otherwise, through an Executor; ``on_progress`` is called with the run's
        context while the run steps, in the thread that called this."""
        settings.setdefault("placement", self.kind)
        self._experiments += 1
        path = write_experiment(self.folder, cartpole(**settings),
                                f"experiment-{self._experiments}.yml")
        experiment = load_experiment(path, store_override=str(self.store))
        writer = StoreWriter(experiment.store_path)
        writer.start()
        try:
            results = Executor(experiment, writer, on_progress=on_progress).execute()
        finally:
            writer.close(CLOSE_TIMEOUT_S)
        self.assert_nothing_left_running()
        return Outcome(results, experiment.store_path)

    def assert_nothing_left_running(self) -> None:
        """No actor, no component process and (after :data:`THREAD_GRACE_S`) no thread started
        since this placement was made is alive."""
        actors = pykka.ActorRegistry.get_all()
        assert not actors, f"actors outlived the run: {actors}"
        processes = tagged_processes(self.tag)
        assert not processes, f"component processes outlived the run: {processes}"
        deadline = time.monotonic() + THREAD_GRACE_S
        while self._new_threads() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not self._new_threads(), f"threads outlived the run: {self._new_threads()}"

    def _new_threads(self) -> list[str]:
        # The gatekeeper serves every run of the process until it exits, by design.
        return [t.name for t in threading.enumerate()
                if t not in self._threads and t.is_alive() and t.name != GATEKEEPER_THREAD]
