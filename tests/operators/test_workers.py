"""Every built-in worker as a real subprocess: conformance, behaviour, and failure modes."""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mosaic.agents.policies import (
    MLPPolicy,
    PolicyFileError,
    QTablePolicy,
    load_policy,
    save_mlp,
    save_q_table,
)
from mosaic.core.errors import WorkerCrashed
from mosaic.operators.api.config import OperatorConfig
from mosaic.operators.driver.handle import OperatorProcessHandle
from mosaic.operators.driver.launcher import OperatorLauncher
from mosaic.testing import assert_conformant, check_worker

from . import PY, worker
from .llm_server import LLMTestServer, Reply

pytestmark = pytest.mark.timeout(60)

HUMAN_PROMPT = b"choose action> "


def run_episode(handle: OperatorProcessHandle, seed: int | None) -> list[dict[str, Any]]:
    handle.reset(seed)
    steps = []
    for _ in range(1000):
        step, end = handle.step()
        steps.append(step)
        if end is not None:
            assert end["episode_length"] == len(steps)
            return steps
    raise AssertionError("the episode did not end")


# --- random ---------------------------------------------------------------------------------------


def test_random_worker_conforms_in_both_modes() -> None:
    report = assert_conformant(worker("random_worker", "--env-id", "CartPole-v1"))
    assert report["same seed, same trajectory"].passed is True
    report = assert_conformant(worker("random_worker"), env_mode="agent")
    assert report["same seed, same actions"].passed is True


def test_random_worker_same_seed_same_trajectory_in_another_process(start: Callable) -> None:
    argv = worker("random_worker", "--env-id", "CartPole-v1", "--send-observations")
    first, second, other = start(argv, "a"), start(argv, "b"), start(argv, "c")
    run_a, run_b, run_c = run_episode(first, 11), run_episode(second, 11), run_episode(other, 12)
    assert run_a == run_b
    assert run_a != run_c
    assert {s["action"] for s in run_a} == {0, 1}
    # A second episode without a seed continues the stream, identically in both processes.
    assert run_episode(first, None) == run_episode(second, None)


def test_random_worker_honours_legal_actions_and_masks(start: Callable) -> None:
    handle = start(worker("random_worker", "--n-actions", "4"))
    assert {handle.select_action(0, legal_actions=[2])["action"] for _ in range(5)} == {2}
    masked = {handle.select_action(0, action_mask=[0, 0, 1, 1])["action"] for _ in range(40)}
    assert masked == {2, 3}
    free = {handle.select_action(0)["action"] for _ in range(60)}
    assert free == {0, 1, 2, 3}


# --- passive and scripted -------------------------------------------------------------------------


def test_passive_worker_conforms_and_does_nothing(start: Callable) -> None:
    assert_conformant(worker("passive_worker", "--env-id", "FrozenLake-v1"))
    handle = start(worker("passive_worker", "--env-id", "FrozenLake-v1"))
    assert {s["action"] for s in run_episode(handle, 3)} == {0}
    assert handle.select_action(5, legal_actions=[2, 3])["action"] == 2


def test_scripted_worker_with_the_builtin_cartpole_policy(start: Callable) -> None:
    argv = worker("scripted_worker", "--policy", "workers.scripted_worker:cartpole_balance",
                  "--reproducible", "--env-id", "CartPole-v1")
    report = assert_conformant(argv)
    assert report["same seed, same trajectory"].passed is True
    # Balancing keeps the pole up far longer than random play (about 20 steps).
    assert len(run_episode(start(argv), 0)) >= 200


def test_scripted_worker_loads_a_user_module(start: Callable, tmp_path: Path) -> None:
    (tmp_path / "my_policies.py").write_text(
        "def highest(observation, legal_actions):\n    return max(legal_actions)\n")
    by_module = start(worker("scripted_worker", "--policy", "my_policies:highest"),
                      env={"PYTHONPATH": str(tmp_path)})
    by_path = start(worker("scripted_worker", "--policy",
                           f"{tmp_path / 'my_policies.py'}:highest", "--n-actions", "5"))
    assert by_module.select_action([0.0], legal_actions=[0, 3, 1])["action"] == 3
    assert by_path.select_action([0.0])["action"] == 4


