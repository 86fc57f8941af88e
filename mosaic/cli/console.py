"""What every ``mosaic`` command does on the console: log to stderr, and end on an error."""

from __future__ import annotations

import logging
import sys
from typing import NoReturn

import click

__all__ = ["configure_logging", "exit_with_error"]


def configure_logging(level: int | str) -> None:
    """Log to stderr from ``level`` up (a number, or a name such as ``"WARNING"``).

    Component and worker processes' stderr lines arrive here as log records too.
    """
    logging.basicConfig(level=level, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")


def exit_with_error(error: object, code: int) -> NoReturn:
    """Print ``error: <error>`` on stderr (every line of it) and exit with ``code``."""
    click.echo(f"error: {error}", err=True)
    sys.exit(code)
