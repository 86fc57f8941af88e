"""Script mode end to end with real workers, and the evaluation file's validation."""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from mosaic.core.errors import ConfigError
from mosaic.operators.api import config as operator_config
from mosaic.operators.evaluation.schema import (
    OPERATOR_TYPES,
    EvaluationConfig,
    load_evaluation,
    parse_evaluation,
)
from mosaic.operators.evaluation.script import (
    ScriptResult,
    format_comparison_table,
    resolve_telemetry_path,
    run_script,
    run_script_file,
)
from tests.processes import children_of

pytestmark = pytest.mark.timeout(60)

FLAKY = Path(__file__).parent / "script_fixtures" / "flaky_worker.py"


# -- helpers -----------------------------------------------------------------------------------


def evaluation(tmp_path: Path, **overrides: Any) -> tuple[Path, EvaluationConfig]:
    data: dict[str, Any] = {
        "uid": "test-eval",
        "operators": [
            {"id": "random", "type": "random", "display_name": "Random", "env": "CartPole-v1"},
            {"id": "passive", "type": "passive", "env": "CartPole-v1"},
        ],
        "seeds": [3, 4],
        "episodes": 3,
        "max_steps": 12,
        "timeouts": {"step": 20, "reset": 30, "stop": 3},
    }
    data.update(overrides)
    path = tmp_path / "evaluation.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path, load_evaluation(path)


def flaky(mode: str, die_after: int = 7) -> dict[str, Any]:
    return {
        "id": "flaky",
        "type": "command",
        "display_name": "Flaky",
        "env": "CartPole-v1",
        "command": [sys.executable, str(FLAKY), "--mode", mode, "--die-after", str(die_after)],
    }


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def reproducible_part(path: Path) -> list[dict[str, Any]]:
    return [r for r in records(path) if r["kind"] != "run_end"]


# -- end to end ----------------------------------------------------------------------------------


def test_two_operators_give_identical_telemetry_on_two_runs(tmp_path: Path) -> None:
    _, config = evaluation(tmp_path)
    first = run_script(config, telemetry_path=tmp_path / "first.jsonl")
    second = run_script(config, telemetry_path=tmp_path / "second.jsonl")

    assert first.ok and second.ok
    first_lines = reproducible_part(tmp_path / "first.jsonl")
    assert first_lines == reproducible_part(tmp_path / "second.jsonl")

    lines = records(tmp_path / "first.jsonl")
    assert lines[0]["kind"] == "run" and lines[-1]["kind"] == "run_end"
    episodes = [r for r in lines if r["kind"] == "episode"]
    assert [(r["operator"], r["episode"]) for r in episodes if r["operator"] == "random"] == [
        ("random", 0), ("random", 1), ("random", 2)]
    seeds = config.episode_seeds()
    assert seeds[:2] == [3, 4] and len(set(seeds)) == 3  # the third seed is derived
    for record in episodes:  # every operator plays the same seed in the same episode
        assert record["seed"] == seeds[record["episode"]]
        assert record["length"] <= 12
    # the barrier: no step of episode k+1 before every operator finished episode k
    finished: dict[int, set[str]] = {}
    for record in lines:
        if record["kind"] == "episode":
            finished.setdefault(record["episode"], set()).add(record["operator"])
        if record["kind"] == "step" and record["episode"] > 0:
            assert finished.get(record["episode"] - 1) == {"random", "passive"}
    # step indices are 0-based and contiguous within each episode
    for operator in ("random", "passive"):
        for episode in range(3):
            indices = [r["step_index"] for r in lines if r["kind"] == "step"
                       and r["operator"] == operator and r["episode"] == episode]
            assert indices == list(range(len(indices)))
    passive = first.operators["passive"]
    assert {r["action"] for r in lines if r["kind"] == "step" and r["operator"] == "passive"} == {0}
    assert passive.episodes_done == 3 and passive.failure is None


