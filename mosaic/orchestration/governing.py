"""One run driven through its RunGovernor, in this process: the part of a run that is the same
in the command (local runs) and on a Ray node (runs on a cluster)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from mosaic.conductors.run_context import RunContext
from mosaic.core.errors import MosaicError
from mosaic.core.run_states import RunStatus
from mosaic.messages import (
    ExperimentRunFinishedNotice,
    ExperimentRunShutdownRequest,
    ExperimentShutdownResponse,
    ExperimentStartRequest,
    ExperimentStartResponse,
    names,
)
from mosaic.orchestration.run_governor import RunGovernor
from mosaic.orchestration.state_machine import FINAL_STATES
from mosaic.runtime.placement import ThreadPlaced
from mosaic.runtime.setup_wait import CEILING
from mosaic.transport import RequestClient, RequestServer

log = logging.getLogger(__name__)

#: How often the wait for a run looks at signals and progress while it steps.
WAIT_SLICE_MS = 50

#: The text of the statuses a run's governor ends it with.
_ENDINGS = frozenset(state.value for state in FINAL_STATES)


def final_status(text: str, error: str | None) -> tuple[RunStatus, str | None]:
    """The status and error of a run said to have ended as ``text`` with ``error`` (a
    governor's answer or a Ray task's result: text off the wire). A run said to end otherwise
    than in a final state, which no governor does, has failed, and its error says so."""
    if text in _ENDINGS:
        return RunStatus(text), error
    problem = f"the run was said to end as {text!r}, which is no final state"
    return RunStatus.FAILED, problem if error is None else f"{problem}; {error}"


def govern(ctx: RunContext, experiment_uid: str, index: int,
           on_wait: Callable[[], None] | None = None,
           ) -> tuple[RunStatus, str | None, tuple[str, ...]]:
    """Set up, run and shut down the run of ``ctx``; return its status, error and the
    components that had to be killed at shutdown.

    ``on_wait`` is called every :data:`WAIT_SLICE_MS` while the run steps (progress).
    ``ctx.cancelled`` cancels it in order. Whatever happens, nothing of the run is left: its
    governor is stopped, every placed component ended and its endpoints removed. The totals
    are in ``ctx.progress``.
    """
    config, run_uid, timeouts, endpoints = ctx.config, ctx.run_uid, ctx.timeouts, ctx.endpoints
    ctx.prelaunch()
    notices = RequestServer(endpoints.inproc("executor"), name="executor",
                            idle_timeout_ms=WAIT_SLICE_MS)
    governor: ThreadPlaced | None = None
    client: RequestClient | None = None
    answer: ExperimentShutdownResponse | None = None
    status: RunStatus = RunStatus.FAILED
    error: str | None = None
    try:
        governor = ThreadPlaced(RunGovernor(names.RUN_GOVERNOR, ctx), "orchestration",
                                endpoints.inproc(names.RUN_GOVERNOR), timeout=timeouts.setup)
        client = RequestClient(governor.endpoint, peer="run governor")
        # A backstop: each part's set-up wait decides, and may take up to CEILING timeouts.
        budget = timeouts.setup * CEILING * (4 + config.component_count())
        start = client.request(
            ExperimentStartRequest(experiment_uid, run_uid, index, ctx.seed, config,
                                   endpoints.inproc("executor")),
            ExperimentStartResponse, budget, _governor_check(governor))
        reason = _wait(ctx, notices, governor, on_wait) if start.ok else (
            RunStatus.CANCELLED.value if ctx.cancelled.is_set() else RunStatus.FAILED.value)
        answer = client.request(ExperimentRunShutdownRequest(run_uid, reason),
                                ExperimentShutdownResponse,
                                timeouts.shutdown * (4 + len(ctx.supervisor.placed())))
        status, error = final_status(answer.status, answer.error)
    except MosaicError as failure:
        status, error = ((RunStatus.CANCELLED, None) if ctx.cancelled.is_set()
                         else (RunStatus.FAILED, str(failure)))
        log.error("run %s: %s", run_uid, failure)
    finally:
        if client is not None:
            client.close()
        notices.close()
        if governor is not None and not governor.stop(timeouts.shutdown):
            log.error("run governor of %s did not stop", run_uid)
        for placed in ctx.supervisor.placed():
            if placed.alive():
                placed.kill()
        endpoints.cleanup()
    return status, error, answer.killed if answer is not None else ()


def _governor_check(governor: ThreadPlaced) -> Callable[[], None]:
    def check() -> None:
        if not governor.alive():
            raise MosaicError(f"run governor died: {governor.exit_cause()}")
    return check


def _wait(ctx: RunContext, notices: RequestServer, governor: ThreadPlaced,
          on_wait: Callable[[], None] | None) -> str:
    """Wait for the simulation to finish, a cancel, or the governor's death; return why (the
    status it ended with, as text for the governor's shutdown request)."""
    while True:
        incoming = notices.receive()
        if incoming is not None and isinstance(incoming.message, ExperimentRunFinishedNotice):
            return incoming.message.status
        if ctx.cancelled.is_set():
            return RunStatus.CANCELLED.value
        if not governor.alive():
            return RunStatus.FAILED.value
        if on_wait is not None:
            on_wait()
