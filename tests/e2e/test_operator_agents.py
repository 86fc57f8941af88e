"""End to end: operators as agents of an experiment, through the real ``mosaic`` command."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mosaic.messages.codec import unpack
from tests.e2e.cli import REPO, query, run_mosaic, write_experiment
from tests.operators.llm_server import LLMTestServer, Reply
from tests.operators.test_operator_muscle import FAKE_WORKER
from workers.scripted_worker import cartpole_balance

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

#: The shortest way across the 4x4 lake without slipping: down, down, right, down, right, right.
LAKE_PATH = [1, 1, 2, 1, 2, 2]


def steps_of(store: Path) -> list[tuple[int, int, object, object, float]]:
    """(episode, step, observation, action, reward) of every stored step, in order."""
    rows = query(store, "SELECT episode, step, observation, action, reward FROM steps ORDER BY id")
    return [(e, s, unpack(o), unpack(a), r) for e, s, o, a, r in rows]


def assert_counts_match_rows(store: Path) -> None:
    for run_id, steps, episodes in query(store, "SELECT id, steps, episodes FROM runs"):
        assert query(store, "SELECT COUNT(*) FROM steps WHERE run_id = ?", run_id)[0][0] == steps
        assert query(store, "SELECT COUNT(*) FROM episodes WHERE run_id = ?",
                     run_id)[0][0] == episodes


def test_a_scripted_operator_agent_plays_its_script(tmp_path: Path, process_tag: str) -> None:
    store = tmp_path / "results.sqlite"
    result = run_mosaic("experiment-start", "examples/cartpole_scripted_operator.yml",
                        "--store", str(store))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    [(status, episodes, error)] = query(store, "SELECT status, episodes, error FROM runs")
    assert (status, episodes, error) == ("finished", 5, None)
    assert_counts_match_rows(store)
    recorded = steps_of(store)
    assert len(recorded) > 5 * 100  # balancing keeps the pole up far longer than random play
    for episode, step, observation, action, _ in recorded:
        assert action == cartpole_balance(observation, None), (episode, step)
    assert {action for *_, action, _ in recorded} == {0, 1}


@pytest.mark.parametrize("placement", ["thread", "process"])
def test_an_llm_operator_agent_plays_frozenlake_against_a_local_server(
    tmp_path: Path, process_tag: str, placement: str,
) -> None:
    example = (REPO / "examples" / "frozenlake_llm.yml").read_text()
    with LLMTestServer(default=Reply("I am lost")) as server:
        for _ in range(3):  # the example's episodes, each answered with the winning path
            server.add(*(Reply(f"Moving on: {action}", prompt_tokens=50, completion_tokens=3)
                         for action in LAKE_PATH))
        text = (example.replace("http://127.0.0.1:8000/v1", server.base_url)
                .replace("placement: thread", f"placement: {placement}"))
        assert server.base_url in text and f"placement: {placement}" in text
        path = write_experiment(tmp_path, text, "frozenlake_llm.yml")
        store = tmp_path / "results.sqlite"
        result = run_mosaic("experiment-start", str(path), "--store", str(store))
        requests = list(server.requests)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    [(status, episodes, steps, error)] = query(store,
                                               "SELECT status, episodes, steps, error FROM runs")
    assert (status, episodes, steps, error) == ("finished", 3, 18, None)
    assert_counts_match_rows(store)
    recorded = steps_of(store)
    assert [action for _, _, _, action, _ in recorded] == LAKE_PATH * 3
    assert [reward for *_, reward in recorded] == ([0.0] * 5 + [1.0]) * 3  # the goal, each time
    assert [observation for _, _, observation, _, _ in recorded][:6] == [0, 4, 8, 9, 13, 14]
    # One chat completion per action, with the example's model, prompt and the game's name.
    assert len(requests) == 18
    assert {body["model"] for body in requests} == {"local-model"}
    system = requests[0]["messages"][0]["content"]
    assert "You play FrozenLake-v1 on a 4x4 grid" in system
    assert "Observation: 4" in requests[1]["messages"][-1]["content"]
    assert "0 (left), 1 (down), 2 (right), 3 (up)" in requests[0]["messages"][-1]["content"]


def test_a_worker_that_crashes_mid_run_fails_the_run_and_names_it(
    tmp_path: Path, process_tag: str,
) -> None:
    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE_WORKER)
    path = write_experiment(tmp_path, f"""\
        uid: crashing-operator
        seed: 1
        episodes: 3
        environments:
          - uid: cartpole
            env: gymnasium:CartPole-v1
        agents:
          - uid: pilot
            muscle:
              class: mosaic.operators:OperatorMuscle
              params:
                operator:
                  type: command
                  id: flaky-pilot
                  command: ["{sys.executable}", "{script}", "crash", "5"]
                timeout: 5
    """)
    store = tmp_path / "results.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store))
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    [(status, steps, error)] = query(store, "SELECT status, steps, error FROM runs")
    assert status == "failed"
    assert "operator 'flaky-pilot' (command worker" in error
    assert "exited with code 3" in error and "fatal: the fake worker gave up" in error
    assert "flaky-pilot" in result.stdout + result.stderr
    assert steps == 4  # four actions were chosen and stepped; the fifth was never chosen
    assert [action for _, _, _, action, _ in steps_of(store)] == [0, 0, 0, 0]
    assert_counts_match_rows(store)
    # process_tag checks that the crashed worker and every component process are gone.


@pytest.mark.parametrize("command", ["experiment-check", "experiment-start"])
def test_a_bad_operator_is_refused_at_load_with_file_line_and_key(
    tmp_path: Path, process_tag: str, command: str,
) -> None:
    path = write_experiment(tmp_path, """\
        uid: bad-operator
        environments:
          - uid: lake
            env: gymnasium:FrozenLake-v1
        agents:
          - uid: player
            muscle:
              class: mosaic.operators:OperatorMuscle
              params:
                operator:
                  type: lmm
                  settings: {base_url: "http://127.0.0.1:9/v1", model: m}
                timeout: 5
    """)
    store = tmp_path / "results.sqlite"
    result = run_mosaic(command, str(path), *(["--store", str(store)]
                                              if command == "experiment-start" else []))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        f"error: {path}:11: agents[0].muscle.params.operator.type: expected one of random, "
        "passive, scripted, rl, llm, bdi, human, command, got the text 'lmm' "
        "(hint: did you mean 'llm'?)"]
    assert not store.exists()  # nothing started; process_tag checks that no worker did either
