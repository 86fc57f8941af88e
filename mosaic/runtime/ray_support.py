"""Ray, the optional engine for runs and components on a cluster: importing it, joining a cluster.

Ray is the ``mosaic[ray]`` extra. Everything of mosaic that uses it imports it through
:func:`require_ray`, which says what to install when it is missing. Ray's own control plane
(scheduling, task arguments, actor calls) pickles; mosaic gives it bytes only (msgpack, its own
codec), and every record and step still crosses the network over mosaic's ZeroMQ transport, with
CURVE (see :mod:`mosaic.transport.credentials`).
"""

from __future__ import annotations

import logging
import socket
import threading
from types import ModuleType

from mosaic.core.errors import MosaicError

__all__ = ["ACTOR_PREFIX", "NAMESPACE", "RayMissing", "connect", "node_address", "require_ray"]

#: The namespace of mosaic's Ray actors, and the prefix of their names (Ray's state API shows
#: them by these: anything left behind is easy to find).
NAMESPACE = "mosaic"
ACTOR_PREFIX = "mosaic-"
#: How long the head of a cluster may take to accept a connection before it counts as absent.
CONNECT_TIMEOUT_S = 5.0
#: What a user installs to have Ray.
EXTRA = "pip install 'mosaic[ray]'"

_lock = threading.Lock()
_addresses: dict[str, str] = {}


class RayMissing(MosaicError):
    """Ray is needed (``--ray``, ``executor: {ray: ...}`` or ``placement: ray``) but missing."""


def require_ray(why: str = "runs on a Ray cluster") -> ModuleType:
    """The ``ray`` module; :class:`RayMissing` (saying what to install) if it cannot be imported."""
    try:
        import ray
    except ImportError as error:
        raise RayMissing(f"{why} need Ray, which is not installed ({error}): {EXTRA}") from None
    return ray


def connect(address: str = "auto") -> ModuleType:
    """Join the Ray cluster at ``address`` (``auto``: the one this machine's ``ray start``
    started), once per process; return the ``ray`` module.

    Worker output is not forwarded to this process (mosaic relays what matters: records, and
    every failure with its cause), nor are Ray's warnings: what they would have said of a
    request the cluster cannot meet, mosaic says itself (``mosaic.orchestration.ray_fit`` before
    anything starts, and :class:`~mosaic.orchestration.ray_runs.RayRuns` while a run waits on
    the cluster's queue). Raises :class:`RayMissing`, or :class:`MosaicError` with
    Ray's reason when the cluster cannot be reached.
    """
    ray = require_ray()
    with _lock:
        if ray.is_initialized():
            return ray
        _check_reachable(address)
        try:
            ray.init(address=address, namespace=NAMESPACE, logging_level=logging.ERROR,
                     log_to_driver=False, configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as error:
            raise MosaicError(f"cannot join the Ray cluster at {address!r}: {error}") from None
    return ray


def _check_reachable(address: str) -> None:
    """Fail at once where nothing listens at ``host:port`` (Ray itself would retry for minutes)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or address.startswith(("ray://", "auto", "local")):
        return
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as error:
        raise MosaicError(f"no Ray cluster answers at {address!r}: {error} (start one with "
                          "'ray start --head', or give the head's address)") from None


def node_address() -> str:
    """The address of this process's Ray node (its ``--node-ip-address``): where peers on other
    nodes reach it. Asked of the cluster once per process."""
    ray = require_ray()
    node_id = ray.get_runtime_context().get_node_id()
    with _lock:
        if node_id not in _addresses:
            found = [node["NodeManagerAddress"] for node in ray.nodes()
                     if node["NodeID"] == node_id]
            _addresses[node_id] = found[0] if found else ray.util.get_node_ip_address()
        return _addresses[node_id]


def describe_node(node_id: str, address: str) -> str:
    """A node as failures and logs name it: its address and the start of its id."""
    return f"node {address} ({node_id[:12]})"
