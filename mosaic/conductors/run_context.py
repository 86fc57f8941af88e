"""What the orchestration components of one run share inside the run's process.

Messages carry the protocol between components; this object carries the process-local
infrastructure they all need: the endpoint plan, the supervision registry, the cancellation
flag, the store writer and live progress counters. It never crosses a process boundary.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from mosaic.actors.kinds import component_path
from mosaic.core.errors import ComponentDied, ComponentHung, RunCancelled
from mosaic.messages import RunConfig, RunTimeouts
from mosaic.messages.names import muscle_uid
from mosaic.runtime.bootstrap import NO_TRUST, Bootstrap, named_strings
from mosaic.runtime.placement import Placed, ProcessPlaced
from mosaic.runtime.ray_support import node_address
from mosaic.stepping.progress import Progress
from mosaic.transport import Credentials, EndpointAllocator
from mosaic.transport.keys import CurveKeys


class RunRecords(Protocol):
    """Where a run's records go: the store writer (:class:`~mosaic.store.StoreWriter`), or, for
    a run on a Ray node, the relay to the command that holds it. No method blocks."""

    @property
    def queued(self) -> int:
        """How many calls are enqueued and not yet taken up: how far behind the writer is."""
        ...

    def record_steps(self, rows: Sequence[tuple[Any, ...]]) -> None: ...

    def record_metrics(self, rows: Sequence[tuple[Any, ...]]) -> None: ...

    def record_checkpoint(self, run_id: int, name: str, data: bytes,
                          episodes: int = 0) -> None: ...

    def record_transition(self, run_id: int, from_state: str | None, to_state: str,
                          reason: str | None) -> None: ...

    def record_episode(self, run_id: int, environment: str, episode: int, steps: int,
                       total_return: float | None, returns: Mapping[str, float],
                       terminated: bool, truncated: bool, seed: int | None, copy: int = 0,
                       evaluation: bool = False, snapshots: Mapping[str, int] | None = None,
                       chain: str | None = None) -> None: ...


#: A component's time to shut down after a failure or a cancel (see RunContext.shutdown_timeout).
HURRIED_SHUTDOWN_S = 0.5

#: Component kinds on the per-step path, pinned to the run's step-loop CPU.
HOT_LOOP_KINDS = frozenset({"environment", "muscle"})


class Supervisor:
    """Every placed component of a run, and the first one found dead.

    Conductors register what they place; anyone waiting on a component calls :meth:`check`
    during long waits, which raises :class:`ComponentDied` naming the first component that ended
    without being asked to.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._placed: dict[str, Placed] = {}
        self._released: set[str] = set()
        #: The first component found dead or hung (its description), if any: a run that
        #: failed for it may be tried again (``executor.max_failures``).
        self.crashed: str | None = None

    def add(self, placed: Placed) -> None:
        with self._lock:
            self._placed[placed.uid] = placed

    def crash(self, what: str) -> None:
        """Note that ``what`` died or stopped answering (unless something did before)."""
        with self._lock:
            self.crashed = self.crashed or what

    def release(self, uid: str) -> None:
        """``uid`` was asked to stop: its end is no longer a failure."""
        with self._lock:
            self._released.add(uid)

    def is_alive(self, uid: str) -> bool:
        """True if ``uid`` was placed and still serves (unknown uids count as alive).

        A process that stopped answering counts as dead: there is no point asking it anything.
        """
        with self._lock:
            placed = self._placed.get(uid)
        return placed is None or placed.failure() is None

    def placed(self) -> list[Placed]:
        with self._lock:
            return list(self._placed.values())

    def find(self, uid: str) -> Placed | None:
        """The component placed as ``uid``, if one was."""
        with self._lock:
            return self._placed.get(uid)

    def check(self, only: Collection[str] | None = None, *, in_order_ends: bool = False) -> None:
        """Raise for the first watched component (of ``only``, if given) that no longer serves;
        with ``in_order_ends``, one that ended by its own orderly stop does not count (a brain
        stops once its last muscle has shut down)."""
        with self._lock:
            watched = [p for uid, p in self._placed.items()
                       if uid not in self._released and (only is None or uid in only)]
        for placed in watched:
            cause = placed.failure()
            if cause is not None and not (in_order_ends and placed.ended_in_order()):
                failure = ComponentHung if placed.alive() else ComponentDied
                self.crash(placed.describe())
                raise failure(placed.describe(), cause)


