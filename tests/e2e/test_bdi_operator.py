"""End to end: a BDI operator (an AgentSpeak plan library) walks to the goal of a MiniGrid
room made from its id, through the real ``mosaic`` command: as an agent of an experiment (a
worker process, and in process), in Script mode and in Manual mode; a bad plan library is
refused with its file and line before anything starts."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from mosaic.messages.codec import unpack
from tests.e2e.cli import REPO, mosaic_command, query, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

PLANS = REPO / "examples" / "bdi" / "gridworld.asl"


def test_the_example_experiment_reaches_the_goal_in_every_episode(
        tmp_path: Path, process_tag: str) -> None:
    store = tmp_path / "results.sqlite"
    result = run_mosaic("experiment-start", "examples/bdi_gridworld.yml", "--store", str(store),
                        "--quiet")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    [(status, episodes, steps)] = query(store, "SELECT status, episodes, steps FROM runs")
    assert (status, episodes) == ("finished", 10)
    returns = [r for (r,) in query(store, "SELECT total_return FROM episodes ORDER BY id")]
    assert len(returns) == 10 and all(r > 0.9 for r in returns), returns
    actions = {unpack(a) for (a,) in query(store, "SELECT action FROM steps")}
    assert len(actions) >= 2 and steps < 10 * 10  # turns and walks; never lost for long
    # Every action came from a plan: each episode reports no fallback and no plan failure.
    assert query(store, "SELECT name, COUNT(*), SUM(value) FROM metrics GROUP BY name") == [
        ("bdi.fallbacks", 10, 0.0), ("bdi.plan_failures", 10, 0.0)]


IN_PROCESS = """\
uid: bdi-in-process
seed: 3
{length}
placement: thread
environments:
  - uid: room
    env: gymnasium:minigrid:MiniGrid-Empty-Random-6x6-v0
    wrappers: [FilterObservation: {{filter_keys: [image, direction]}}]
agents:
  - uid: walker
    muscle:
      class: mosaic.operators:OperatorMuscle
      params:
        operator:
          class: mosaic.operators.bdi:BdiOperator
          params: {{plan_library: "{plans}"}}
"""


def run_in_process(folder: Path, plans: Path, store: Path,
                   length: str) -> subprocess.CompletedProcess[str]:
    """An experiment of one BDI walker in a MiniGrid room, its operator in the muscle's
    process, on the plan library ``plans``; ``length`` holds its episodes (and max_steps)."""
    path = write_experiment(folder, IN_PROCESS.format(length=length, plans=plans))
    return run_mosaic("experiment-start", str(path), "--store", str(store), "--quiet")


def test_in_process_the_steps_without_a_plan_are_counted_fallbacks(
        tmp_path: Path, process_tag: str) -> None:
    # Reactive plans (one +step event per observation) with no left turn: where none applies
    # (a wall ahead, the goal on the left) the fallback, the no-op, is action 0, MiniGrid's
    # left turn. The agent still gets there, and every left turn is a counted fallback.
    plans = tmp_path / "no_left.asl"
    plans.write_text(
        "+step(_) : goal(X, GY) & pos(X, Y) & GY < Y <- do(forward).\n"
        "+step(_) : goal(GX, Y) & pos(X, Y) & GX > X <- do(right).\n"
        "+step(_) : goal(_, GY) & pos(_, Y) & GY < Y & front(FX, FY) & not wall(FX, FY)\n"
        "    <- do(forward).\n"
        "+step(_) : not goal(_, _) & front(FX, FY) & not wall(FX, FY) <- do(forward).\n")
    store = tmp_path / "results.sqlite"
    result = run_in_process(tmp_path, plans, store, "episodes: 3")
    assert result.returncode == 0, result.stderr
    returns = [r for (r,) in query(store, "SELECT total_return FROM episodes")]
    assert len(returns) == 3 and all(r > 0.8 for r in returns), returns
    left_turns = sum(unpack(a) == 0 for (a,) in query(store, "SELECT action FROM steps"))
    [(fallbacks, episodes)] = query(
        store, "SELECT SUM(value), COUNT(*) FROM metrics WHERE name = 'bdi.fallbacks'")
    assert episodes == 3 and fallbacks == left_turns > 0


def test_script_mode_telemetry_shows_every_action_from_a_plan(
        tmp_path: Path, process_tag: str) -> None:
    telemetry = tmp_path / "t.jsonl"
    result = run_mosaic("evaluate", "examples/evaluate_bdi_gridworld.yml", "--telemetry",
                        str(telemetry), "--store", str(tmp_path / "r.sqlite"), "--quiet")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in telemetry.read_text().splitlines()]
    episodes = [r for r in records if r["kind"] == "episode" and r["operator"] == "bdi"]
    assert len(episodes) == 5
    assert all(r["terminated"] and r["total_reward"] > 0.9 for r in episodes), episodes
    steps = [r for r in records if r["kind"] == "step" and r["operator"] == "bdi"]
    assert {r["bdi"]["source"] for r in steps} == {"plan"}
    assert all(r["bdi"]["plan_failures"] == 0 for r in steps)
    assert not any("bdi" in r for r in records if r.get("operator") == "random")


def test_manual_mode_steps_the_bdi_operator_to_the_goal(
        tmp_path: Path, process_tag: str) -> None:
    telemetry = tmp_path / "m.jsonl"
    result = subprocess.run(
        [*mosaic_command(), "manual", "examples/evaluate_bdi_gridworld.yml", "--telemetry",
         str(telemetry)],
        input="n 10\nr 3\nn 10\nq\n", cwd=REPO, capture_output=True, text=True, timeout=90,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert result.returncode == 0, result.stderr
    assert "[bdi] BDI (gridworld.asl)  episode 0 (seed 0)  step 4  action 2" in result.stdout
    assert "episode over (terminated): return 0.928 in 8 steps" in result.stdout  # seed 3
    records = [json.loads(line) for line in telemetry.read_text().splitlines()]
    ended = [(r["seed"], r["terminated"]) for r in records
             if r["kind"] == "episode" and r["operator"] == "bdi"]
    assert ended == [(0, True), (3, True)]


def test_a_bad_plan_library_is_refused_at_its_key_with_file_and_line(
        tmp_path: Path, process_tag: str) -> None:
    plans = tmp_path / "broken.asl"
    plans.write_text("!go.\n+!go <- do(forward)\n+!stop <- do(done).\n")
    path = tmp_path / "evaluation.yml"
    path.write_text(f"""\
