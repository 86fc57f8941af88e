"""The RunGovernor: one per run; owns the run's state machine."""

from __future__ import annotations

import logging
from collections.abc import Callable

from mosaic.conductors.agent_conductor import AgentConductor
from mosaic.conductors.environment_conductor import EnvironmentConductor
from mosaic.conductors.run_context import RunContext
from mosaic.core.errors import MosaicError, RunCancelled
from mosaic.core.run_states import RunStatus
from mosaic.messages import (
    ExperimentRunFinishedNotice,
    ExperimentRunShutdownRequest,
    ExperimentShutdownResponse,
    ExperimentStartRequest,
    ExperimentStartResponse,
    SimulationFinishedNotice,
    SimulationStartRequest,
    SimulationStartResponse,
    SimulationStopRequest,
    SimulationStopResponse,
    names,
)
from mosaic.orchestration.simulation_controller import SimulationController, describe
from mosaic.orchestration.state_machine import FINAL_STATES, RunState, RunStateMachine, Transition
from mosaic.runtime.component import Component, handles
from mosaic.runtime.placement import Placed, ThreadPlaced
from mosaic.runtime.setup_wait import CEILING
from mosaic.transport import RequestClient

log = logging.getLogger(__name__)

#: The final state a run ends in, by the text of the status a simulation's notice or a shutdown
#: request's reason names (off the wire: any other text ends it failed).
_OUTCOMES: dict[str, RunState] = {state.value: state for state in FINAL_STATES}


