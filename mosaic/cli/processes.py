"""The zygote of ``mosaic experiment-start``: the interpreter its component processes fork from.

Started as soon as the experiment file is read, it imports what component processes import
while this process opens the store and starts the runs; each component process then starts as
a fork of it, without imports of its own (see
:mod:`mosaic.runtime.processes.zygote_client`). Runs on a Ray cluster start their processes on
their node, and runs without a process placement start none: neither gets one.
"""

from __future__ import annotations

import click

from mosaic.actors.kinds import PLACEABLE
from mosaic.experiment import Experiment
from mosaic.runtime.processes.zygote_client import close_zygote, start_zygote

#: What a component process imports: its entry point and every placeable component's module.
PRELOAD = ("mosaic.runtime.process_main",
           *sorted({path.partition(":")[0] for path in PLACEABLE.values()}))


def start_command_zygote(experiment: Experiment, ray: str | None) -> None:
    """Start the zygote if this command's runs place components in processes here; it ends
    with the command (when click closes its context, whatever the exit)."""
    if ray is not None or experiment.executor.ray is not None:
        return
    if "process" not in experiment.placements():
        return
    if start_zygote(PRELOAD) is not None:
        click.get_current_context().call_on_close(close_zygote)
