"""What both conductors do: place components, register them for supervision, reap them."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from mosaic.actors.kinds import component_path
from mosaic.conductors.run_context import HOT_LOOP_KINDS, RunContext
from mosaic.conductors.shutdown_clock import ShutdownClock
from mosaic.runtime.component import Component
from mosaic.runtime.placement import Placed, PlacementKind, ProcessPlaced, place
from mosaic.runtime.ray_placement import RayPlaced

log = logging.getLogger(__name__)

#: How often a reap looks at the clock while components stop.
_REAP_SLICE_S = 0.02


@dataclass(frozen=True)
class ComponentPlan:
    """One component to place: its kind, uid and placement, and whether a component in another
    process must reach it (a brain whose muscles run in processes)."""

    kind: str
    uid: str
    placement: PlacementKind
    reachable_from_process: bool = False


def _stop(placed: Placed, timeout: float, ended: list[bool]) -> None:
    ended.append(placed.stop(timeout))


class Conductor(Component):
    """Creates and supervises the components of one kind of part of a run.

    Every component it places is registered with the run's supervisor; at shutdown it gives each
    one the shutdown timeout to end (they normally already have, after their shutdown request),
    then kills it and reports it as killed.
    """

    def __init__(self, uid: str, ctx: RunContext) -> None:
        super().__init__(uid)
        self.ctx = ctx
        self.credentials = ctx.credentials
        self._placed: list[Placed] = []

    def place(self, kind: str, uid: str, placement: PlacementKind, *,
              reachable_from_process: bool) -> Placed:
        """Start component ``uid`` of ``kind`` in a thread or process; blocks until it is bound."""
        ctx = self.ctx
        cpu = ctx.hot_cpu if kind in HOT_LOOP_KINDS else None
        prelaunched = ctx.adopt(kind, uid) if placement == "process" else None
        placed: Placed
        if prelaunched is not None:
            placed = prelaunched.wait_bound(ctx.timeouts.setup, ctx.check)
        elif placement == "ray":
            remote = self._launch(ComponentPlan(kind, uid, placement))
            self._placed.append(remote)
            ctx.supervisor.add(remote)
            return remote.wait_bound(ctx.timeouts.setup, ctx.check)
        else:
            endpoint = ctx.endpoint_for(uid, reachable_from_process or placement == "process")
            placed = place(component_path(kind), kind, uid, placement, endpoint,
                           cpu=cpu, timeout=ctx.timeouts.setup, check=ctx.check,
                           heartbeat_timeout=ctx.timeouts.heartbeat, trust=ctx.trust)
        self._placed.append(placed)
        self.ctx.supervisor.add(placed)
        return placed

    def place_all(self, plans: Sequence[ComponentPlan]) -> list[Placed]:
        """Start every component of ``plans`` at once; return them, in order, once all are bound.

        Every process is launched (or adopted, if the run launched it ahead) before any is
        awaited, so their start-ups overlap: the wait is the slowest one's, not the sum. Each
        is given the set-up timeout to bind, and is registered for supervision and the reap as
        soon as it is launched: when one fails to start (:class:`ComponentDied` naming it, or
        whatever the run's check raises), the others end with this conductor like everything
        else it placed. Threads start in order while the processes start.
        """
        ctx = self.ctx
        launched: list[ProcessPlaced | RayPlaced | None] = []
        for plan in plans:
            process: ProcessPlaced | RayPlaced | None = None
            if plan.placement == "process":
                process = ctx.adopt(plan.kind, plan.uid) or self._launch(plan)
            elif plan.placement == "ray":
                process = self._launch(plan)
            if process is not None:
                self._placed.append(process)
                ctx.supervisor.add(process)
            launched.append(process)
        placed: list[Placed] = []
        for plan, process in zip(plans, launched, strict=True):
            if process is None:
                placed.append(self.place(plan.kind, plan.uid, plan.placement,
                                         reachable_from_process=plan.reachable_from_process))
            else:
                placed.append(process)
        for process in launched:
            if process is not None:
                process.wait_bound(ctx.timeouts.setup, ctx.check)
        return placed

    def _launch(self, plan: ComponentPlan) -> ProcessPlaced | RayPlaced:
        """Launch ``plan``'s process or Ray actor without waiting for it to bind."""
        ctx = self.ctx
        if plan.placement == "ray":
            return RayPlaced(plan.kind, plan.uid, component=component_path(plan.kind),
                             trust=ctx.trust, request=ctx.config.ray,
                             heartbeat_timeout=ctx.timeouts.heartbeat,
                             setup_timeout=ctx.timeouts.setup)
        return ProcessPlaced(plan.kind, plan.uid, ctx.endpoint_for(plan.uid, True),
                             component=component_path(plan.kind),
                             cpu=ctx.hot_cpu if plan.kind in HOT_LOOP_KINDS else None,
                             heartbeat_timeout=ctx.timeouts.heartbeat, trust=ctx.trust)

    def reap(self) -> tuple[str, ...]:
        """End every placed component; return those that had to be killed.

        They are stopped all at once, each in a thread of its own, so that slow ones do not
        add up; a cancel or a failure meanwhile cuts the time left (see :class:`ShutdownClock`),
        and whoever is still stopping then is killed.
        """
        killed = []
        clock = ShutdownClock(self.ctx)
        stopping: list[tuple[Placed, threading.Thread, list[bool]]] = []
        for placed in self._placed:
            self.ctx.supervisor.release(placed.uid)
            if placed.alive() and placed.failure() is not None:
                # Stopped answering: it would not hear a request to stop either.
                placed.kill()
                killed.append(placed.describe())
                continue
            ended: list[bool] = []
            thread = threading.Thread(target=_stop, args=(placed, clock.timeout, ended),
                                      name=f"stop-{placed.uid}", daemon=True)
            thread.start()
            stopping.append((placed, thread, ended))
        for placed, thread, ended in stopping:
            while thread.is_alive() and not clock.expired():
                thread.join(_REAP_SLICE_S)
            late = thread.is_alive()
            if late:
                placed.kill()
            if late or ended != [True]:
                log.warning("%s did not stop in time and was killed", placed.describe())
                killed.append(placed.describe())
        self._placed.clear()
        return tuple(killed)

    def on_shutdown(self) -> None:
        # Also on failure: nothing this conductor started may outlive it.
        for placed in self._placed:
            self.ctx.supervisor.release(placed.uid)
            placed.kill()
        self._placed.clear()
