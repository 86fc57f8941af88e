"""``mosaic evaluate`` and ``mosaic manual``: the two modes that run an evaluation file.

The commands parse the command line; what they run is in :mod:`mosaic.operators.evaluation`
(:func:`~mosaic.operators.evaluation.script.run_script_file`,
:func:`~mosaic.operators.evaluation.manual.run_manual_file`), imported when a command runs so
that ``mosaic --help`` stays quick.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import TypeVar

import click

from mosaic.cli.console import configure_logging, exit_with_error
from mosaic.core.errors import ConfigError
from mosaic.core.exit_codes import EXIT_BAD_INPUT

__all__ = ["evaluate", "manual"]

#: The choices of ``--log-level``, in any case.
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

_F = TypeVar("_F", bound=Callable[..., None])


def _evaluation_options(log_level: str, log_help: str) -> Callable[[_F], _F]:
    """FILE, ``--telemetry`` and ``--log-level`` (default ``log_level``): what both modes take."""

    def decorate(command: _F) -> _F:
        command = click.option(
            "--log-level", default=log_level, show_default=True,
            type=click.Choice(LOG_LEVELS, case_sensitive=False), help=log_help,
        )(command)
        command = click.option(
            "--telemetry", metavar="PATH",
            help="JSONL file or directory (overrides the file's telemetry).",
        )(command)
        return click.argument("file")(command)

    return decorate


def _python_signals() -> None:
    """Hand signals back to Python: the modes stop their workers on KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@click.command("evaluate")
@_evaluation_options("WARNING", "Log level for mosaic and worker messages on stderr.")
@click.option("--store", metavar="PATH|URL", help="SQLite file or PostgreSQL URL for the "
              "results (default: <file stem>.sqlite next to FILE).")
@click.option("--quiet", is_flag=True, help="Print only the final table.")
def evaluate(file: str, telemetry: str | None, log_level: str, store: str | None,
             quiet: bool) -> None:
    """Script mode: run N operators headless on seeded episodes and compare them.

    Records one run per operator in the results store (read by mosaic runs list), writes
    JSONL telemetry and prints a comparison table. Exit code 0 when every operator finished, 1
    when one failed, 2 for a bad FILE or --store, 130 on Ctrl-C.
    """
    from mosaic.operators.evaluation.script import run_script_file

    configure_logging(log_level)
    _python_signals()
    try:
        sys.exit(run_script_file(file, telemetry=telemetry, quiet=quiet, store=store))
    except ConfigError as error:
        exit_with_error(error, EXIT_BAD_INPUT)


@click.command("manual")
@_evaluation_options("ERROR", "Log level for mosaic and worker messages on stderr (ERROR, so "
                              "that they do not clutter the screen).")
def manual(file: str, telemetry: str | None, log_level: str) -> None:
    """Manual mode: step N operators side by side in the terminal, by hand.

    Step All, Reset All on one shared seed; h at the prompt lists the commands. Exit code 0, 1
    when an operator failed, 2 for a bad FILE, 130 on Ctrl-C.
    """
    from mosaic.operators.evaluation.manual import run_manual_file

    configure_logging(log_level)
    _python_signals()
    try:
        sys.exit(run_manual_file(file, telemetry=telemetry))
    except ConfigError as error:
        exit_with_error(error, EXIT_BAD_INPUT)
