"""The launcher and the process handles against good and misbehaving workers."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import subprocess
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mosaic.core.errors import WorkerCrashed, WorkerError, WorkerProtocolError, WorkerTimeout
from mosaic.operators.api.config import OperatorConfig, WorkerAssignment
from mosaic.operators.driver.handle import OperatorProcessHandle, WorkerReplyError
from mosaic.operators.driver.launcher import OperatorLauncher
from tests.processes import gone

from . import PY, worker

pytestmark = pytest.mark.timeout(60)

MISBEHAVING = Path(__file__).parent / "misbehaving"


def script(name: str, *args: str) -> list[str]:
    return [PY, str(MISBEHAVING / f"{name}.py"), *args]


def wait_for_stderr(handle: OperatorProcessHandle, text: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in handle.stderr_tail():
        assert time.monotonic() < deadline, f"worker never wrote {text!r} to stderr"
        time.sleep(0.02)


# --- crash, hang, garbage -------------------------------------------------------------------------


def test_a_crash_is_reported_with_exit_code_and_stderr(
    start: Callable, caplog: pytest.LogCaptureFixture
) -> None:
    handle = start(script("crash_on_command"), "crasher")
    with (
        caplog.at_level(logging.INFO, logger="mosaic.operators.worker"),
        pytest.raises(WorkerCrashed) as caught,
    ):
        handle.ping(timeout=10)
    assert caught.value.exit_code == 3
    assert "simulated crash" in caught.value.stderr_tail and "simulated crash" in str(caught.value)
    assert not handle.is_running and handle.exit_code == 3
    assert any("simulated crash" in r.getMessage() and r.name.endswith("crasher")
               for r in caplog.records)
    with pytest.raises(WorkerCrashed):
        handle.ping(timeout=1)
    assert handle.stop() == 3 and handle.stop_outcome == "already_exited"


def test_a_worker_that_dies_at_start_is_a_crash(start: Callable) -> None:
    handle = start([PY, "-c", "import sys; sys.stderr.write('cannot start\\n'); sys.exit(5)"])
    handle.process.wait(timeout=10)
    with pytest.raises(WorkerCrashed) as caught:
        handle.ping(timeout=5)
    assert caught.value.exit_code == 5 and "cannot start" in caught.value.stderr_tail


def test_a_silent_worker_is_a_timeout_and_stop_escalates_to_sigterm(start: Callable) -> None:
    handle = start(script("hang"))
    began = time.monotonic()
    with pytest.raises(WorkerTimeout):
        handle.ping(timeout=0.5)
    assert 0.45 <= time.monotonic() - began < 2.0
    assert handle.is_running
    assert handle.try_read_response(0.05) is None
    began = time.monotonic()
    assert handle.stop(timeout=2.0) == -signal.SIGTERM
    assert handle.stop_outcome == "sigterm"  # it ignored the stop command and EOF
    assert time.monotonic() - began < 2.5


def test_stop_kills_a_worker_that_ignores_stop_eof_and_sigterm(start: Callable) -> None:
    handle = start(script("stubborn"))
    wait_for_stderr(handle, "ignoring SIGTERM")
    began = time.monotonic()
    assert handle.stop(timeout=2.0) == -signal.SIGKILL
    assert time.monotonic() - began < 3.0
    assert handle.stop_outcome == "sigkill"
    began = time.monotonic()
    assert handle.stop() == -signal.SIGKILL  # idempotent and immediate
    assert time.monotonic() - began < 0.1


def test_garbage_lines_are_protocol_errors_and_the_handle_survives(start: Callable) -> None:
    handle = start(script("garbage"))
    with pytest.raises(WorkerProtocolError) as caught:
        handle.ping(timeout=10)
    assert caught.value.line == "hello, I am not JSON"
    with pytest.raises(WorkerProtocolError, match="missing required field"):
        handle.ping(timeout=5)
    assert handle.ping(timeout=5) < 5


def test_a_late_reply_is_dropped_by_id(start: Callable, caplog: pytest.LogCaptureFixture) -> None:
    handle = start(script("late_reply", "1.0"))
    with pytest.raises(WorkerTimeout):
        handle.request({"cmd": "ping"}, timeout=0.3)
    with caplog.at_level(logging.DEBUG, logger="mosaic.operators.driver.handle"):
        reply = handle.request({"cmd": "ping"}, timeout=5)
    assert reply == {"type": "pong", "id": 2}
    assert any("dropped a reply to request 1" in r.getMessage() for r in caplog.records)


def test_replies_without_ids_are_accepted(start: Callable) -> None:
    handle = start(script("late_reply", "0", "no-id"))
    assert handle.request({"cmd": "ping"}, timeout=10) == {"type": "pong"}


def test_a_worker_that_does_not_read_stdin_times_out_the_write(start: Callable) -> None:
    handle = start([PY, "-c", "import time; time.sleep(30)"])
    began = time.monotonic()
    with pytest.raises(WorkerTimeout, match="did not read its stdin"):
        handle.send_raw(b"x" * (4 << 20), timeout=0.5)
    assert time.monotonic() - began < 2.0


# --- a well-behaved worker ------------------------------------------------------------------------


def test_error_replies_raise_unless_asked_for(start: Callable) -> None:
    handle = start(worker("random_worker", "--env-id", "CartPole-v1"))
    with pytest.raises(WorkerReplyError, match="reset"):
        handle.step(timeout=10)
    reply = handle.request({"cmd": "step"}, timeout=5, accept_error=True)
    assert reply["type"] == "error" and "reset" in reply["message"]
    ready = handle.reset(seed=1)
    assert ready["seed"] == 1 and ready["observation_shape"] == [4]


def test_polling_like_a_gui(start: Callable) -> None:
    handle = start(worker("random_worker", "--env-id", "CartPole-v1"))
    handle.send_reset(7)
    assert handle.read_response(timeout=10)["type"] == "ready"
    request_id = handle.send_step()
    reply = None
    for _ in range(200):
        reply = handle.try_read_response(timeout=0.01)
        if reply is not None:
            break
    assert reply is not None and reply["type"] == "step" and reply["id"] == request_id


def test_large_observations_cross_the_pipe(start: Callable) -> None:
    handle = start(worker("random_worker", "--n-actions", "3"))
    observation = [[float(i)] * 500 for i in range(400)]  # about 1.2 MB of JSON
    reply = handle.select_action(observation, legal_actions=[1], timeout=20)
    assert reply["action"] == 1


def test_stop_uses_the_stop_command_first() -> None:
    config = OperatorConfig.single_agent("r1", "random", "random_worker", "Random",
                                         "gymnasium", "CartPole-v1")
    with OperatorLauncher().launch(config) as handle:
        handle.ping(timeout=10)
        assert handle.stop(timeout=30) == 0  # returns as soon as the worker exits
    assert handle.stop_outcome == "stopped" and not handle.is_running
    with pytest.raises(WorkerError):
        handle.send({"cmd": "ping"})


def test_sigterm_mid_episode_exits_0_promptly(start: Callable) -> None:
    handle = start(worker("random_worker", "--env-id", "FrozenLake-v1", "--render-every", "1",
                                "--render-mode", "ansi"))
    handle.reset(seed=0)
    handle.step()
    handle.process.send_signal(signal.SIGTERM)
    assert handle.process.wait(timeout=2.0) == 0


def test_the_worker_dies_with_its_parent_even_when_busy(tmp_path: Path) -> None:
    # The worker is busy in its policy, so it is not reading stdin and would not notice EOF:
    # only the parent-death signal (or the parent-pid check) can end it.
    (tmp_path / "slow.py").write_text(
        "import time\n\ndef think(observation, legal_actions):\n    time.sleep(60)\n")
    code = textwrap.dedent(f"""
        import time
        from mosaic.operators.api.config import OperatorConfig
        from mosaic.operators.driver.launcher import OperatorLauncher
        config = OperatorConfig.single_agent(
            "orphan", "scripted", "scripted_worker", "slow", "pettingzoo", "",
            {{"policy": {str(tmp_path / "slow.py") + ":think"!r}}})
        handle = OperatorLauncher().launch(config)
        handle.ping(timeout=20)
        handle.send_select_action(0, legal_actions=[0])
        time.sleep(0.3)
        print(handle.pid, flush=True)
        time.sleep(60)
    """)
    parent = subprocess.Popen([PY, "-c", code], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL)
    worker_pid = None
    try:
        lines: list[bytes] = []
        reader = threading.Thread(target=lambda: lines.append(parent.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(timeout=20)
        assert lines and lines[0].strip().isdigit(), "the parent did not report its worker"
        worker_pid = int(lines[0])
        parent.kill()  # SIGKILL: the parent gets no chance to stop its worker
        parent.wait(timeout=5)
        deadline = time.monotonic() + 3.0
        while not gone(worker_pid):
            assert time.monotonic() < deadline, "the orphaned worker is still running"
            time.sleep(0.05)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(timeout=5)
        parent.stdout.close()
        if worker_pid is not None and not gone(worker_pid):
            os.kill(worker_pid, signal.SIGKILL)


# --- multi-agent ----------------------------------------------------------------------------------


def test_multi_agent_handle_drives_one_worker_per_player() -> None:
    config = OperatorConfig.multi_agent(
        "match", "Random vs passive", "pettingzoo", "tictactoe_v3",
        {"player_1": WorkerAssignment("random_worker", "random", {"n_actions": 9, "seed": 3}),
         "player_2": WorkerAssignment("passive_worker", "passive", {"n_actions": 9})},
    )
    assert config.operator_type == "random" and config.is_multi_agent
    multi = OperatorLauncher().launch_multi_agent(config)
    try:
        assert multi.players == ["player_1", "player_2"]
        assert multi["player_1"].operator_id == "match.player_1"
        ready = multi.send_init_agents(timeout=20)
        assert {p: r["player_id"] for p, r in ready.items()} == {"player_1": "player_1",
                                                                 "player_2": "player_2"}
        reply = multi.select_action("player_1", [0] * 9, legal_actions=[4, 5], timeout=10)
        assert reply["action"] in (4, 5) and reply["player_id"] == "player_1"
        multi.send_select_action("player_1", [0] * 9, action_mask=[0] * 8 + [1])
        multi.send_select_action("player_2", [0] * 9, legal_actions=[6, 7])
        replies = multi.poll_all_responses(timeout=10)
        assert replies["player_1"]["action"] == 8 and replies["player_2"]["action"] == 6
        assert multi.poll_all_responses(timeout=0.05) == {}
    finally:
        began = time.monotonic()
        codes = multi.stop_all()
    assert codes == {"player_1": 0, "player_2": 0}
    assert time.monotonic() - began < 3.0


# --- launcher -------------------------------------------------------------------------------------


def test_build_command_per_operator_type(tmp_path: Path) -> None:
    launcher = OperatorLauncher(python="py")

    def build(kind: str, settings: dict, **kw: object) -> list[str]:
        config = OperatorConfig.single_agent("op", kind, "w", "Op", "gymnasium", "CartPole-v1",
                                             settings, **kw)
        return launcher.build_command(config, "run-1")

    assert build("random", {}, max_steps=50) == [
        "py", "-m", "workers.random_worker", "--run-id", "run-1", "--env-id", "CartPole-v1",
        "--max-steps", "50"]
    assert build("passive", {"noop_action": 1})[3:5] == ["--noop-action", "1"]
    assert build("scripted", {"policy": "m:f", "reproducible": True})[3:6] == [
        "--policy", "m:f", "--reproducible"]
    assert build("rl", {"checkpoint": "p.npz"})[3:5] == ["--checkpoint", "p.npz"]
    llm = build("llm", {"base_url": "http://h/v1", "model_id": "q", "fallback": "noop",
                        "action_names": ["a", "b"]})
    assert llm[:9] == ["py", "-m", "workers.llm_worker", "--base-url", "http://h/v1",
                       "--model", "q", "--fallback", "noop"]
    assert "--action-names" in llm and "a,b" in llm
    human = build("human", {"tty": "/dev/pts/9"})
    assert human[3:5] == ["--tty", "/dev/pts/9"]
    frames = build("random", {"render_every": 5, "env_kwargs": {"a": 1}})
    assert frames[frames.index("--render-every"):][:2] == ["--render-every", "5"]
    assert json.loads(frames[frames.index("--env-kwargs") + 1]) == {"a": 1}
    batch = launcher.build_command(
        OperatorConfig.single_agent("op", "random", "w", "Op", "gymnasium", "CartPole-v1",
                                    {"episodes": 3, "seed": 9}), "r", interactive=False)
    assert batch[-5:] == ["--seed", "9", "--batch", "--episodes", "3"]
    # The operator's own seed reaches an interactive worker too.
    assert build("random", {"seed": 9})[-2:] == ["--seed", "9"]
    command = OperatorConfig.single_agent("op", "command", "w", "Op", "gymnasium", "X",
                                          command=["my-worker", "--fast"])
    assert launcher.build_command(command, "r") == ["my-worker", "--fast"]
    for kind in ("scripted", "rl", "llm"):
        with pytest.raises(ValueError, match="needs settings"):
            build(kind, {})


def test_workers_get_their_identity_in_the_environment(tmp_path: Path) -> None:
    code = ("import json, os, sys; sys.stdin.readline(); "
            "keys = ['OPERATOR_ID', 'OPERATOR_RUN_ID', 'TELEMETRY_DIR', 'MOSAIC_PARENT_PID', "
            "'MPI4PY_RC_INITIALIZE', 'EXTRA']; "
            "print(json.dumps({'type': 'pong', 'env': {k: os.environ.get(k) for k in keys}}), "
            "flush=True)")
    config = OperatorConfig.single_agent("cmd_1", "command", "third_party", "3rd", "gym", "X",
                                         command=[PY, "-c", code])
    launcher = OperatorLauncher(telemetry_dir=tmp_path / "telemetry", extra_env={"EXTRA": "1"})
    with launcher.launch(config, run_id="run-42") as handle:
        handle.send({"cmd": "ping"})
        env = handle.read_response(timeout=10)["env"]
    assert env == {"OPERATOR_ID": "cmd_1", "OPERATOR_RUN_ID": "run-42",
                   "TELEMETRY_DIR": str(tmp_path / "telemetry"),
                   "MOSAIC_PARENT_PID": str(os.getpid()), "MPI4PY_RC_INITIALIZE": "0",
                   "EXTRA": "1"}
    assert handle.run_id == "run-42" and handle.config.run_id == "run-42"


def test_batch_mode_runs_episodes_without_commands() -> None:
    config = OperatorConfig.single_agent("b", "random", "random_worker", "Batch", "gymnasium",
                                         "CartPole-v1", {"episodes": 2, "seed": 3}, max_steps=4)
    with OperatorLauncher().launch(config, interactive=False) as handle:
        replies = [handle.read_response(timeout=10) for _ in range(12)]
        assert handle.process.wait(timeout=5) == 0
    kinds = [r["type"] for r in replies]
    assert kinds == (["ready"] + ["step"] * 4 + ["episode_end"]) * 2
    assert [replies[0]["seed"], replies[6]["seed"]] == [3, 4]
    with pytest.raises(WorkerError, match="not interactive"):
        handle.send({"cmd": "ping"})


# --- config ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, fragment", [
    ({"operator_type": "baseline"}, "operator_type must be one of"),
    ({"operator_id": ""}, "operator_id"),
    ({"max_steps": -1}, "max_steps"),
    ({"operator_type": "command"}, "no command"),
    ({"operator_type": "command", "command": "run me"}, "not one string"),
    ({"settings": [1, 2]}, "mapping"),
    ({"worker_assignments": {"p": "random"}}, "WorkerAssignment"),
])
def test_bad_configs_raise_value_errors(kwargs: dict, fragment: str) -> None:
    base = {"operator_id": "op", "operator_type": "random", "worker_id": "w",
            "display_name": "Op", "env_name": "gymnasium", "task": "CartPole-v1"}
    with pytest.raises(ValueError, match=fragment):
        OperatorConfig(**{**base, **kwargs})


def test_configs_are_frozen_and_assignments_validated() -> None:
    config = OperatorConfig.single_agent("op", "llm", "w", "Op", "g", "t", {"model": "m"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.run_id = "x"  # type: ignore[misc]
    assert config.with_run_id("r").run_id == "r" and config.run_id == ""
    with pytest.raises(ValueError, match="worker_type"):
        WorkerAssignment("w", "robot")
    with pytest.raises(ValueError, match="no command"):
        WorkerAssignment("w", "command")
    with pytest.raises(ValueError, match="worker_assignments"):
        OperatorConfig.multi_agent("m", "M", "pettingzoo", "chess_v6", {})
    assignment = WorkerAssignment("w", "command", command=["a", "b"])
    assert assignment.command == ("a", "b")
