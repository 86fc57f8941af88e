"""ZeroMQ transport: one context per process, ROUTER servers, DEALER clients, CURVE on tcp."""

from mosaic.transport.client import RequestClient
from mosaic.transport.context import context, pin_io_threads
from mosaic.transport.endpoints import EndpointAllocator, is_loopback
from mosaic.transport.server import Incoming, RequestServer

__all__ = ["EndpointAllocator", "Incoming", "RequestClient", "RequestServer", "context", "is_loopback",
           "pin_io_threads"]