uid: broken
operators:
  - id: bdi
    type: bdi
    env: minigrid:MiniGrid-Empty-5x5-v0
    settings: {{plan_library: "{plans}"}}
seeds: [1]
""")
    result = run_mosaic("evaluate", str(path), "--telemetry", str(tmp_path / "t.jsonl"))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert (f"{path}:6: operators[0].settings.plan_library: plan library {plans}, line 3, "
            "column 2: expected term, got '!'") in result.stderr
    assert not (tmp_path / "t.jsonl").exists()  # refused before any worker started


def test_script_mode_fails_a_bdi_operator_with_too_many_fallbacks(
        tmp_path: Path, process_tag: str) -> None:
    # Its plans act at the first step only: the other four are fallbacks, more than half.
    plans = tmp_path / "once.asl"
    plans.write_text("+step(0) <- do(forward).\n")
    path = write_experiment(tmp_path, f"""\
        uid: bdi-fallbacks
        operators:
          - id: bdi
            type: bdi
            env: minigrid:MiniGrid-Empty-Random-5x5-v0
            settings: {{plan_library: "{plans}"}}
        seeds: [0]
        max_steps: 5
        max_fallback_fraction: 0.5
    """)
    telemetry = tmp_path / "t.jsonl"
    result = run_mosaic("evaluate", str(path), "--telemetry", str(telemetry), "--store",
                        str(tmp_path / "r.sqlite"))
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    records = [json.loads(line) for line in telemetry.read_text().splitlines()]
    sources = [r["bdi"]["source"] for r in records if r["kind"] == "step"]
    assert sources == ["plan"] + ["fallback"] * 4
    [failure] = [r for r in records if r["kind"] == "failure"]
    assert (failure["phase"], failure["cause"]) == ("fallbacks", "fallbacks")
    assert "4 of 5 actions (80%) came from the fallback, more than max_fallback_fraction " \
           "0.5; first error: no_action" in failure["message"]
    assert "bdi bdi: 4 of 5 actions were fallbacks (no_action: 4); first error: no_action" \
        in result.stdout


def test_an_agent_with_too_many_fallbacks_fails_its_run(tmp_path: Path, process_tag: str) -> None:
    # As an agent of an experiment too: plans that act at the first step only leave the rest
    # of each episode to the fallback, more than max_fallback_fraction (0.5 by default).
    plans = tmp_path / "once.asl"
    plans.write_text("+step(0) <- do(forward).\n")
    store = tmp_path / "results.sqlite"
    result = run_in_process(tmp_path, plans, store, "episodes: 2\nmax_steps: 5")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    [(status, error)] = query(store, "SELECT status, error FROM runs")
    assert status == "failed"
    assert "failed to act from its plans: 4 of 5 actions (80%) came from the fallback, more " \
           "than max_fallback_fraction 0.5; first error: no_action" in error, error
