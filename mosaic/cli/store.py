"""``mosaic store``: upkeep of a results store."""

from __future__ import annotations

import click

from mosaic.cli.console import exit_with_error
from mosaic.core.exit_codes import EXIT_BAD_INPUT


@click.group("store")
def store() -> None:
    """Upkeep of a results store."""


@store.command("recover")
@click.argument("spill", type=click.Path(dir_okay=False, exists=True))
@click.option("--store", "target", metavar="PATH|URL", required=True,
              help="The store the runs were recorded in: SQLite file or PostgreSQL URL.")
def recover(spill: str, target: str) -> None:
    """Write the records of SPILL into the store, once it is back.

    SPILL is the file a run's store writer kept the records in that the store did not take
    before it was given up on (the run's error names it). Everything is written in one
    transaction, or nothing; the file is removed once its records are in.
    """
    from mosaic.core.errors import StoreError
    from mosaic.store.recover import recover_spill

    try:
        done = recover_spill(spill, target)
    except StoreError as error:
        exit_with_error(error, EXIT_BAD_INPUT)
    runs = ", ".join(done.runs) or "none"
    already = f" ({done.already} were in it already)" if done.already else ""
    click.echo(f"{done.spill}: {done.written} records written into {done.store}{already}; "
               f"runs: {runs}; the file is removed")
    if done.superseded:
        click.echo(f"left out: the records of {', '.join(done.superseded)}, resumed since the "
                   "file was written", err=True)
    if done.cut_off:
        click.echo(f"warning: the last {done.cut_off} bytes of {done.spill} were a record cut "
                   "off when the command that wrote it was killed: not a whole record, not "
                   "written", err=True)
