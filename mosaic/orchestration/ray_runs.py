"""Runs on a Ray cluster: each run is a Ray task on whichever node has its CPUs free.

The command keeps the store and the executor; a run's governor, controller and components run
in the task, on the node. The task is given the run's config, its run id and secrets (msgpack
bytes, through Ray: never a file), and the address of a server of the command's, where it
relays its records and progress (:mod:`mosaic.orchestration.record_relay`): the store keeps
one writer, and progress and the summary look as for a local run.

Failures: a run that says nothing for its heartbeat timeout (its node died, or its worker) is
failed, naming the node, and its task is cancelled; the other runs go on. A cancel (Ctrl-C)
reaches each run with the answer to its next batch and the run shuts down in order; runs not
started yet are taken off the cluster's queue. :meth:`RayRuns.cancel_all` ends every task at
once (a second Ctrl-C). A task's worker dies with its node's raylet, and with it every process
and Ray actor the run started.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from mosaic.conductors.run_context import RunContext, planned_processes
from mosaic.core.lifeline import arm_parent_death_signal
from mosaic.messages import RunConfig, RunRecordsRequest, RunRecordsResponse
from mosaic.messages.codec import pack, unpack
from mosaic.orchestration.governing import WAIT_SLICE_MS, govern
from mosaic.orchestration.record_relay import RecordRelay, apply
from mosaic.runtime import bootstrap
from mosaic.runtime.ray_placement import ray_failure
from mosaic.runtime.ray_support import ACTOR_PREFIX, connect, describe_node, node_address
from mosaic.store.writer import StoreWriter
from mosaic.transport import EndpointAllocator, RequestServer

__all__ = ["RayRuns", "run_on_node"]

log = logging.getLogger(__name__)

#: Once cancelled, how long a run that started gets to shut down before its task is ended.
CANCEL_GRACE_S = 15.0

Outcome = tuple[str, str | None, tuple[str, ...], str | None]


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
    relay = RecordRelay(fields["relay"], ctx, node)
    ctx.store = relay
    relay.start()
    try:
        status, error, killed = govern(ctx, ctx.experiment_uid, int(fields["index"]))
    finally:
        relay.close()
    if relay.lost is not None:  # the run was cancelled for it: say why
        status, error = "failed", (f"the command at {fields['relay']} was not reached from "
                                   f"{node}: {relay.lost}")
    return pack({"status": status, "error": error, "killed": list(killed), "node": node})


class RayRuns:
    """The command's side of runs on the Ray cluster at ``address``.

    Each run asks for ``cpus_per_component`` CPUs per process it starts, its own included
    (``placement: ray`` components ask for theirs themselves). Raises
    :class:`~mosaic.runtime.ray_support.RayMissing` or :class:`MosaicError` if the cluster
    cannot be joined.
    """

    def __init__(self, address: str, store: StoreWriter, cpus_per_component: float = 1.0) -> None:
        self._ray = connect(address)
        self.store = store
        self.cpus_per_component = cpus_per_component
        self.address = node_address()
        self._task = self._ray.remote(run_on_node)
        self._lock = threading.Lock()
        self._running: set[Any] = set()

    def cpus(self, config: RunConfig) -> float:
        """The CPUs a run of ``config`` asks the cluster for."""
        return self.cpus_per_component * (1 + len(planned_processes(config)))

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
        """Run ``ctx``'s run as a task; return its status, error, killed parts and node.

        The records reach the store, and the progress ``ctx.progress``, while it runs. Blocks
        until the run has ended, was failed (it stopped answering) or was cancelled.
        """
        server = RequestServer(f"tcp://{self.address}:*", name=f"relay of {ctx.run_uid}",
                               idle_timeout_ms=WAIT_SLICE_MS, credentials=ctx.credentials)
        job = pack({"experiment": ctx.experiment_uid, "run_uid": ctx.run_uid,
                    "run_id": ctx.run_id, "index": index, "seed": ctx.seed,
                    "config": ctx.config, "relay": server.endpoint,
                    "trust": bootstrap.encode(ctx.trust)})
        ref = self._task.options(name=f"{ACTOR_PREFIX}run-{ctx.run_uid}", max_retries=0,
                                 num_cpus=self.cpus(ctx.config)).remote(job)
        with self._lock:
            self._running.add(ref)
        try:
            return self._follow(ctx, ref, server, on_wait)
        finally:
            with self._lock:
                self._running.discard(ref)
            server.close()

    def _follow(self, ctx: RunContext, ref: Any, server: RequestServer,
                on_wait: Callable[[], None] | None) -> Outcome:
        node: str | None = None
        submitted = heard = time.monotonic()
        cancelled_at: float | None = None
        while True:
            incoming = server.receive()
            if incoming is not None and isinstance(incoming.message, RunRecordsRequest):
                if node is None:
                    log.info("run %s started on Ray %s, %.2f s after it was submitted",
                             ctx.run_uid, incoming.message.node, time.monotonic() - submitted)
                node = incoming.message.node
                heard = time.monotonic()
                apply(incoming.message, self.store, ctx)
                server.reply(incoming, RunRecordsResponse(ctx.run_uid, ctx.cancelled.is_set()))
            if self._ray.wait([ref], timeout=0)[0]:
                return self._outcome(ref, node)
            now = time.monotonic()
            if ctx.cancelled.is_set():
                if node is None:  # still queued: take it off the cluster's queue
                    self._cancel(ref, force=True)
                    return "cancelled", None, (), None
                cancelled_at = cancelled_at or now
                if now - cancelled_at > CANCEL_GRACE_S:
                    self._cancel(ref, force=True)
                    return "cancelled", f"ended after {CANCEL_GRACE_S:g} s to shut down", (), node
            silence = now - heard
            if node is not None and silence > ctx.timeouts.heartbeat:
                self._cancel(ref, force=True)
                return ("failed", f"the run on Ray {node} stopped answering: nothing for "
                        f"{silence:.1f} s (its node or worker died?)", (), node)
            if on_wait is not None:
                on_wait()

    def _outcome(self, ref: Any, node: str | None) -> Outcome:
        try:
            fields: Any = unpack(self._ray.get(ref))
        except Exception as error:
            where = f" on Ray {node}" if node is not None else ""
            return "failed", f"the run's task failed{where}: {ray_failure(error)}", (), node
        return (str(fields["status"]), fields["error"], tuple(fields["killed"]),
                str(fields["node"]))
