"""mosaic: multi-agent experiments over ZeroMQ."""

__version__ = "0.1.0"
