"""The zygote of ``mosaic experiment-start``: the interpreter its component processes fork from.

It starts before the experiment file is even validated, as soon as the file's text names a
``process`` placement, and imports what component processes import while this process
validates the file, opens the store and starts the runs; each component process then starts as
a fork of it, without imports of its own (see :mod:`mosaic.runtime.processes.zygote_client`).
Once the file is validated, it is ended if no run places a component in a process here after
all: runs on a Ray cluster start their processes on their node. ``MOSAIC_ZYGOTE=0`` in the
environment starts none: each component process is then a fresh interpreter.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from mosaic.actors.kinds import PLACEABLE
from mosaic.runtime.processes.zygote_client import close_zygote, start_zygote

if TYPE_CHECKING:
    from mosaic.experiment import Experiment

#: The environment variable that, set to ``0``, keeps the command from starting a zygote.
ZYGOTE_VARIABLE = "MOSAIC_ZYGOTE"
#: What a component process imports: its entry point and every placeable component's module.
PRELOAD = ("mosaic.runtime.process_main",
           *sorted({path.partition(":")[0] for path in PLACEABLE.values()}))


def start_command_zygote(file: str, ray: str | None) -> None:
    """Start the zygote if the experiment ``file`` may place a component in a process (its
    text names ``process``), the runs are not sent to a Ray cluster (``ray``) and
    :data:`ZYGOTE_VARIABLE` is not ``0``.

    It ends with the command (when click closes its context, whatever the exit). A file that
    cannot be read starts none: its validation says why.
    """
    if ray is not None or os.environ.get(ZYGOTE_VARIABLE) == "0":
        return
    try:
        text = Path(file).read_text(errors="replace")
    except OSError:
        return
    if "process" in text and start_zygote(PRELOAD) is not None:
        click.get_current_context().call_on_close(close_zygote)


def keep_command_zygote(experiment: Experiment) -> None:
    """End the zygote unless some run of the validated ``experiment`` places a component in a
    process on this machine."""
    if experiment.executor.ray is not None or "process" not in experiment.placements():
        close_zygote()