@pytest.mark.parametrize(
    ("mode", "cause", "expected"),
    [
        ("crash", "crashed", "exit code 3"),
        ("hang", "timeout", "no reply within 1 s"),
        ("garbage", "protocol", "malformed reply"),
    ],
)
def test_a_misbehaving_worker_fails_only_its_operator(
    tmp_path: Path, mode: str, cause: str, expected: str
) -> None:
    _, config = evaluation(
        tmp_path,
        operators=[{"id": "random", "type": "random", "env": "CartPole-v1"}, flaky(mode)],
        timeouts={"step": 1, "reset": 30, "stop": 2},
    )
    seen: list[str] = []
    result = run_script(config, telemetry_path=tmp_path / "t.jsonl",
                        progress=lambda record: seen.append(record["kind"]))

    assert not result.ok
    assert result.operators["random"].episodes_done == 3
    assert result.operators["random"].failure is None
    broken = result.operators["flaky"]
    assert broken.episodes_done == 1  # episode 0 took 5 steps; it fails at step 2 of episode 1
    failure = broken.failure
    assert failure is not None
    assert (failure.cause, failure.phase, failure.episode_index, failure.step_index) == (
        cause, "step", 1, 2)
    assert "'flaky'" in failure.message and expected in failure.message
    if mode == "crash":
        assert failure.exit_code == 3
        assert "giving up on purpose" in failure.message
    failures = [r for r in records(tmp_path / "t.jsonl") if r["kind"] == "failure"]
    assert [(r["operator"], r["cause"], r["episode"]) for r in failures] == [("flaky", cause, 1)]
    assert seen.count("failure") == 1 and seen.count("episode") == 4
    table = format_comparison_table(result)
    assert "flaky" in table and "1/3" in table and "3/3" in table and failure.message in table


def test_a_worker_that_cannot_start_fails_at_launch(tmp_path: Path) -> None:
    missing = flaky("crash")
    missing["command"] = [str(tmp_path / "no-such-program")]
    _, config = evaluation(tmp_path, operators=[
        {"id": "passive", "type": "passive", "env": "CartPole-v1"}, missing], episodes=1)
    result = run_script(config, telemetry_path=tmp_path / "t.jsonl")
    assert result.operators["passive"].episodes_done == 1
    failure = result.operators["flaky"].failure
    assert failure is not None and failure.phase == "launch"
    assert "no-such-program" in failure.message


def test_ctrl_c_stops_every_worker_and_records_it(tmp_path: Path) -> None:
    _, config = evaluation(tmp_path)

    def interrupt(record: Any) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_script(config, telemetry_path=tmp_path / "t.jsonl", progress=interrupt)
    last = records(tmp_path / "t.jsonl")[-1]
    assert last["kind"] == "run_end" and last["interrupted"] is True
    # the autouse fixture checks that both workers were stopped and reaped


