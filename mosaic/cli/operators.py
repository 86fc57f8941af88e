"""``mosaic operators``: the kinds of operator an evaluation file or an OperatorMuscle can name."""

from __future__ import annotations

import click


@click.command("operators")
def operators() -> None:
    """List every operator type: mosaic's own and those installed packages add.

    A package adds one through the `mosaic.operators` entry-point group, naming a worker
    module (see the README's operator section).
    """
    from mosaic.core.text_table import format_table
    from mosaic.operators.api.kinds import operator_kinds

    rows = [(kind.name, kind.worker_module or "(the file's command list)", kind.origin,
             kind.description) for kind in operator_kinds().values()]
    click.echo(format_table(("TYPE", "WORKER", "FROM", "WHAT"), rows))
