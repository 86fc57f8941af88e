"""``mosaic evaluate`` records its runs in the results store, and ``mosaic runs`` reads them."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.cli import (
    assert_store_consistent,
    finish,
    query,
    run_mosaic,
    signal_and_time,
    start_mosaic,
    wait_for_steps,
)
from tests.operators.test_script_mode import evaluation, flaky

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

RANDOM = {"id": "random", "type": "random", "env": "CartPole-v1"}


def write_evaluation(folder: Path, **overrides: Any) -> Path:
    """``evaluation.yml`` in ``folder``: a random and a passive operator, 3 episodes of at most
    12 steps, telemetry to ``t.jsonl``; ``overrides`` replace top-level keys."""
    path, _ = evaluation(folder, uid="store-eval", telemetry=str(folder / "t.jsonl"), **overrides)
    return path


def test_runs_list_and_show_read_an_evaluation(tmp_path: Path, process_tag: str) -> None:
    path = write_evaluation(tmp_path)
    result = run_mosaic("evaluate", str(path))
    assert result.returncode == 0, result.stderr

    store = tmp_path / "evaluation.sqlite"  # the default: next to the file
    assert f"Results: {store}" in result.stdout
    runs = query(store, "SELECT uid, status, episodes FROM runs ORDER BY id")
    assert [(status, episodes) for _, status, episodes in runs] == [("finished", 3)] * 2
    uids = [uid for uid, _, _ in runs]
    assert uids[0].startswith("store-eval-") and uids[0].endswith("-random")
    assert uids[1] == uids[0].removesuffix("random") + "passive"
    assert_store_consistent(store)

    listing = run_mosaic("runs", "list", "--store", str(store))
    assert listing.returncode == 0, listing.stderr
    for uid in uids:
        [line] = [line for line in listing.stdout.splitlines() if line.startswith(uid)]
        assert " store-eval " in line and " finished " in line
    # The command the summary suggests works as printed.
    [show] = [line.split() for line in result.stdout.splitlines()
              if line.strip().startswith("mosaic runs show")]
    shown = run_mosaic(*show[1:])
    assert shown.returncode == 0, shown.stderr
    assert f"run          {uids[0]} " in shown.stdout and f"({path.resolve()})" in shown.stdout
    for state in ("setting_up", "running", "stopping", "finished"):
        assert f" {state}" in shown.stdout
    assert "episodes     3 (3 recorded)" in shown.stdout
    assert shown.stdout.count("CartPole-v1") == 3


def test_a_failing_operator_is_failed_with_its_error(tmp_path: Path, process_tag: str) -> None:
    path = write_evaluation(tmp_path, operators=[RANDOM, flaky("crash")])
    store = tmp_path / "chosen" / "results.sqlite"
    result = run_mosaic("evaluate", str(path), "--quiet", "--store", str(store))
    assert result.returncode == 1, result.stderr
    assert not (tmp_path / "evaluation.sqlite").exists()

    [(uid, status, error)] = query(store, "SELECT uid, status, error FROM runs WHERE uid LIKE ?",
                                   "%-flaky")
    assert status == "failed"
    assert error.startswith("operator 'flaky' (Flaky) failed during step 2 of episode 1")
    assert "exit code 3" in error
    assert query(store, "SELECT status FROM runs WHERE uid LIKE '%-random'") == [("finished",)]
    assert_store_consistent(store)
    shown = run_mosaic("runs", "show", uid, "--store", str(store))
    assert shown.returncode == 0, shown.stderr
    assert "status       failed" in shown.stdout and f"error        {error}" in shown.stdout


def steps_per_run(store: Path) -> dict[int, int]:
    """The steps recorded of each run of ``store`` that has one."""
    return dict(query(store, "SELECT run_id, COUNT(*) FROM steps GROUP BY run_id"))


def test_sigint_cancels_the_runs_and_keeps_what_was_played(tmp_path: Path,
                                                           process_tag: str) -> None:
    path = write_evaluation(tmp_path, episodes=500, max_steps=0, step_pacing=0.01)
    store = tmp_path / "evaluation.sqlite"
    proc = start_mosaic("evaluate", str(path), "--quiet")
    try:
        wait_for_steps(store, proc, minimum=30)
        # The lanes need not keep pace (on a busy machine one worker is scheduled less):
        # each must have played some of what the store is checked for below.
        deadline = time.monotonic() + 30
        while len(counts := steps_per_run(store)) < 2 or min(counts.values()) < 15:
            assert proc.poll() is None and time.monotonic() < deadline, counts
            time.sleep(0.05)
        took = signal_and_time(proc, signal.SIGINT)
        assert proc.returncode == 130, finish(proc)
    finally:
        stderr = finish(proc)
    assert took < 10
    assert f"interrupted: every worker was stopped; what was played is in {store}" in stderr
    runs = query(store, "SELECT status, error, steps FROM runs")
    assert [(status, error) for status, error, _ in runs] == [("cancelled", None)] * 2
    assert all(steps >= 15 for _, _, steps in runs)
    assert_store_consistent(store)
    states = [s for (s,) in query(store, "SELECT to_state FROM transitions WHERE run_id = 1 "
                                  "ORDER BY seq")]
    assert states == ["setting_up", "running", "stopping", "cancelled"]
    # the process_tag fixture checks that no worker outlived the command


@pytest.mark.parametrize("store", ["notes.txt", "notes.txt/results.sqlite", "default"])
def test_a_store_that_cannot_be_a_sqlite_file_is_refused(tmp_path: Path, store: str) -> None:
    (tmp_path / "notes.txt").write_text("not a database\n")
    path = write_evaluation(tmp_path, operators=[RANDOM])
    if store == "default":
        (tmp_path / "evaluation.sqlite").write_text("not a database either\n")
        result = run_mosaic("evaluate", str(path), timeout=30)
        target = tmp_path / "evaluation.sqlite"
    else:
        target = tmp_path / store
        result = run_mosaic("evaluate", str(path), "--store", str(target), timeout=30)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"error: {path}: --store: the results store {target} ")
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert (tmp_path / "notes.txt").read_text() == "not a database\n"
    assert not (tmp_path / "t.jsonl").exists()  # nothing started
