"""ZeroMQ transport: one context per process, ROUTER servers and DEALER clients that
authenticate every peer with the run's credentials (PLAIN over ipc, CURVE over tcp)."""

from mosaic.transport.client import RequestClient, routing_id, sender_of
from mosaic.transport.context import context, pin_io_threads
from mosaic.transport.credentials import Credentials
from mosaic.transport.endpoints import EndpointAllocator, is_loopback
from mosaic.transport.server import Incoming, RequestServer

__all__ = ["Credentials", "EndpointAllocator", "Incoming", "RequestClient", "RequestServer",
           "context", "is_loopback", "pin_io_threads", "routing_id", "sender_of"]