def test_scripted_worker_with_a_missing_function_exits_2(start: Callable) -> None:
    handle = start(worker("scripted_worker", "--policy", "no_such_module_xyz:act"))
    with pytest.raises(WorkerCrashed) as caught:
        handle.ping(timeout=10)
    assert caught.value.exit_code == 2
    assert "no_such_module_xyz" in caught.value.stderr_tail


@pytest.mark.parametrize(("env_args", "said"), [
    (["--env-id", "CartPoel-v1"],
     "could not start: NameNotFound: Environment `CartPoel` doesn't exist. Did you mean: "
     "`CartPole`?"),
    (["--env-id", "CartPole-v1", "--env-kwargs", '{"is_slipery": false}'],
     "could not start: TypeError: CartPoleEnv.__init__() got an unexpected keyword argument "
     "'is_slipery'"),
])
def test_an_environment_that_cannot_be_made_says_why_and_exits_2(
        start: Callable, env_args: list[str], said: str) -> None:
    handle = start(worker("random_worker", *env_args))
    with pytest.raises(WorkerCrashed) as caught:
        handle.ping(timeout=10)
    assert caught.value.exit_code == 2 and said in caught.value.stderr_tail


# --- rl and checkpoints ---------------------------------------------------------------------------

# Down, down, right, down, right, right: the shortest path to the goal of the 4x4 FrozenLake map.
PATH = {0: 1, 4: 1, 8: 2, 9: 1, 13: 2, 14: 2}


@pytest.fixture
def q_checkpoint(tmp_path: Path) -> Path:
    q = np.zeros((16, 4))
    for state, action in PATH.items():
        q[state, action] = 1.0
    return save_q_table(tmp_path / "frozen_lake", q)


def test_rl_worker_plays_its_q_table(start: Callable, q_checkpoint: Path) -> None:
    argv = worker("rl_worker", "--checkpoint", str(q_checkpoint), "--env-id", "FrozenLake-v1",
                  "--env-kwargs", '{"is_slippery": false}')
    report = assert_conformant(argv)
    assert report["same seed, same trajectory"].passed is True
    steps = run_episode(start(argv), 0)
    assert [s["action"] for s in steps] == [1, 1, 2, 1, 2, 2]
    assert steps[-1]["episode_reward"] == 1.0 and steps[-1]["terminated"]
    assert_conformant(worker("rl_worker", "--checkpoint", str(q_checkpoint)), env_mode="agent")


def test_rl_worker_with_a_bad_checkpoint_exits_2(start: Callable, tmp_path: Path) -> None:
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip file")
    handle = start(worker("rl_worker", "--checkpoint", str(bad)))
    with pytest.raises(WorkerCrashed) as caught:
        handle.ping(timeout=10)
    assert caught.value.exit_code == 2 and "bad.npz" in caught.value.stderr_tail


def test_checkpoints_round_trip_and_act_greedily(tmp_path: Path) -> None:
    q = np.array([[0.0, 2.0, 1.0], [5.0, 5.0, 0.0]])
    policy = load_policy(save_q_table(tmp_path / "q.npz", q))
    assert isinstance(policy, QTablePolicy) and np.array_equal(policy.q, q)
    assert policy.act(0) == 1 and policy.act(np.int64(0), [0, 2]) == 2
    assert policy.act(1) == 0  # ties go to the lowest index
    rng = np.random.default_rng(1)
    layers = [(rng.normal(size=(4, 8)), rng.normal(size=8)),
              (rng.normal(size=(8, 3)), rng.normal(size=3))]
    mlp = load_policy(save_mlp(tmp_path / "mlp.npz", layers))
    assert isinstance(mlp, MLPPolicy) and mlp.n_actions == 3
    obs = np.array([0.1, -0.2, 0.3, 0.4])
    logits = np.tanh(obs @ layers[0][0] + layers[0][1]) @ layers[1][0] + layers[1][1]
    assert np.allclose(mlp.action_values(obs), logits)
    assert mlp.act(obs) == int(np.argmax(logits))
    worst = int(np.argmin(logits))
    assert mlp.act(obs.tolist(), [worst]) == worst
    with pytest.raises(ValueError):
        mlp.act(obs, [])


