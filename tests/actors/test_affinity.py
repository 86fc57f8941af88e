"""Opt-in pinning of the step loop (``cpu_affinity``): the choice of a CPU, the claims that
spread mosaic processes over the CPUs, pinning and unpinning a real process, and a whole run
with ``cpu_affinity: auto``. The default is ``none``: pinning does not survive sharing.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mosaic.core import affinity
from mosaic.experiment.schema import ExperimentFile
from tests.e2e.cli import cartpole, query, run_mosaic, write_experiment

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux affinity calls"),
]


@pytest.fixture
def claims_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private claims folder, so that mosaic processes running beside the tests do not count."""
    folder = tmp_path / "claims"
    monkeypatch.setattr(affinity, "_claims_folder", lambda: folder)
    yield folder


def allowed_cpus(pid: int) -> set[int]:
    return os.sched_getaffinity(pid)


def test_the_default_is_not_to_pin() -> None:
    assert ExperimentFile.model_fields["cpu_affinity"].default == "none"
    assert affinity.choose_cpu("none") is None


def test_a_cpu_that_is_not_available_is_not_used(caplog: pytest.LogCaptureFixture) -> None:
    missing = max(affinity.available_cpus()) + 1
    with caplog.at_level(logging.WARNING, logger="mosaic.core.affinity"):
        assert affinity.choose_cpu(missing) is None
    assert f"cpu_affinity {missing} is not available" in caplog.text


def test_a_named_cpu_is_used_as_given(claims_folder: Path) -> None:
    cpu = affinity.available_cpus()[-1]
    assert affinity.choose_cpu(cpu) == cpu
    assert not claims_folder.exists()  # a CPU chosen by hand is not claimed


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to spread over")
def test_auto_claims_a_cpu_and_the_next_choice_takes_another(claims_folder: Path) -> None:
    first = affinity.choose_cpu("auto")
    second = affinity.choose_cpu("auto")
    assert first is not None and second is not None and first != second
    names = sorted(entry.name for entry in claims_folder.iterdir())
    assert names == sorted(f"{cpu}-{os.getpid()}" for cpu in (first, second))


def test_claims_of_processes_that_are_gone_are_dropped(claims_folder: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    claims_folder.mkdir()
    (claims_folder / f"0-{dead.pid}").touch()
    (claims_folder / f"0-{os.getpid()}").touch()
    (claims_folder / "unrelated").touch()
    assert affinity._claims() == {0: 1}
    assert not (claims_folder / f"0-{dead.pid}").exists()


def test_a_process_pinned_to_one_cpu_is_unpinned_for_its_exit() -> None:
    cpu = affinity.available_cpus()[0]
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, threading, time
            from mosaic.core.affinity import pin_current_thread
            pin_current_thread({cpu})
            threading.Thread(target=time.sleep, args=(30,), daemon=True).start()  # inherits it
            print("pinned", flush=True)
            time.sleep(30)
        """)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "pinned\n"
        tasks = [int(task.name) for task in Path(f"/proc/{child.pid}/task").iterdir()]
        assert len(tasks) == 2
        assert all(allowed_cpus(task) == {cpu} for task in tasks)
        affinity.unpin_process(child.pid)
        assert all(allowed_cpus(task) == set(affinity.available_cpus()) for task in tasks)
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    affinity.unpin_process(child.pid)  # gone: nothing to do, nothing raised


def test_a_run_with_auto_pinning_finishes(tmp_path: Path) -> None:
    path = write_experiment(tmp_path, cartpole(placement="process", cpu_affinity="auto"))
    store = tmp_path / "results.sqlite"
    started = time.monotonic()
    result = run_mosaic("experiment-start", str(path), "--store", str(store), "--quiet")
    assert result.returncode == 0, result.stderr
    assert query(store, "SELECT status, episodes FROM runs") == [("finished", 3)]
    assert time.monotonic() - started < 50
