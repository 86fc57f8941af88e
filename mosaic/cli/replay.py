"""``mosaic runs replay``: a stored episode re-simulated into a GIF or an MP4 file, as the
dashboard's *Export GIF* and *Export MP4* make it (:mod:`mosaic.dashboard.export`)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from mosaic.cli.console import exit_with_error
from mosaic.core.exit_codes import EXIT_BAD_INPUT

__all__ = ["replay"]

_FORMATS = {".gif": "gif", ".mp4": "mp4"}


@click.command("replay")
@click.argument("run")
@click.argument("episode", type=click.IntRange(min=0))
@click.option("--out", required=True, metavar="FILE.gif|FILE.mp4",
              help="The file to write; its suffix chooses the format.")
@click.option("--environment", metavar="UID",
              help="The run's environment (default: its only Gymnasium one).")
@click.option("--store", required=True, metavar="PATH|URL",
              help="The results file, or a PostgreSQL URL.")
def replay(run: str, episode: int, out: str, environment: str | None, store: str) -> None:
    """Re-simulate training EPISODE of RUN (uid, unique prefix or id) from its stored seed and
    actions, and write its frames to --out as an animated GIF or an MP4 video.

    Needs the video extra (pip install 'mosaic[video]'). Warns when the re-simulation is not
    the stored episode. Exit 2, with one line, when the episode cannot be replayed or the
    file cannot be written.
    """
    from mosaic.core.errors import MosaicError
    from mosaic.dashboard.export import export_episode
    from mosaic.dashboard.replay import replayable
    from mosaic.store import open_store

    # Frames are drawn off screen: without a display, SDL (pygame, which draws Gymnasium's
    # classic control) would print an error about one that nothing here needs.
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

    fmt = _FORMATS.get(Path(out).suffix.lower())
    if fmt is None:
        raise click.UsageError(f"--out must end in .gif or .mp4, not {Path(out).name!r}")
    try:
        with open_store(store) as opened:
            (run_id, uid), = opened.select_runs(run).items()
            if environment is None:
                choices = replayable(opened, run_id)
                if len(choices) != 1:
                    raise click.UsageError(
                        f"run {uid} has {len(choices)} replayable environments "
                        f"({', '.join(choices) or 'none'}): give --environment")
                environment = choices[0]
            exported = export_episode(opened, run_id, environment, episode, fmt)
        Path(out).write_bytes(exported.data)
    except MosaicError as error:
        exit_with_error(error, EXIT_BAD_INPUT)
    except OSError as error:
        exit_with_error(f"cannot write {out}: {error.strerror or error}", EXIT_BAD_INPUT)
    shown = exported.replay
    if not shown.same:
        click.echo(f"warning: the re-simulation differs from the stored episode from step "
                   f"{shown.mismatch_at} on (see the dashboard's replay)", err=True)
    click.echo(f"{out}: {environment} episode {episode} of run {uid}, "
               f"{len(shown.actions)} steps, {len(shown.frames)} frames", err=True)