def _write_npz(path: Path, **arrays: Any) -> Path:
    np.savez(path, **arrays)
    return path


@pytest.mark.parametrize("arrays, fragment", [
    ({"q": np.zeros((2, 2))}, "no 'format'"),
    ({"format": np.array("tabular"), "q": np.zeros((2, 2))}, "unknown format"),
    ({"format": np.array(["q_table"]), "q": np.zeros((2, 2))}, "0-d string"),
    ({"format": np.array("q_table")}, "needs an array 'q'"),
    ({"format": np.array("q_table"), "q": np.zeros(3)}, "shape"),
    ({"format": np.array("q_table"), "q": np.array([[np.nan, 0.0]])}, "NaN"),
    ({"format": np.array("q_table"), "version": np.array(2), "q": np.zeros((2, 2))}, "version"),
    ({"format": np.array("mlp"), "W0": np.zeros((4, 3))}, "b0"),
    ({"format": np.array("mlp"), "W0": np.zeros((4, 3)), "b0": np.zeros(3),
      "W1": np.zeros((2, 2)), "b1": np.zeros(2)}, "inputs"),
    ({"format": np.array("mlp")}, "at least one layer"),
    ({"format": np.array("q_table"), "q": np.array([{"a": 1}], dtype=object)}, "readable"),
])
def test_malformed_checkpoints_give_clear_errors(
    tmp_path: Path, arrays: dict[str, Any], fragment: str
) -> None:
    path = _write_npz(tmp_path / "ckpt.npz", **arrays)
    with pytest.raises(PolicyFileError, match=fragment) as caught:
        load_policy(path)
    assert str(path) in str(caught.value)


def test_missing_checkpoint_is_a_policy_file_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyFileError, match="no such file"):
        load_policy(tmp_path / "absent.npz")


# --- llm ------------------------------------------------------------------------------------------


@pytest.fixture
def llm_server() -> Iterator[LLMTestServer]:
    with LLMTestServer(default=Reply("I choose action 1.")) as server:
        yield server


def llm_worker(server: LLMTestServer, *args: str) -> list[str]:
    return worker("llm_worker", "--base-url", server.base_url, "--model", "test-model", *args)


def test_llm_worker_conforms_and_prompts_with_observation_and_legal_actions(
    llm_server: LLMTestServer,
) -> None:
    assert_conformant(llm_worker(llm_server, "--env-id", "CartPole-v1",
                                 "--action-names", "left,right"))
    body = llm_server.requests[0]
    assert body["model"] == "test-model"
    prompt = body["messages"][-1]["content"]
    assert "Legal actions: 0 (left), 1 (right)" in prompt and "Observation: [" in prompt
    assert "CartPole-v1" in body["messages"][0]["content"]


