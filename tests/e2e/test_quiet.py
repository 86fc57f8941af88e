"""Quiet output: with ``-q`` a command that went well says nothing, and one that did not says
what went wrong; an export piped into ``head`` ends without an error."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e.cli import REPO, cartpole, mosaic_command, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


def test_quiet_says_nothing_when_every_run_finished(tmp_path: Path) -> None:
    path = write_experiment(tmp_path, cartpole(uid="quiet", runs=2, episodes=2))
    done = run_mosaic("experiment-start", str(path), "--store", str(tmp_path / "q.sqlite"), "-q")
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("", "")


def test_quiet_names_the_run_that_failed_and_why(tmp_path: Path) -> None:
    path = write_experiment(tmp_path, cartpole(uid="loud", episodes=5,
                                               env="tests.fixtures.envs:RaisingCartPole",
                                               params="{fail_at: 10}"))
    done = run_mosaic("experiment-start", str(path), "--store", str(tmp_path / "q.sqlite"), "-q")
    assert done.returncode == 1
    assert done.stdout == ""
    assert "failed" in done.stderr and "broken at step 10" in done.stderr, done.stderr
    assert "mosaic: experiment 'loud'" not in done.stderr  # no header


def test_an_export_whose_reader_leaves_ends_without_an_error(tmp_path: Path) -> None:
    path = write_experiment(tmp_path, cartpole(uid="piped", episodes=30))
    store = tmp_path / "p.sqlite"
    assert run_mosaic("experiment-start", str(path), "--store", str(store), "-q").returncode == 0
    command = " ".join([*mosaic_command(), "runs", "export", "--store", str(store),
                        "--experiment", "piped", "--what", "steps"])
    piped = subprocess.run(["bash", "-c", f"set -o pipefail; {command} | head -1"],
                           capture_output=True, text=True, timeout=60, cwd=REPO)
    assert piped.stdout.startswith("run,run_id,environment,episode")
    assert piped.stderr == ""  # no "Broken pipe", no traceback