class RunGovernor(Component):
    """Brings one run up, keeps its state, and brings it down.

    * ExperimentStartRequest: starts the SimulationController, the EnvironmentConductor and the
      AgentConductor (in that order), sends SimulationStartRequest, and answers once the
      simulation is set up (state ``running``) or set-up failed (state ``stopping``).
    * SimulationFinishedNotice: records how the simulation ended and tells the executor with an
      ExperimentRunFinishedNotice.
    * ExperimentRunShutdownRequest: sends SimulationStopRequest, stops the orchestration
      components, kills anything of the run still alive, moves to the final state and answers
      ExperimentShutdownResponse.

    Every transition goes to the store as it happens.
    """

    def __init__(self, uid: str, ctx: RunContext) -> None:
        super().__init__(uid)
        self.ctx = ctx
        self.credentials = ctx.credentials
        self.machine = RunStateMachine(on_transition=self._record)
        self._orchestration: list[Placed] = []
        self._simulation: RequestClient | None = None
        self._executor: RequestClient | None = None
        self._outcome: tuple[RunState, str | None] | None = None

    def _record(self, transition: Transition) -> None:
        log.debug("run %s: %s -> %s (%s)", self.ctx.run_uid, transition.source.value,
                  transition.target.value, transition.reason)
        if self.ctx.store is not None:
            self.ctx.store.record_transition(self.ctx.run_id, transition.source.value,
                                             transition.target.value, transition.reason)

    def _settle(self, state: RunState, error: str | None) -> None:
        """Remember the first outcome; later ones (a stop after a failure) do not override it."""
        if self._outcome is None:
            self._outcome = (state, error)

    @handles(ExperimentStartRequest)
    def _start(self, request: ExperimentStartRequest) -> ExperimentStartResponse:
        ctx = self.ctx
        self.machine.transition(RunState.SETTING_UP, "experiment start requested")
        self._executor = self.connect(request.notify_endpoint, peer="executor")
        error: str | None
        try:
            for name, cls in ((names.SIMULATION_CONTROLLER, SimulationController),
                              (names.ENVIRONMENT_CONDUCTOR, EnvironmentConductor),
                              (names.AGENT_CONDUCTOR, AgentConductor)):
                # The controller drives the step loop: it runs on the step-loop CPU.
                cpu = ctx.hot_cpu if cls is SimulationController else None
                self._orchestration.append(ThreadPlaced(cls(name, ctx), "orchestration",
                                                        ctx.endpoints.inproc(name), cpu=cpu,
                                                        timeout=ctx.timeouts.setup))
            self._simulation = self.connect(self._orchestration[0].endpoint,
                                            peer="simulation controller")
            components = ctx.config.component_count()
            answer = self._simulation.request(
                SimulationStartRequest(ctx.run_uid, ctx.seed, ctx.config,
                                       ctx.endpoints.inproc(names.RUN_GOVERNOR)),
                SimulationStartResponse, ctx.timeouts.setup * CEILING * (2 + components),
                ctx.check)
            if answer.ok:
                self.machine.transition(RunState.RUNNING, "simulation set up")
                return ExperimentStartResponse(ctx.run_uid, True)
            error = answer.error
        except RunCancelled:
            error = "cancelled during set-up"
        except MosaicError as failure:
            error = describe(failure)
        if ctx.cancelled.is_set():
            self._settle(RunState.CANCELLED, None)
        else:
            self._settle(RunState.FAILED, error)
        self.machine.transition(RunState.STOPPING, error or "set-up failed")
        return ExperimentStartResponse(ctx.run_uid, False, error)

    @handles(SimulationFinishedNotice)
    def _finished(self, notice: SimulationFinishedNotice) -> None:
        self._settle(_OUTCOMES.get(notice.status, RunState.FAILED), notice.error)
        if self.machine.state is RunState.RUNNING:
            early = self.ctx.progress.ended_early
            self.machine.transition(RunState.STOPPING, f"simulation {notice.status}" + (
                f", ended early: {early}" if early and notice.status == RunStatus.FINISHED else ""))
        if self._executor is not None:
            self._executor.notify(
                ExperimentRunFinishedNotice(self.ctx.run_uid, notice.status, notice.error))

    @handles(ExperimentRunShutdownRequest)
    def _shutdown(self, request: ExperimentRunShutdownRequest) -> ExperimentShutdownResponse:
        ctx = self.ctx
        self._settle(_OUTCOMES.get(request.reason, RunState.FAILED), None)
        if self.machine.state in (RunState.SETTING_UP, RunState.RUNNING):
            self.machine.transition(RunState.STOPPING, f"shutdown requested: {request.reason}")
        killed: list[str] = []
        # A controller held in a call given up on (mosaic.runtime.watchdog) answers nothing:
        # its parts are stopped below without it.
        if self._simulation is not None and self._orchestration[0].failure() is None:
            components = len(ctx.supervisor.placed()) + 2
            try:
                answer = self._simulation.request(
                    SimulationStopRequest(ctx.run_uid, request.reason),
                    SimulationStopResponse,
                    ctx.timeouts.shutdown * components, _serving(self._orchestration[0]))
                killed.extend(answer.killed)
            except MosaicError as error:
                if self._orchestration[0].failure() is None:
                    log.error("simulation controller did not stop: %s", error)
                else:  # the run already says why (the part it waited on, or the cancel)
                    log.warning("%s; its parts are stopped without it", error)
                # A run whose orderly shutdown failed may have lost what shutdown saves
                # (checkpoints, the last steps): it did not finish.
                if self._outcome is not None and self._outcome[0] is RunState.FINISHED:
                    self._outcome = (RunState.FAILED, f"shutdown failed: {error}")
        for placed in reversed(self._orchestration):
            if not placed.stop(ctx.timeouts.shutdown):
                killed.append(placed.describe())
        if self._outcome is not None and self._outcome[0] is RunState.FINISHED:
            # A part that died on its way out lost what it was saving (a checkpoint, say); a
            # signal during the shutdown cut it short, and the same may be lost.
            death = self._death_in_shutdown(killed)
            if death is not None:
                self._outcome = (RunState.FAILED, f"shutdown failed: {death}")
            elif ctx.cancelled.is_set():
                self._outcome = (RunState.CANCELLED, None)
        # Whatever is still alive now was missed by its conductor: nothing may outlive the run.
        for placed in ctx.supervisor.placed():
            if placed.alive():
                placed.kill()
                killed.append(placed.describe())
        state, reason = self._outcome or (RunState.FAILED, "no outcome")
        self.machine.transition(state, reason or request.reason)
        self.request_stop()
        progress = ctx.progress
        # A thread cannot be killed: one its conductor gave up on is still alive in the sweep.
        return ExperimentShutdownResponse(ctx.run_uid, state.value, reason, progress.episodes,
                                          progress.steps, tuple(dict.fromkeys(killed)))

    def _death_in_shutdown(self, killed: list[str]) -> str | None:
        """The first component that ended otherwise than by its own orderly stop or a kill of
        the run's (those in ``killed``), and how; ``None`` if there is none."""
        for placed in self.ctx.supervisor.placed():
            cause = placed.exit_cause()
            if cause is None or placed.ended_in_order() or placed.describe() in killed:
                continue
            return f"{placed.describe()} died: {cause}"
        return None

    def on_shutdown(self) -> None:
        # Also after a failure of this governor: stop the orchestration it started.
        for placed in reversed(self._orchestration):
            if placed.alive():
                placed.stop(self.ctx.timeouts.shutdown)


def _serving(placed: Placed) -> Callable[[], None]:
    """A check that raises once ``placed`` is stuck: alive, but no longer serving (held in a
    call given up on). One that ended has sent its answer, if it had one."""
    def check() -> None:
        cause = placed.failure()
        if cause is not None and placed.alive():
            raise MosaicError(f"{placed.describe()} no longer serves: {cause}")
    return check
