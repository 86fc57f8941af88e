"""Command-line plumbing that the Script mode and Manual mode entry points share."""

from __future__ import annotations

import logging
import sys
from typing import IO

from mosaic.core.errors import ConfigError

#: The choices of ``--log-level``.
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def configure_logging(level: str) -> None:
    """Log to stderr at ``level`` (worker stderr lines arrive as log records)."""
    logging.basicConfig(
        stream=sys.stderr,
        level=level.upper(),
        format="%(levelname)s %(name)s: %(message)s",
    )


def print_config_error(error: ConfigError, stream: IO[str]) -> None:
    """Print ``error`` and each of its notes (the further problems) to ``stream``."""
    print(f"error: {error}", file=stream)
    for note in getattr(error, "__notes__", []):
        print(f"       {note}", file=stream)
