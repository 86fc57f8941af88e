"""``mosaic dashboard``: the browser view of a store's runs, and Manual mode in the browser.

The command checks its options and files before anything is served; the dashboard itself is in
:mod:`mosaic.dashboard`, imported when the command runs (it needs the ``dashboard`` extra).
"""

from __future__ import annotations

import click

from mosaic.cli.console import exit_with_error
from mosaic.core.exit_codes import EXIT_BAD_INPUT

__all__ = ["dashboard"]


@click.command("dashboard")
@click.option("--store", metavar="PATH|URL", help="The results file, or a PostgreSQL URL.")
@click.option("--manual", "manual", metavar="FILE", multiple=True,
              type=click.Path(dir_okay=False),
              help="An evaluation file to step in Manual mode (repeat for several).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; beyond loopback it needs --token.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True)
@click.option("--token", envvar="MOSAIC_DASHBOARD_TOKEN", metavar="TOKEN",
              help="Require this secret (16+ characters) on every request and live channel "
                   "(or set MOSAIC_DASHBOARD_TOKEN).")
def dashboard(store: str | None, manual: tuple[str, ...], host: str, port: int,
              token: str | None) -> None:
    """Serve the dashboard: runs, learning curves, replay, live updates, Manual mode.

    Opens the store read-only. Prints the address to open once it answers, then serves until
    Ctrl-C.
    Exit code 2 for a bad store, file or option.
    """
    from pathlib import Path

    from mosaic.core.errors import MosaicError
    from mosaic.core.extras import require

    if store is None and not manual:
        raise click.UsageError("give --store PATH|URL and/or --manual FILE")
    try:
        require("starlette", "mosaic dashboard", "dashboard")
        require("uvicorn", "mosaic dashboard", "dashboard")
        from mosaic.dashboard import Dashboard, serve
        from mosaic.dashboard.security import check_bind
        from mosaic.operators.evaluation.schema import load_evaluation
        from mosaic.store import open_store

        check_bind(host, token)
        for file in manual:
            load_evaluation(file)
        opened = open_store(store) if store is not None else None
    except (MosaicError, ValueError) as error:
        exit_with_error(error, EXIT_BAD_INPUT)
    shown = f"[{host}]" if ":" in host else host
    link = f"http://{shown}:{port}/" + ("?token=<your token>" if token else "")

    def listening() -> None:  # said once the address answers, not before
        click.echo(f"mosaic dashboard: {link} (Ctrl-C to stop)", err=True)

    try:
        serve(Dashboard(opened, tuple(Path(f).resolve() for f in manual), token), host, port,
              listening)
    except OSError as error:
        exit_with_error(f"cannot serve on {host}:{port}: {error.strerror or error}",
                        EXIT_BAD_INPUT)
