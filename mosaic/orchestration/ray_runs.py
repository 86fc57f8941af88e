"""Runs on a Ray cluster: each run is a Ray task on whichever node has its CPUs free.

The command keeps the store and the executor; a run's governor, controller and components run
in the task, on the node. The task is given the run's config, its run id and secrets (msgpack
bytes, through Ray: never a file), and the address of a server of the command's, where it
relays its records and progress (:mod:`mosaic.orchestration.record_relay`): the store keeps
one writer, and progress and the summary look as for a local run.

Waiting: a run's task waits on the cluster's queue until a node has its CPUs free. A request
no node could ever meet is refused before anything starts (:mod:`mosaic.orchestration.ray_fit`);
a run not started yet says so every :data:`QUEUE_WARN_EVERY_S` (a warning: what it waits for,
and what the cluster has free; the first one sooner with a short timeout), and after
``queue_timeout_s`` its task is cancelled and the run fails, saying why. "Started" is the run's
first relayed batch, which comes once its worker runs.

Failures: a run that says nothing for its heartbeat timeout (its node died, or its worker) is
failed, naming the node, and its task is cancelled; the other runs go on. A cancel (Ctrl-C)
reaches each run with the answer to its next batch and the run shuts down in order; runs not
started yet are taken off the cluster's queue. :meth:`RayRuns.cancel_all` ends every task at
once (a second Ctrl-C). A task's worker dies with its node's raylet, and with it every process
and Ray actor the run started.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mosaic.conductors.run_context import RunContext
from mosaic.core.checkpoints import save_bytes
from mosaic.core.lifeline import arm_parent_death_signal
from mosaic.core.run_states import RunStatus
from mosaic.messages import RunConfig, RunRecordsRequest, RunRecordsResponse
from mosaic.messages.codec import pack, unpack
from mosaic.orchestration.checkpoint_sync import CheckpointSync
from mosaic.orchestration.governing import WAIT_SLICE_MS, final_status, govern
from mosaic.orchestration.ray_fit import CPU, describe_amounts, run_cpus
from mosaic.orchestration.record_relay import RecordRelay, RecordSink
from mosaic.runtime import bootstrap
from mosaic.runtime.ray_placement import ray_failure
from mosaic.runtime.ray_support import ACTOR_PREFIX, connect, describe_node, node_address
from mosaic.store.writer import StoreWriter
from mosaic.transport import EndpointAllocator, RequestServer

__all__ = ["RayRuns", "run_on_node"]

log = logging.getLogger(__name__)

#: Once cancelled, how long a run that started gets to shut down before its task is ended.
CANCEL_GRACE_S = 15.0
#: How long a run's task may wait on the cluster's queue before the run fails (the default of
#: ``executor.ray.queue_timeout_s``).
QUEUE_TIMEOUT_S = 300.0
#: How often a run still on the cluster's queue says so.
QUEUE_WARN_EVERY_S = 30.0

#: A run's status, error, killed parts, node, and when it started on its node (``time.time()``
#: here, when its first batch arrived; ``None``: it never started).
Outcome = tuple[RunStatus, str | None, tuple[str, ...], str | None, float | None]


def run_on_node(job: bytes) -> bytes:
    """The Ray task of one run: govern it here, relaying its records; the outcome as msgpack.

    ``job`` is what :meth:`RayRuns.run` packs. Runs in a Ray worker, which dies with its
    node's raylet (and its component processes with it).
    """
    arm_parent_death_signal(signal.SIGKILL)
    fields: Any = unpack(job)
    config: RunConfig = fields["config"]
    if not isinstance(config, RunConfig):
        raise TypeError(f"expected a RunConfig, got {type(config).__name__}")
    ray = connect()
    node = describe_node(ray.get_runtime_context().get_node_id(), node_address())
    ctx = RunContext(fields["experiment"], fields["run_uid"], int(fields["run_id"]),
                     int(fields["seed"]), config,
                     EndpointAllocator(fields["run_uid"], transport=config.transport,
                                       host=config.host),
                     None, trust=bootstrap.decode(fields["trust"]))
    # The checkpoints the run loads, sent along: this node's disk may not have them.
    for path, data in dict(fields.get("loads", {})).items():
        if not os.path.exists(path):
            save_bytes(path, bytes(data))
    relay = RecordRelay(fields["relay"], ctx, node)
    ctx.store = relay
    relay.start()
    sync = CheckpointSync(config, ctx.run_id, relay)  # what its brains save, to the store
    try:
        status, error, killed = govern(ctx, ctx.experiment_uid, int(fields["index"]),
                                       sync.polling(None))
        sync.poll(force=True)
    finally:
        relay.close()
    if relay.lost is not None:  # the run was cancelled for it: say why
        status, error = RunStatus.FAILED, (f"the command at {fields['relay']} was not reached "
                                           f"from {node}: {relay.lost}")
    return pack({"status": status.value, "error": error, "killed": list(killed), "node": node})


def _loads(config: RunConfig) -> dict[str, bytes]:
    """The checkpoint files the agents of ``config`` load, as they are on this disk (the
    command's, where earlier phases' checkpoints are written back from the store)."""
    loads = {}
    for agent in config.agents:
        load = agent.checkpoints.load if agent.checkpoints is not None else None
        if load is not None and os.path.exists(load):
            loads[load] = Path(load).read_bytes()
    return loads


class RayRuns:
    """The command's side of runs on the Ray cluster at ``address``.

    Each run asks for ``cpus_per_component`` CPUs per process it starts, its own included
    (``placement: ray`` components ask for theirs themselves). A run whose task has not started
    on a node within ``queue_timeout_s`` fails (see the module docstring). Raises
    :class:`~mosaic.runtime.ray_support.RayMissing` or :class:`MosaicError` if the cluster
    cannot be joined.
    """

    def __init__(self, address: str, store: StoreWriter, cpus_per_component: float = 1.0, *,
                 queue_timeout_s: float = QUEUE_TIMEOUT_S) -> None:
        if queue_timeout_s <= 0:
            raise ValueError(f"queue_timeout_s must be > 0, got {queue_timeout_s}")
        self._ray = connect(address)
        self.store = store
        self.cpus_per_component = cpus_per_component
        self.queue_timeout_s = queue_timeout_s
        self.address = node_address()
        self._task = self._ray.remote(run_on_node)
        self._lock = threading.Lock()
        self._running: set[Any] = set()

    def cpus(self, config: RunConfig) -> float:
        """The CPUs a run of ``config`` asks the cluster for."""
        return run_cpus(config, self.cpus_per_component)

    def cancel_all(self) -> None:
        """End every run's task now (their workers, processes and actors with them)."""
        with self._lock:
            running = list(self._running)
        for ref in running:
            self._cancel(ref, force=True)

    def _cancel(self, ref: Any, *, force: bool) -> None:
        try:
            self._ray.cancel(ref, force=force)
        except Exception as error:  # already ended
            log.debug("ray.cancel: %s", ray_failure(error))

    def run(self, ctx: RunContext, index: int, on_wait: Callable[[], None] | None) -> Outcome:
        """Run ``ctx``'s run as a task; return its status, error, killed parts, node and
        when it started there (see :data:`Outcome`).

        The records reach the store, and the progress ``ctx.progress``, while it runs. Blocks
        until the run has ended, was failed (it stopped answering) or was cancelled.
        """
        server = RequestServer(f"tcp://{self.address}:*", name=f"relay of {ctx.run_uid}",
                               idle_timeout_ms=WAIT_SLICE_MS, credentials=ctx.credentials)
        job = pack({"experiment": ctx.experiment_uid, "run_uid": ctx.run_uid,
                    "run_id": ctx.run_id, "index": index, "seed": ctx.seed,
                    "config": ctx.config, "relay": server.endpoint,
                    "trust": bootstrap.encode(ctx.trust), "loads": _loads(ctx.config)})
        ref = self._task.options(name=f"{ACTOR_PREFIX}run-{ctx.run_uid}", max_retries=0,
                                 num_cpus=self.cpus(ctx.config)).remote(job)
        with self._lock:
            self._running.add(ref)
        # The run's records are decoded and handed to the store off this thread; closing the
        # sink hands the last of them before the run's end is recorded (after this returns).
        sink = RecordSink(self.store, ctx)
        try:
            return self._follow(ctx, ref, server, sink, on_wait)
        finally:
            with self._lock:
                self._running.discard(ref)
            server.close()
            sink.close()

    def _follow(self, ctx: RunContext, ref: Any, server: RequestServer, sink: RecordSink,
                on_wait: Callable[[], None] | None) -> Outcome:
        node: str | None = None
        started_at: float | None = None
        submitted = heard = time.monotonic()
        # A short queue timeout still hears one warning before the run fails.
        next_warning = submitted + min(QUEUE_WARN_EVERY_S, self.queue_timeout_s / 2)
        cancelled_at: float | None = None
        while True:
            incoming = server.receive()
            if incoming is not None and isinstance(incoming.message, RunRecordsRequest):
                if node is None:
                    started_at = time.time()
                    log.info("run %s started on Ray %s, %.2f s after it was submitted",
                             ctx.run_uid, incoming.message.node, time.monotonic() - submitted)
                node = incoming.message.node
                heard = time.monotonic()
                sink.submit(incoming.message)
                server.reply(incoming, RunRecordsResponse(ctx.run_uid, ctx.cancelled.is_set()))
            if self._ray.wait([ref], timeout=0)[0]:
                return (*self._outcome(ctx, ref, node), started_at)
            now = time.monotonic()
            if ctx.cancelled.is_set():
                if node is None:  # still queued: take it off the cluster's queue
                    self._cancel(ref, force=True)
                    return RunStatus.CANCELLED, None, (), None, None
                cancelled_at = cancelled_at or now
                if now - cancelled_at > CANCEL_GRACE_S:
                    self._cancel(ref, force=True)
                    return (RunStatus.CANCELLED,
                            f"ended after {CANCEL_GRACE_S:g} s to shut down", (), node,
                            started_at)
            if node is None and now - submitted >= self.queue_timeout_s:
                self._cancel(ref, force=True)
                return (RunStatus.FAILED, self._unstarted(ctx, server, now - submitted), (), None,
                        None)
            if node is None and now >= next_warning:
                next_warning += QUEUE_WARN_EVERY_S
                log.warning("run %s has waited %.0f s for a Ray node with %s free (%s; `ray "
                            "status` shows the demand); it fails after %g s "
                            "(executor.ray.queue_timeout_s)", ctx.run_uid, now - submitted,
                            describe_amounts({CPU: self.cpus(ctx.config)}), self._free(),
                            self.queue_timeout_s)
            silence = now - heard
            if node is not None and silence > ctx.timeouts.heartbeat:
                self._cancel(ref, force=True)
                ctx.supervisor.crash(f"the run's task on Ray {node}")
                return (RunStatus.FAILED, f"the run on Ray {node} stopped answering: nothing for "
                        f"{silence:.1f} s (its node or worker died?)", (), node, started_at)
            if on_wait is not None:
                on_wait()

    def _unstarted(self, ctx: RunContext, server: RequestServer, waited: float) -> str:
        """Why a run whose task did not start in time failed."""
        return (f"the run did not start on the Ray cluster within {waited:.0f} s "
                f"(executor.ray.queue_timeout_s: {self.queue_timeout_s:g}): no node had "
                f"{describe_amounts({CPU: self.cpus(ctx.config)})} free for its task "
                f"({self._free()}; `ray status` shows the demand), or the task started but "
                f"could not reach the command at {server.endpoint}")

    def _free(self) -> str:
        """What the cluster has free now, as a warning says it."""
        try:
            free = self._ray.available_resources().get(CPU, 0.0)
            total = self._ray.cluster_resources().get(CPU, 0.0)
        except Exception as error:
            return f"the cluster's free CPUs are unknown: {ray_failure(error)}"
        return f"the cluster has {free:g} of {total:g} CPUs free now"

    def _outcome(self, ctx: RunContext, ref: Any,
                 node: str | None) -> tuple[RunStatus, str | None, tuple[str, ...], str | None]:
        try:
            fields: Any = unpack(self._ray.get(ref))
        except Exception as error:  # its worker or node died under it
            where = f" on Ray {node}" if node is not None else ""
            ctx.supervisor.crash(f"the run's task{where}")
            return RunStatus.FAILED, f"the run's task failed{where}: {ray_failure(error)}", (), node
        status, said = final_status(str(fields["status"]), fields["error"])
        return status, said, tuple(fields["killed"]), str(fields["node"])