def test_llm_worker_reports_errors_uses_the_fallback_and_counts_tokens(
    start: Callable, llm_server: LLMTestServer,
) -> None:
    llm_server.add(
        Reply("<think>maybe 3</think> I pick 2", prompt_tokens=11, completion_tokens=3),
        Reply("I have no idea"),
        Reply("server on fire", status=500),
        Reply(raw=b"this is not json"),
        Reply(raw=b'{"choices": []}'),
        Reply("3", delay=3.0),
        Reply("Action 7 is not allowed, so 3", prompt_tokens=20, completion_tokens=5),
    )
    handle = start(llm_worker(llm_server, "--fallback", "first-legal", "--timeout", "0.5",
                              "--max-retries", "0",  # one scripted reply per action
                              "--api-key-env", "MY_TEST_KEY"), env={"MY_TEST_KEY": "sekrit"})
    replies = []
    for _ in range(7):
        began = time.monotonic()
        replies.append(handle.select_action([0.5, 1.25], legal_actions=[2, 3], timeout=10))
        assert time.monotonic() - began < 3.0  # the slow reply was abandoned after --timeout
    assert [r["action"] for r in replies] == [2, 2, 2, 2, 2, 2, 3]
    errors = [r.get("llm_error", "") for r in replies]
    assert errors[0] == "" and errors[6] == ""
    assert "no legal action" in errors[1]
    assert "HTTP 500" in errors[2]
    assert "not JSON" in errors[3]
    assert "not a chat completion" in errors[4]
    assert "timed out" in errors[5]
    assert replies[0]["tokens"] == {"prompt_tokens": 11, "completion_tokens": 3,
                                    "total_tokens": 14, "requests": 1}
    # Counted: the two good replies and the unparseable one (its tokens were spent too); the
    # failed requests have no usage and the abandoned slow one never arrived.
    assert replies[6]["tokens"] == {"prompt_tokens": 11 + 10 + 20, "completion_tokens": 3 + 2 + 5,
                                    "total_tokens": 51, "requests": 7}
    assert llm_server.headers[0]["Authorization"] == "Bearer sekrit"


def test_llm_random_fallback_is_seeded(start: Callable) -> None:
    with LLMTestServer(default=Reply("gibberish")) as server:
        handle = start(llm_worker(server))

        def actions() -> list[int]:
            handle.init_agent("p0", settings={"n_actions": 6, "seed": 5})
            return [handle.select_action(0)["action"] for _ in range(12)]

        first, second = actions(), actions()
    assert first == second and len(set(first)) > 1


def test_launcher_clears_proxies_for_llm_workers(llm_server: LLMTestServer) -> None:
    proxy = "http://127.0.0.1:9"  # nothing listens there: a proxied request fails
    launcher = OperatorLauncher(extra_env={"HTTP_PROXY": proxy, "http_proxy": proxy,
                                           "NO_PROXY": "", "no_proxy": ""})
    results = {}
    for keep in (False, True):
        config = OperatorConfig.single_agent(
            "llm_1", "llm", "llm_worker", "LLM", "gymnasium", "CartPole-v1",
            {"base_url": llm_server.base_url, "model_id": "m", "timeout": 2,
             "keep_proxy_env": keep})
        with launcher.launch(config) as handle:
            handle.reset(0)
            results[keep] = handle.step()[0]
    assert "llm_error" not in results[False]
    assert "request failed" in results[True]["llm_error"]


# --- human ----------------------------------------------------------------------------------------


class Terminal:
    """A pseudo-terminal that answers each prompt of the human worker with the next answer."""

    def __init__(self, answers: list[str], default: str | None = None) -> None:
        self.master, self.slave = os.openpty()
        self.path = os.ttyname(self.slave)
        self.answers = list(answers)
        self.default = default
        self.output = bytearray()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        answered = 0
        while not self._stop.is_set():
            ready, _, _ = select.select([self.master], [], [], 0.05)
            if not ready:
                continue
            try:
                self.output += os.read(self.master, 4096)
            except OSError:
                return
            while answered < self.output.count(HUMAN_PROMPT):
                answer = self.answers.pop(0) if self.answers else self.default
                if answer is None:
                    break
                os.write(self.master, answer.encode() + b"\n")
                answered += 1

    def text(self) -> str:
        return self.output.decode("utf-8", "replace")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)
        os.close(self.master)
        os.close(self.slave)


@pytest.fixture
def terminal() -> Iterator[Callable[..., Terminal]]:
    made: list[Terminal] = []

    def make(answers: list[str], default: str | None = None) -> Terminal:
        made.append(Terminal(answers, default))
        return made[-1]

    yield make
    for term in made:
        term.close()


