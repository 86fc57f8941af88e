"""``mosaic experiment-start`` forks its component processes from its zygote, or spawns them."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.e2e.cli import (
    cartpole,
    finish,
    signal_and_time,
    start_mosaic,
    wait_for_steps,
    write_experiment,
)
from tests.processes import children_of, component_children

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

LONG_RUN = cartpole(episodes=100_000, placement="process")
ZYGOTE = b"mosaic.runtime.processes.zygote"


def zygotes(parent: int) -> list[int]:
    """The live children of ``parent`` that run a zygote."""
    found = []
    for pid, state in children_of(parent).items():
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if state != "Z" and ZYGOTE in argv:
            found.append(pid)
    return found


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def cmdline_room(pid: int) -> int:
    """The bytes of ``pid``'s argv area: a fork keeps its zygote's, whatever it shows there."""
    return len(Path(f"/proc/{pid}/cmdline").read_bytes())


@pytest.mark.parametrize("zygote", ["1", "0"])
def test_component_processes_are_forks_of_the_zygote_unless_it_is_turned_off(
        tmp_path: Path, process_tag: str, zygote: str) -> None:
    """Either way the components are children of the command that run process_main; with the
    zygote they are its forks (its argv area), without it fresh interpreters."""
    path = write_experiment(tmp_path, LONG_RUN)
    store = tmp_path / "results.sqlite"
    proc = start_mosaic("experiment-start", str(path), "--store", str(store),
                        MOSAIC_ZYGOTE=zygote)
    try:
        wait_for_steps(store, proc, minimum=50)
        components = component_children(proc.pid)
        found = zygotes(proc.pid)
        parents = {parent_of(pid) for pid in components}
        rooms = {cmdline_room(pid) for pid in components + found}
        signal_and_time(proc, signal.SIGINT)
    finally:
        stderr = finish(proc)
    assert len(components) == 2, components  # environment and muscle
    assert parents == {proc.pid}
    if zygote == "1":
        assert len(found) == 1 and len(rooms) == 1  # the forks' argv area is the zygote's
    else:
        assert found == [] and len(rooms) == 2
    assert proc.returncode == 130, stderr
