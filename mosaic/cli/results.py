"""``mosaic runs plot`` and ``mosaic runs export``: a store's results as a PNG or a table file.

Both take runs as ``runs show`` does (uid, unique prefix or id) and/or ``--experiment``, an
experiment uid or file (whose uid is taken, and whose store is the default). Every error (an
unknown run or metric, nothing to show, a file that cannot be written, a missing optional
package) ends the command with exit code 2 and one line on stderr.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from mosaic.cli.console import exit_with_error
from mosaic.core.exit_codes import EXIT_BAD_INPUT

__all__ = ["export", "plot"]

F = TypeVar("F", bound=Callable[..., Any])


def _selection(command: F) -> F:
    """The options every results command shares: the runs, the experiment and the store."""
    command = click.argument("run", nargs=-1)(command)
    command = click.option(
        "--experiment", metavar="UID|FILE",
        help="All runs of this experiment (its uid, or its file: then its store is the default).",
    )(command)
    return click.option("--store", metavar="PATH|URL",
                        help="The results file, or a PostgreSQL URL.")(command)


def _locate(store: str | None, experiment: str | None) -> tuple[str, str | None]:
    """The store (a path or a URL) and the experiment uid to select, from the options as
    given."""
    if experiment is not None and Path(experiment).is_file():
        from mosaic.core.errors import ConfigError
        from mosaic.experiment import load_experiment

        try:
            loaded = load_experiment(experiment, store_override=store)
        except ConfigError as error:
            exit_with_error(error, EXIT_BAD_INPUT)
        return str(loaded.store_target), loaded.uid
    if store is None:
        raise click.UsageError("give --store PATH (or --experiment FILE)")
    return store, experiment


def _failures_exit_2(command: F) -> F:
    """Turn the errors a reader of results can cause into one line and exit code 2."""

    @wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        from mosaic.core.errors import MosaicError

        try:
            return command(*args, **kwargs)
        except MosaicError as error:
            exit_with_error(error, EXIT_BAD_INPUT)
        except BrokenPipeError:
            raise  # the reader of stdout left (| head): click ends the command quietly
        except OSError as error:
            where = f" {error.filename}" if error.filename else ""
            exit_with_error(f"cannot write{where}: {error.strerror or error}", EXIT_BAD_INPUT)

    return run  # type: ignore[return-value]


@click.command("plot")
@_selection
@click.option("--metric", metavar="NAME",
              help="Plot this metric (from the store's metrics) instead of episode returns.")
@click.option("--x", "x_axis", type=click.Choice(["episodes", "steps"]), default="episodes",
              show_default=True, help="Against episodes (in the order they ended) or env steps.")
@click.option("--smooth", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="Moving average: each point becomes the mean of itself and the N-1 before it.")
@click.option("--band", type=click.Choice(["range", "std", "none"]), default="range",
              show_default=True,
              help="Around a mean of seeds: min to max over them, or ±1 standard deviation.")
@click.option("--out", metavar="FILE.png",
              help="Where to write the PNG (default: <store>-<returns|metric>.png beside it).")
@_failures_exit_2
def plot(run: tuple[str, ...], experiment: str | None, store: str | None, metric: str | None,
         x_axis: str, smooth: int, band: str, out: str | None) -> None:
    """Plot returns (or --metric) of RUN... and/or --experiment's runs as a PNG.

    Runs whose experiments differ only by seed (the runs of one experiment file, phase by
    phase) are drawn as their mean, with a band; the legend names each group and its band.
    Prints the path of the PNG.
    """
    from mosaic.results import build_figure, load_curves, save_figure
    from mosaic.store import open_store

    path, uid = _locate(store, experiment)
    with open_store(path) as opened:
        curves = load_curves(opened, run, experiment=uid, metric=metric, x=x_axis,  # type: ignore[arg-type]
                             smooth=smooth, band=band)
    figure = build_figure(curves)
    target = Path(out) if out else _default_png(path, metric or "returns")
    click.echo(str(save_figure(figure, target)))


@click.command("export")
@_selection
@click.option("--what", type=click.Choice(["runs", "episodes", "steps", "metrics"]),
              default="episodes", show_default=True, help="Which table.")
@click.option("--format", "fmt", type=click.Choice(["csv", "jsonl", "parquet"]),
              help="The file format (default: from --out's suffix, else csv).")
@click.option("--out", metavar="FILE", help="Write here (default: stdout; not for parquet).")
@_failures_exit_2
def export(run: tuple[str, ...], experiment: str | None, store: str | None, what: str,
           fmt: str | None, out: str | None) -> None:
    """Export a table of RUN... and/or --experiment's runs as CSV, JSON lines or Parquet.

    Every table starts with the run's uid and id. Steps have their observations and actions
    decoded: a scalar is one column; an array of numbers with the same shape in every row and
    at most 16 elements is one column per element (observation_0, observation_1, ...,
    row-major); anything larger or irregular is one column of JSON text. Parquet needs
    pyarrow (pip install 'mosaic[results]').
    """
    from mosaic.results import format_for, load_table, write_table
    from mosaic.store import open_store

    try:
        chosen = format_for(out, fmt)
    except ValueError as error:
        raise click.UsageError(str(error)) from error
    path, uid = _locate(store, experiment)
    with open_store(path) as opened:
        table = load_table(opened, what, run, experiment=uid)
    write_table(table, chosen, out)
    if out:
        click.echo(f"{len(table)} {what} rows written to {out}", err=True)


def _default_png(store: str, what: str) -> Path:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", what)
    if "://" in store:  # a database URL: no folder to put it beside
        return Path.cwd() / f"mosaic-{name}.png"
    where = Path(store)
    return where.with_name(f"{where.stem}-{name}.png")