def test_human_worker_conforms_through_a_pseudo_terminal(terminal: Callable) -> None:
    term = terminal([], default="1")
    report = assert_conformant(worker("human_worker", "--tty", term.path, "--env-id",
                                      "CartPole-v1"))
    assert report["same seed, same trajectory"].passed is None  # humans claim nothing
    assert "legal actions: 0  1" in term.text()


def test_human_worker_reprompts_on_invalid_input(terminal: Callable) -> None:
    term = terminal(["abc", "7", "0", "", "LEFT"])
    config = OperatorConfig.single_agent(
        "human_1", "human", "human_worker", "Human", "pettingzoo", "",
        {"tty": term.path, "action_names": ["noop", "fire", "left"]})
    with OperatorLauncher().launch(config) as handle:
        reply = handle.select_action({"board": [1, 2]}, legal_actions=[1, 2], timeout=20)
    assert reply["action"] == 2
    text = term.text()
    assert "legal actions: 1=fire  2=left" in text
    for bad in ("'abc'", "'7'", "'0'"):
        assert f"invalid choice {bad}" in text
    assert text.count("choose action>") == 5


def test_human_worker_plays_chess_in_san_or_uci(terminal: Callable) -> None:
    from pettingzoo.classic import chess_v6

    from mosaic.operators.chess_position import board_from_observation, legal_moves
    from workers.human_worker import HumanPolicy

    env = chess_v6.env()
    env.reset(seed=0)
    try:
        start = env.observe("player_0")
        env.step(next(a for a, m in legal_moves(board_from_observation(start)).items()
                      if m.uci() == "e2e4"))
        observation = env.observe("player_1")
    finally:
        env.close()
    legal = [int(a) for a in np.flatnonzero(observation["action_mask"])]
    moves = legal_moves(board_from_observation(observation), legal)
    term = terminal(["Ke2", "e4", "e7e5"])
    policy = HumanPolicy(term.path)
    try:
        policy.init_agent("player_1", "pettingzoo", "pettingzoo:classic.chess_v6", {})
        action = policy.select_action(observation, legal)
        assert moves[action].uci() == "e7e5" and policy.reply_fields() == {"move": "e7e5"}
        term.answers[:] = ["nc6"]  # SAN's names are read ignoring case when only one matches
        assert moves[policy.select_action(observation, legal)].uci() == "b8c6"
    finally:
        policy.close()
    text = term.text()
    assert "FEN rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq" in text
    assert "legal moves: " in text and " Nc6 " in text and " e5 " in text
    assert "invalid choice 'Ke2'" in text and "invalid choice 'e4'" in text


def test_human_worker_without_a_terminal_exits_2(start: Callable, tmp_path: Path) -> None:
    handle = start(worker("human_worker", "--tty", str(tmp_path / "no-such-tty")))
    with pytest.raises(WorkerCrashed) as caught:
        handle.ping(timeout=10)
    assert caught.value.exit_code == 2 and "--tty" in caught.value.stderr_tail


def test_every_worker_has_help() -> None:
    import subprocess

    for name in ("random_worker", "passive_worker", "scripted_worker", "rl_worker",
                 "llm_worker", "human_worker"):
        done = subprocess.run(worker(name, "--help"), capture_output=True, timeout=20)
        assert done.returncode == 0 and b"--env-id" in done.stdout, name


def test_check_worker_reports_a_broken_worker_without_raising() -> None:
    report = check_worker([PY, "-c", "import sys; sys.stdin.readline(); print('hello')"],
                          timeout=3)
    assert not report.passed
    assert report["ping -> pong"].passed is False
    assert "hello" in report["ping -> pong"].detail
    with pytest.raises(AssertionError, match="FAIL"):
        assert_conformant([PY, "-c", "pass"], timeout=3)
    missing = check_worker(["/nonexistent/worker-program"])
    assert not missing.passed and "No such file" in missing["the worker starts"].detail
