"""The dashboard in the browser: recorded and live runs, learning curves, episode replay, and
Manual mode (``mosaic dashboard``).

It reads a store and drives operator workers; it needs the ``dashboard`` extra (Starlette and
uvicorn). :mod:`~mosaic.dashboard.security` says who may reach it.
"""

from mosaic.dashboard.app import Dashboard, create_app
from mosaic.dashboard.server import BackgroundServer, serve

__all__ = ["BackgroundServer", "Dashboard", "create_app", "serve"]
