"""Script mode's record of a step without its episode_end, and where telemetry goes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mosaic.operators.evaluation.schema import load_evaluation
from mosaic.operators.evaluation.script import resolve_telemetry_path, run_script
from tests.e2e.cli import REPO
from tests.operators.test_script_mode import evaluation, flaky, records

pytestmark = pytest.mark.timeout(60)


def test_a_step_that_ends_the_episode_without_episode_end_is_recorded_and_named(
    tmp_path: Path,
) -> None:
    _, config = evaluation(tmp_path, operators=[flaky("no-end")],
                           timeouts={"step": 1, "reset": 30, "stop": 2})
    result = run_script(config, telemetry_path=tmp_path / "t.jsonl")

    failure = result.operators["flaky"].failure
    assert failure is not None
    assert (failure.cause, failure.phase, failure.step_index) == ("protocol", "episode_end", 4)
    assert "failed after step 4 of episode 0" in failure.message
    assert "ended the episode (terminated) but no episode_end within 1.00 s" in failure.message
    assert "no reply within" not in failure.message
    lines = records(tmp_path / "t.jsonl")
    steps = [r for r in lines if r["kind"] == "step"]
    # The step that ended the episode was taken, and is in the telemetry.
    assert [r["step_index"] for r in steps] == [0, 1, 2, 3, 4]
    assert steps[-1]["terminated"] is True
    [failed] = [r for r in lines if r["kind"] == "failure"]
    assert failed["step_index"] == 4 and "no episode_end" in failed["message"]


def test_telemetry_paths_are_relative_to_the_evaluation_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = tmp_path / "evaluations"
    folder.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    _, config = evaluation(folder, telemetry="runs/out.jsonl")
    assert resolve_telemetry_path(config) == folder / "runs" / "out.jsonl"
    _, default = evaluation(folder)  # no telemetry key: mosaic-telemetry/ beside the file
    assert resolve_telemetry_path(default, now=0).parent == folder / "mosaic-telemetry"
    # A path on the command line is the user's own, relative to where they are.
    assert resolve_telemetry_path(config, "mine.jsonl") == Path("mine.jsonl")
    absolute = tmp_path / "abs.jsonl"
    _, pinned = evaluation(folder, telemetry=str(absolute))
    assert resolve_telemetry_path(pinned) == absolute

    path, _ = evaluation(folder, telemetry="runs/out.jsonl")  # the helper rewrote the file
    done = subprocess.run([sys.executable, "-m", "mosaic", "evaluate", str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(records(folder / "runs" / "out.jsonl")) > 2
    assert load_evaluation(path).telemetry == "runs/out.jsonl"
    assert not (REPO / "runs" / "out.jsonl").exists()
