"""Script mode records an evaluation in the results store, as experiment runs are recorded."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

from mosaic.operators.evaluation.script import ScriptResult, run_script
from mosaic.store import StoreWriter, open_store
from tests.e2e.cli import assert_store_consistent, query
from tests.operators.test_script_mode import evaluation, flaky, records

pytestmark = pytest.mark.timeout(60)

SETUP = [("created", "setting_up"), ("setting_up", "running")]


def run(tmp_path: Path, **overrides: Any) -> tuple[Path, ScriptResult | None]:
    """Run the evaluation with ``overrides`` into ``tmp_path/store.sqlite``; the writer is closed
    (everything committed) on return, also when the run raised (the result is then None)."""
    progress = overrides.pop("progress", None)
    _, config = evaluation(tmp_path, **overrides)
    store = tmp_path / "store.sqlite"
    result = None
    with StoreWriter(store) as writer, contextlib.suppress(KeyboardInterrupt, RuntimeError):
        result = run_script(config, telemetry_path=tmp_path / "t.jsonl", progress=progress,
                            store=writer)
    return store, result


def states(store: Path, run_uid: str) -> list[tuple[str, str]]:
    return [(a, b) for a, b in query(
        store, "SELECT t.from_state, t.to_state FROM transitions t JOIN runs r "
        "ON r.id = t.run_id WHERE r.uid = ? ORDER BY t.seq", run_uid)]


def test_each_operator_is_a_run_with_its_transitions_episodes_and_steps(tmp_path: Path) -> None:
    store, result = run(tmp_path)
    assert result is not None and result.ok and result.run_id is not None

    [(uid, file, config)] = query(store, "SELECT uid, file, config FROM experiments")
    assert (uid, file) == ("test-eval", str((tmp_path / "evaluation.yml").resolve()))
    assert '"seeds": [3, 4]' in config and '"max_steps": 12' in config
    runs = query(store, "SELECT uid, run_index, status, error, episodes FROM runs ORDER BY id")
    assert runs == [(f"{result.run_id}-random", 0, "finished", None, 3),
                    (f"{result.run_id}-passive", 1, "finished", None, 3)]
    assert_store_consistent(store)
    for operator in ("random", "passive"):
        run_uid = f"{result.run_id}-{operator}"
        assert states(store, run_uid) == [*SETUP, ("running", "stopping"),
                                          ("stopping", "finished")]
        episodes = query(store, "SELECT e.episode, e.seed, e.steps, e.total_return, e.environment "
                         "FROM episodes e JOIN runs r ON r.id = e.run_id WHERE r.uid = ? "
                         "ORDER BY e.episode", run_uid)
        played = result.operators[operator].episodes
        assert episodes == [(e.episode_index, e.seed, e.length, e.total_reward, "CartPole-v1")
                            for e in played]

    # The step rows are the telemetry's steps: action, reward, termination, in order.
    telemetry = [r for r in records(tmp_path / "t.jsonl")
                 if r["kind"] == "step" and r["operator"] == "random"]
    with open_store(store) as opened:
        stored = list(opened.steps(f"{result.run_id}-random"))
        detail = opened.show_run(f"{result.run_id}-passive")
    assert [(s.episode, s.step, s.action, s.reward, s.terminated, s.truncated, s.agent)
            for s in stored] == [
        (r["episode"], r["step_index"], r["action"], r["reward"], r["terminated"],
         r["truncated"], "random") for r in telemetry]
    assert detail.status == "finished" and detail.episode_stats.count == 3


def test_a_failing_operator_is_failed_with_its_error(tmp_path: Path) -> None:
    missing = flaky("crash")
    missing["id"], missing["command"] = "absent", [str(tmp_path / "no-such-program")]
    store, result = run(tmp_path, operators=[
        {"id": "random", "type": "random", "env": "CartPole-v1"}, flaky("crash"), missing],
        timeouts={"step": 5, "reset": 30, "stop": 2})
    assert result is not None and not result.ok

    crashed, absent = result.operators["flaky"].failure, result.operators["absent"].failure
    assert crashed is not None and absent is not None
    runs = query(store, "SELECT uid, status, error, episodes, steps FROM runs ORDER BY id")
    assert [row[:4] for row in runs] == [
        (f"{result.run_id}-random", "finished", None, 3),
        (f"{result.run_id}-flaky", "failed", crashed.message, 1),
        (f"{result.run_id}-absent", "failed", absent.message, 0)]
    assert runs[1][4] == 7  # the 5 steps of episode 0 and 2 of episode 1
    assert "exit code 3" in crashed.message
    assert_store_consistent(store)
    assert states(store, f"{result.run_id}-flaky") == [*SETUP, ("running", "stopping"),
                                                       ("stopping", "failed")]
    assert states(store, f"{result.run_id}-absent") == [
        ("created", "setting_up"), ("setting_up", "stopping"), ("stopping", "failed")]


def test_ctrl_c_cancels_the_runs_with_every_episode_played(tmp_path: Path) -> None:
    seen: list[str] = []

    def interrupt_at_the_second_episode(record: Any) -> None:
        seen.append(record["operator"])
        if len(seen) == 2:
            raise KeyboardInterrupt

    store, result = run(tmp_path, episodes=20, progress=interrupt_at_the_second_episode)
    assert result is None
    runs = query(store, "SELECT uid, status, error FROM runs ORDER BY id")
    assert [(status, error) for _, status, error in runs] == [("cancelled", None)] * 2
    assert_store_consistent(store)
    [(episodes,)] = query(store, "SELECT COUNT(*) FROM episodes")
    assert episodes >= 2  # both episodes the progress callback saw, and any after in that round
    for (uid, _, _) in runs:
        assert states(store, uid)[-2:] == [("running", "stopping"), ("stopping", "cancelled")]
    # the autouse fixture checks that both workers were stopped and reaped


def test_an_unexpected_error_fails_the_runs_with_it(tmp_path: Path) -> None:
    def broken(record: Any) -> None:
        raise RuntimeError("progress display broke")

    store, result = run(tmp_path, progress=broken)
    assert result is None
    errors = query(store, "SELECT status, error FROM runs")
    assert errors == [("failed", "the evaluation stopped: RuntimeError: progress display broke")
                      ] * 2
    assert_store_consistent(store)