@dataclass(eq=False)
class RunContext:
    """The shared, process-local state of one run."""

    experiment_uid: str
    run_uid: str
    run_id: int
    seed: int
    config: RunConfig
    endpoints: EndpointAllocator
    store: RunRecords | None
    supervisor: Supervisor = field(default_factory=Supervisor)
    cancelled: threading.Event = field(default_factory=threading.Event)
    #: Set when the simulation failed; with ``cancelled``, it makes the shutdown hurried.
    failed: threading.Event = field(default_factory=threading.Event)
    progress: Progress = field(default_factory=Progress)
    prelaunched: dict[str, ProcessPlaced] = field(default_factory=dict)
    #: The CPU of the step loop's threads, or None (see mosaic.core.affinity).
    hot_cpu: int | None = None
    #: What every component of the run is given, in a thread or a process: the run's secrets
    #: (see mosaic.transport.credentials) and what it may import (its experiment file's names).
    trust: Bootstrap = NO_TRUST

    @classmethod
    def for_run(cls, experiment_uid: str, run_uid: str, run_id: int, seed: int,
                config: RunConfig, store: RunRecords | None,
                keys: CurveKeys | None = None) -> RunContext:
        """The context of one run of ``config``: its endpoints, timeouts and fresh secrets.

        Every component of the run is trusted with the run's credentials (tcp keys from ``keys``
        if given) and may import what the validated config names, nothing else.
        """
        endpoints = EndpointAllocator(run_uid, transport=config.transport, host=config.host)
        trust = Bootstrap(Credentials.fresh(keys), named_strings(config.to_dict()))
        return cls(experiment_uid, run_uid, run_id, seed, config, endpoints, store, trust=trust)

    @property
    def timeouts(self) -> RunTimeouts:
        """The run's timeouts, as its config gives them."""
        return self.config.timeouts

    @property
    def credentials(self) -> Credentials | None:
        return self.trust.credentials

    def endpoint_for(self, uid: str, reachable_from_process: bool) -> str:
        """Where ``uid`` listens: inproc for its own process's peers only; for peers in other
        processes ipc or tcp as the run says, and tcp on this node's address when some
        component of the run is on a Ray node (a muscle there reaches its brain here)."""
        if reachable_from_process and "ray" in self.config.placements():
            return f"tcp://{node_address()}:*"
        return self.endpoints.for_placement(uid, reachable_from_process)

    def prelaunch(self) -> None:
        """Launch every process-placed component of the run at once, before set-up needs them.

        Start-up of a component process is mostly imports; launched together they start in
        parallel instead of one after the other. The conductors adopt them by uid.
        """
        for kind, uid in planned_processes(self.config):
            cpu = self.hot_cpu if kind in HOT_LOOP_KINDS else None
            placed = ProcessPlaced(kind, uid, self.endpoint_for(uid, True),
                                   component=component_path(kind), cpu=cpu,
                                   heartbeat_timeout=self.timeouts.heartbeat, trust=self.trust)
            self.prelaunched[uid] = placed
            self.supervisor.add(placed)

    def adopt(self, kind: str, uid: str) -> ProcessPlaced | None:
        """The pre-launched process for ``uid``, if there is one of ``kind``."""
        placed = self.prelaunched.pop(uid, None)
        if placed is not None and placed.kind != kind:
            placed.kill()
            return None
        return placed

    def shutdown_timeout(self) -> float:
        """How long one component may take to shut down before it is ended.

        The configured timeout, except after a failure or a cancel: then parts may be stuck
        (waiting on the one that died, or in slow user code), and Ctrl-C must mean seconds.
        """
        if self.cancelled.is_set() or self.failed.is_set():
            return min(self.timeouts.shutdown, HURRIED_SHUTDOWN_S)
        return self.timeouts.shutdown

    def check(self) -> None:
        """Raise :class:`RunCancelled` or :class:`ComponentDied` if the run must stop waiting."""
        if self.cancelled.is_set():
            raise RunCancelled(f"run {self.run_uid} was cancelled")
        self.supervisor.check()


def planned_processes(config: RunConfig) -> list[tuple[str, str]]:
    """(kind, uid) of every component the run's config places in a process of its own."""
    planned = []
    for env in config.environments:
        if env.placement == "process":
            workers = env.rollout_workers()
            planned.extend([("rollout", uid) for uid in workers] if workers
                           else [("environment", env.uid)])
    for agent in config.agents:
        if agent.brain_placement == "process":
            planned.append(("brain", agent.uid))
        if agent.muscle_placement == "process":
            for env in config.environments:
                if agent.acts_in(env, len(config.agents)) and not env.rollouts:
                    planned.append(("muscle", muscle_uid(agent.uid, env.uid)))
    return planned
