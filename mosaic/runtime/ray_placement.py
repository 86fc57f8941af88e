"""Placing a component in a Ray actor, on whichever node of the cluster Ray picks (``placement:
ray``), behind the same :class:`~mosaic.runtime.placement.Placed` handle as a thread or process.

The actor runs the same :class:`~mosaic.runtime.host.ActorHost` around the same component class
as the other placements, bound to ``tcp://<its node's address>:*``: the run's peers reach it over
mosaic's own ZeroMQ transport, never through Ray. Over tcp the run's credentials turn CURVE on
(see :mod:`mosaic.transport.credentials`); they reach the actor as its constructor's argument
(msgpack bytes, see :mod:`mosaic.runtime.bootstrap`), through Ray, never through a file.

Liveness: the placer asks the actor whether its host still serves every :data:`BEAT_S`. A dead
actor (its process or its node gone) fails the next question at once; one that answers nothing
for the run's heartbeat timeout counts as hung. The actor's process dies with its node's raylet
(``PR_SET_PDEATHSIG``), so a node killed mid-run shows within a second or so, not after Ray's
own node health checks (tens of seconds by default).
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import threading
import time
from typing import Any

from mosaic.core.errors import ComponentDied, RequestTimeout
from mosaic.core.imports import allow_only
from mosaic.core.lifeline import arm_parent_death_signal
from mosaic.messages import RayRequest
from mosaic.messages.codec import pack, unpack
from mosaic.runtime import bootstrap
from mosaic.runtime.bootstrap import Bootstrap
from mosaic.runtime.component import make_component
from mosaic.runtime.host import ActorHost, HostStatus
from mosaic.runtime.placement import Check, Placed, PlacementKind
from mosaic.runtime.ray_support import (
    ACTOR_PREFIX,
    NAMESPACE,
    connect,
    describe_node,
    node_address,
    require_ray,
)

__all__ = ["BEAT_S", "RayPlaced", "ray_failure"]

log = logging.getLogger(__name__)

#: How often the placer asks a Ray-placed component whether it still serves.
BEAT_S = 0.25
_WAIT_SLICE_S = 0.05
#: How long a stop waits for Ray to confirm that the actor is gone, on top of its own timeout.
KILL_WAIT_S = 5.0


class MosaicComponent:
    """The Ray actor of one component: an :class:`ActorHost` in a thread of a Ray worker.

    Methods return msgpack bytes or plain values only. The worker process is the actor's alone
    (Ray starts one per actor) and dies with its node's raylet.
    """

    def __init__(self, kind: str, uid: str, component: str, trust: bytes) -> None:
        arm_parent_death_signal(signal.SIGKILL)
        self.kind, self.uid, self.path, self.trust = kind, uid, component, trust
        self.status = HostStatus()
        self.ref: Any = None

    def start(self, timeout: float) -> bytes:
        """Build and bind the component; ``{endpoint, node, address, failure}`` as msgpack."""
        ray = require_ray()
        node = ray.get_runtime_context().get_node_id()
        address = node_address()
        try:
            trust = bootstrap.decode(self.trust)
            allow_only(trust.allowed_imports)
            component = make_component(self.path, self.uid)
            component.credentials = trust.credentials
            component.allowed_imports = trust.allowed_imports
            self.ref = ActorHost.start(component, f"tcp://{address}:*", self.status)
            if not self.status.bound.wait(timeout):
                self.status.failure = f"start-up took longer than {timeout:g} s"
        except Exception as error:
            self.status.failure = f"{type(error).__name__}: {error}"
        return pack({"endpoint": self.status.endpoint, "node": node, "address": address,
                     "pid": os.getpid(), "failure": self.status.failure})

    def serving(self) -> bool:
        """True while the host serves (False once it stopped, by its shutdown or a failure)."""
        return not self.status.stopped.is_set()

    def outcome(self) -> str | None:
        """Why the host stopped, if it failed (``None``: it stopped in order, or still serves)."""
        return self.status.failure

    def stop(self, timeout: float) -> bool:
        """Ask the host to stop; True if it did within ``timeout`` s."""
        if self.ref is not None:
            self.ref.stop(block=False)
        return self.status.stopped.wait(timeout)


_actor_class: Any = None
_class_lock = threading.Lock()


def _remote_class() -> Any:
    global _actor_class
    with _class_lock:
        if _actor_class is None:
            _actor_class = require_ray("placement: ray").remote(MosaicComponent)
        return _actor_class


def ray_failure(error: BaseException) -> str:
    """Ray's reason for a failed call, in one line (Ray's own messages run to pages)."""
    text = str(error).strip().splitlines()
    first = text[0] if text else ""
    sentence = first.split(". ")[0].rstrip(".")
    return f"{type(error).__name__}: {sentence[:300]}"


class RayPlaced(Placed):
    """A component in a Ray actor. Construction asks Ray for the actor and returns at once;
    :meth:`wait_bound` waits until the component serves (see the module docstring)."""

    placement: PlacementKind = "ray"

    def __init__(self, kind: str, uid: str, *, component: str, trust: Bootstrap,
                 request: RayRequest | None = None, heartbeat_timeout: float = 2.5,
                 setup_timeout: float = 30.0) -> None:
        ray = connect("auto")  # a no-op where this process already joined a cluster
        self.uid, self.kind = uid, kind
        self.heartbeat_timeout = heartbeat_timeout
        self.node = "a Ray node"
        self.endpoint = ""
        request = request or RayRequest()
        self._ray = ray
        self._actor = _remote_class().options(
            name=f"{ACTOR_PREFIX}{kind}-{uid}-{secrets.token_hex(3)}", namespace=NAMESPACE,
            num_cpus=request.cpus, resources=dict(request.resources) or None, max_restarts=0,
            max_concurrency=4,
        ).remote(kind, uid, component, bootstrap.encode(trust))
        self._started = self._actor.start.remote(setup_timeout)
        self._ended = threading.Event()
        self._cause: str | None = None
        self._in_order = False
        self._last_answer = time.monotonic()
        self._beating = threading.Event()

    def describe(self) -> str:
        return f"{self.kind} {self.uid!r} (ray, {self.node})"

    def wait_bound(self, timeout: float = 30.0, check: Check | None = None) -> RayPlaced:
        """Block until the component serves; kill the actor and raise if it cannot start
        (:class:`ComponentDied` with the cause, :class:`RequestTimeout`, or what ``check``
        raises)."""
        deadline = time.monotonic() + timeout
        try:
            while not self._ray.wait([self._started], timeout=_WAIT_SLICE_S)[0]:
                if check is not None:
                    check()
                if time.monotonic() >= deadline:
                    raise RequestTimeout(f"{self.describe()} did not start within {timeout:g} s "
                                         "(is there a node with the resources it asks for?)")
            try:
                info = unpack(self._ray.get(self._started))
            except Exception as error:
                raise ComponentDied(self.describe(), ray_failure(error)) from None
            self.node = describe_node(info["node"], info["address"])
            if info["failure"] is not None or info["endpoint"] is None:
                raise ComponentDied(self.describe(), info["failure"] or "did not bind")
        except BaseException:
            self.kill()
            raise
        self.endpoint = info["endpoint"]
        log.info("%s serves on %s (pid %s)", self.describe(), self.endpoint, info["pid"])
        self._last_answer = time.monotonic()
        threading.Thread(target=self._beat, name=f"ray-beat-{self.uid}", daemon=True).start()
        return self

    def _beat(self) -> None:
        """Ask the actor whether it serves, until it ends; note how it ended."""
        while not self._ended.is_set():
            ref = self._actor.serving.remote()
            while not self._ended.is_set() and not self._ray.wait([ref], timeout=BEAT_S)[0]:
                pass
            if self._ended.is_set():
                return
            try:
                serving = self._ray.get(ref)
            except Exception as error:
                self._end(f"its Ray actor died: {ray_failure(error)}", in_order=False)
                return
            self._last_answer = time.monotonic()
            if not serving:
                try:
                    failure = self._ray.get(self._actor.outcome.remote(), timeout=KILL_WAIT_S)
                except Exception as error:
                    failure = ray_failure(error)
                self._end(failure or "stopped", in_order=failure is None)
                return
            self._ended.wait(BEAT_S)

    def _end(self, cause: str, *, in_order: bool) -> None:
        if not self._ended.is_set():
            self._cause, self._in_order = cause, in_order
            self._ended.set()

    def alive(self) -> bool:
        return not self._ended.is_set()

    def exit_cause(self) -> str | None:
        return self._cause if self._ended.is_set() else None

    def failure(self) -> str | None:
        cause = self.exit_cause()
        if cause is not None:
            return cause
        silence = time.monotonic() - self._last_answer
        if self.endpoint and silence > self.heartbeat_timeout:
            return f"stopped answering: no answer from {self.node} for {silence:.1f} s"
        return None

    def ended_in_order(self) -> bool:
        return self._ended.is_set() and self._in_order

    def wait(self, timeout: float) -> bool:
        return self._ended.wait(timeout)

    def kill(self) -> None:
        """End the actor (and its process) now; Ray frees what it reserved."""
        self._end("killed", in_order=False)
        try:
            self._ray.kill(self._actor, no_restart=True)
        except Exception as error:  # already gone with its node
            log.debug("%s: ray.kill: %s", self.describe(), ray_failure(error))

    def stop(self, timeout: float) -> bool:
        """Ask the component to stop, give it ``timeout`` s, then end the actor either way
        (its process is of no use once the component stopped). True if it stopped in time."""
        stopped = False
        if self.alive():
            try:
                stopped = bool(self._ray.get(self._actor.stop.remote(timeout),
                                             timeout=timeout + KILL_WAIT_S))
            except Exception as error:
                log.debug("%s: stop: %s", self.describe(), ray_failure(error))
        else:
            stopped = self._in_order
        if stopped:
            self._end("stopped", in_order=True)
        self.kill()
        return stopped