def test_sigint_to_the_cli_stops_the_workers_and_exits_130(tmp_path: Path) -> None:
    path, _ = evaluation(tmp_path, episodes=50, max_steps=0, step_pacing=0.01,
                         telemetry=str(tmp_path / "t.jsonl"))
    process = subprocess.Popen(
        [sys.executable, "-m", "mosaic", "evaluate", str(path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )
    try:
        assert process.stdout is not None
        assert "evaluating" in process.stdout.readline()  # printed before the workers start
        deadline = time.monotonic() + 30
        workers: set[int] = set()
        while len(workers) < 2 and time.monotonic() < deadline:
            workers = set(children_of(process.pid))
            time.sleep(0.05)
        assert len(workers) == 2
        ready, _, _ = select.select([process.stdout], [], [], 30)  # the first episode line
        assert ready and "episode 0" in process.stdout.readline()
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=15) == 130
        assert "interrupted" in process.stderr.read()
        assert not any(Path(f"/proc/{pid}").exists() for pid in workers)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    last = records(tmp_path / "t.jsonl")[-1]
    assert last["kind"] == "run_end" and last["interrupted"] is True


def test_run_script_file_exit_codes_and_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = evaluation(tmp_path, episodes=1, telemetry=str(tmp_path / "ok.jsonl"))
    assert run_script_file(path, quiet=True) == 0
    out = capsys.readouterr().out
    assert "operator" in out and "Random" in out and "1/1" in out
    assert (tmp_path / "ok.jsonl").exists()

    path, _ = evaluation(tmp_path, episodes=2, operators=[flaky("crash", die_after=2)],
                         telemetry=str(tmp_path / "bad.jsonl"))
    assert run_script_file(path, quiet=True) == 1
    assert "exit code 3" in capsys.readouterr().out


def test_cli_rejects_a_bad_file_with_exit_code_2_and_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("uid: x\noperators:\n  - id: a\n    type: random\n    env: CartPole-v1\n"
                   "    setings: {}\nseeds: [1]\n")
    done = subprocess.run(
        [sys.executable, "-m", "mosaic", "evaluate", str(bad)],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert f"{bad}:6: operators[0].setings: unknown key 'setings'" in done.stderr
    assert "did you mean 'settings'?" in done.stderr
    assert list(tmp_path.iterdir()) == [bad]  # no telemetry for a bad file


# -- the evaluation file -------------------------------------------------------------------------


def problem(tmp_path: Path, text: str | None) -> ConfigError:
    """The error of loading ``text`` as an evaluation file (``None``: of a missing file)."""
    path = tmp_path / "e.yml"
    if text is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_evaluation(path)
    error = caught.value
    assert error.path == str(path)
    return error


GOOD = """\
uid: demo
operators:
  - id: a
    type: random
    env: CartPole-v1
  - id: b
    type: llm
    env: CartPole-v1
    settings:
      base_url: http://127.0.0.1:8000/v1
      model: tiny
seeds: [1, 2]
"""


def test_a_good_file_loads_with_defaults(tmp_path: Path) -> None:
    path = tmp_path / "e.yml"
    path.write_text(GOOD)
    config = load_evaluation(path)
    assert config.source == str(path)
    assert config.episode_count == 2 and config.environment_mode == "procedural"
    assert (config.timeouts.step, config.timeouts.reset) == (10.0, 30.0)
    assert [op.label for op in config.operators] == ["a", "b"]


def test_unknown_keys_name_the_path_and_suggest_a_fix(tmp_path: Path) -> None:
    error = problem(tmp_path, GOOD.replace("base_url:", "bse_url:"))
    assert error.location == "operators[1].settings.base_url"  # first by line: "missing"
    assert "required key is missing" in error.message and error.line == 9
    unknown = error.problems[1]
    assert (unknown.location, unknown.line) == ("operators[1].settings.bse_url", 10)
    assert unknown.message == "unknown key 'bse_url'"
    assert unknown.hint.startswith("did you mean 'base_url'?")
    assert str(unknown) in str(error).splitlines()

    error = problem(tmp_path, GOOD.replace("seeds:", "sedes:"))
    assert error.location == "sedes" and error.hint.startswith("did you mean 'seeds'?")


def test_wrong_values_say_what_was_expected(tmp_path: Path) -> None:
    error = problem(tmp_path, GOOD.replace("http://127.0.0.1:8000/v1", "localhost:8000"))
    assert error.location == "operators[1].settings.base_url"
    assert "expected the endpoint" in error.message and error.line == 10

    error = problem(tmp_path, GOOD.replace("type: random", "type: randm"))
    assert error.location == "operators[0].type" and error.hint == "did you mean 'random'?"

    error = problem(tmp_path, GOOD.replace("seeds: [1, 2]", "seeds: [1, two]"))
    assert error.location == "seeds[1]"
    assert "expected a whole number, got the text 'two'" in error.message

    error = problem(tmp_path, GOOD.replace("CartPole-v1", "CartPol-v1", 1))
    assert error.location == "operators[0].env" and error.hint == "did you mean 'CartPole-v1'?"

    error = problem(tmp_path, GOOD + "environment_mode: fixed\n")
    assert error.location == "seeds" and "fixed mode" in error.message

    error = problem(tmp_path, GOOD.replace("id: b", "id: a"))
    assert error.location == "operators[1].id" and "duplicate operator id" in error.message


def test_yaml_syntax_errors_and_duplicate_keys_are_reported_with_lines(tmp_path: Path) -> None:
    error = problem(tmp_path, GOOD.replace("    type: random", "   type: random"))
    assert "invalid YAML" in error.message and error.line == 4

    error = problem(tmp_path, GOOD + "uid: again\n")
    assert (error.location, error.line) == ("uid", 13)
    assert "duplicate key 'uid' (first at line 1)" in error.message

    assert "the file is empty" in problem(tmp_path, "").message
    assert "file not found" in problem(tmp_path, None).message


def test_seeds_per_episode_follow_the_environment_mode() -> None:
    base = {"uid": "s", "operators": [{"id": "a", "type": "random", "env": "CartPole-v1"}]}
    procedural = parse_evaluation({**base, "seeds": [5, 9], "episodes": 4})
    seeds = procedural.episode_seeds()
    assert seeds[:2] == [5, 9] and len(seeds) == 4 and len(set(seeds)) == 4
    assert parse_evaluation({**base, "seeds": [5, 9], "episodes": 4}).episode_seeds() == seeds
    fixed = parse_evaluation({**base, "seeds": [7], "episodes": 3, "environment_mode": "fixed"})
    assert fixed.episode_seeds() == [7, 7, 7]
    assert parse_evaluation({**base, "seeds": [7], "environment_mode": "fixed"}).episode_count == 1


def test_schema_and_launcher_agree_on_operator_types() -> None:
    """The types are named once (mosaic.operators.api.kinds); each has its settings model, and
    each but command its worker module."""
    from mosaic.operators.api.kinds import BUILTIN_KINDS
    from mosaic.operators.api.settings import SETTINGS_MODELS
    from mosaic.operators.driver.launcher import WORKER_MODULES

    assert OPERATOR_TYPES == operator_config.OPERATOR_TYPES == tuple(BUILTIN_KINDS)
    assert set(SETTINGS_MODELS) == set(BUILTIN_KINDS)
    assert set(WORKER_MODULES) == set(BUILTIN_KINDS) - {"command"}


def test_telemetry_path_resolution(tmp_path: Path) -> None:
    base = {"uid": "r", "operators": [{"id": "a", "type": "random", "env": "CartPole-v1"}],
            "seeds": [1]}
    config = parse_evaluation({**base, "telemetry": str(tmp_path / "runs")})
    first = resolve_telemetry_path(config, now=0)
    assert first.parent == tmp_path / "runs" and first.name.startswith("r-")
    first.parent.mkdir()
    first.write_text("")
    assert resolve_telemetry_path(config, now=0) != first  # never overwrites a run
    assert resolve_telemetry_path(config, tmp_path / "x.jsonl") == tmp_path / "x.jsonl"


def test_the_examples_are_valid() -> None:
    examples = Path(__file__).parents[2] / "examples"
    cartpole = load_evaluation(examples / "evaluate_cartpole.yml")
    assert len(cartpole.operators) == 2 and len(cartpole.seeds) > 1
    frozen = load_evaluation(examples / "manual_frozenlake.yml")
    assert {op.env for op in frozen.operators} == {"FrozenLake-v1"}


def test_result_is_a_script_result(tmp_path: Path) -> None:
    _, config = evaluation(tmp_path, episodes=1, operators=[
        {"id": "passive", "type": "passive", "env": "CartPole-v1"}])
    result = run_script(config, telemetry_path=tmp_path / "t.jsonl")
    assert isinstance(result, ScriptResult) and result.telemetry_path == tmp_path / "t.jsonl"
    only = result.operators["passive"]
    assert only.std_return == 0.0 and only.mean_return == only.episodes[0].total_reward
