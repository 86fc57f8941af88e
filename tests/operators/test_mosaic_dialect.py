"""MOSAIC's dialect both ways, against a stand-in that speaks exactly what MOSAIC's workers speak.

Reading: the stand-in (``mosaic_dialect_worker.py``) through every path of mosaic that drives a
worker: the handle, ``worker_conformance --dialect mosaic``, a ``command`` operator in
``mosaic evaluate`` and an ``OperatorMuscle`` in ``mosaic experiment-start``.
Writing: mosaic's workers started with MOSAIC's launcher flags, read by a driver that, like
MOSAIC's, sends no ids and reads MOSAIC's field names from raw lines.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mosaic.core.errors import WorkerProtocolError, WorkerTimeout
from mosaic.messages.codec import unpack
from mosaic.operators.worker._process import add_runtime_arguments, apply_launcher_flags
from mosaic.testing import check_worker
from tests.e2e.cli import query, run_mosaic, write_experiment

pytestmark = pytest.mark.timeout(90)

HERE = Path(__file__).parent
REPO = HERE.parents[1]
STAND_IN = HERE / "mosaic_dialect_worker.py"
GARBAGE = HERE / "misbehaving" / "garbage.py"


def stand_in(*extra: str, task: str = "CartPole-v1", run_id: str = "op_run_1") -> list[str]:
    """The stand-in's argv as MOSAIC's launcher builds it, plus test knobs."""
    return [sys.executable, str(STAND_IN), "--run-id", run_id, "--env-name", "gym", "--task",
            task, "--telemetry-dir", "var/telemetry", "--interactive", "--seed", "7", *extra]


def play_episode(handle: Any, seed: int) -> tuple[dict[str, Any], list[dict[str, Any]],
                                                  dict[str, Any]]:
    ready = handle.reset(seed)
    steps: list[dict[str, Any]] = []
    while True:
        step, end = handle.step(timeout=10)
        steps.append(step)
        if end is not None:
            return ready, steps, end


# --- reading: the handle -------------------------------------------------------------------------


@pytest.mark.parametrize(("imitate", "spelling", "base"), [
    ("random", "episode_end", 0), ("llm", "episode_done", 0), ("cleanrl", "episode_end", 1)])
def test_the_handle_reads_every_episode_end_spelling_and_skips_the_init_line(
    start: Callable, imitate: str, spelling: str, base: int,
) -> None:
    handle = start(stand_in("--imitate", imitate))
    for episode in (0, 1):
        ready, steps, end = play_episode(handle, seed=11 + episode)
        assert ready["type"] == "ready" and ready["episode_index"] == episode
        assert [s["step_index"] for s in steps] == list(range(len(steps)))  # counted from 0
        assert {s["episode_index"] for s in steps} == {episode}
        assert end["type"] == "episode_end"
        assert end["episode_length"] == len(steps)
        assert end["total_reward"] == pytest.approx(sum(s["reward"] for s in steps))
        assert (end["terminated"], end["truncated"]) == (steps[-1]["terminated"],
                                                         steps[-1]["truncated"])
    routing = handle.routing
    assert [line["type"] for line in routing.unsolicited] == ["init"]
    assert routing.unsolicited[0]["worker"] == f"{imitate}_worker"
    assert routing.step_base == base and routing.end_spellings == {spelling}
    assert not routing.echoes_ids
    handle.stop(timeout=30)  # ends as soon as the worker exits; generous for a busy machine
    assert handle.stop_outcome == "stopped" and handle.exit_code == 0


def test_a_late_reply_of_a_worker_without_ids_does_not_shift_the_next_ones(
    start: Callable,
) -> None:
    handle = start(stand_in("--slow-first-step", "2"))
    handle.reset(5)
    with pytest.raises(WorkerTimeout):
        handle.step(timeout=0.3)
    step, _ = handle.step(timeout=20)  # the late reply to the first step is recognised, dropped
    assert step["type"] == "step" and step["step_index"] == 1
    assert handle.reset(6)["type"] == "ready"


@pytest.mark.parametrize("agent_reply", ["agent_ready", "agent_initialized", "both"])
def test_selector_mode_takes_either_agent_reply_and_skips_the_extra_one(
    start: Callable, agent_reply: str,
) -> None:
    handle = start(stand_in("--agent-reply", agent_reply, task="tictactoe_v3"))
    ready = handle.init_agent("player_1", task="tictactoe_v3")
    assert ready["type"] == "agent_ready" and ready["player_id"] == "player_1"
    for _ in range(5):
        reply = handle.select_action(0, legal_actions=[2, 5], player_id="player_1", timeout=10)
        assert reply["type"] == "action_selected" and reply["action"] in (2, 5)
    extra = [line["type"] for line in handle.routing.unsolicited]
    assert extra == (["init", "agent_ready"] if agent_reply == "both" else ["init"])


def test_a_worker_of_neither_dialect_is_named_as_such(start: Callable) -> None:
    handle = start([sys.executable, str(GARBAGE)])
    with pytest.raises(WorkerProtocolError, match=r"not valid JSON.*mosaic's operator protocol "
                                                  r"or MOSAIC's dialect"):
        handle.ping(timeout=10)
    with pytest.raises(WorkerProtocolError, match=r"missing required field.*MOSAIC's dialect"):
        handle.ping(timeout=10)


# --- reading: conformance ------------------------------------------------------------------------


def test_worker_conformance_with_dialect_mosaic_passes_the_stand_in() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mosaic.testing.worker_conformance", "--dialect", "mosaic", "--",
         *stand_in()], capture_output=True, text=True, timeout=80)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 failed" in result.stdout and "mosaic dialect" in result.stdout


@pytest.mark.parametrize(("argv", "env_mode"), [
    (stand_in("--imitate", "llm"), "gym"),
    (stand_in("--imitate", "cleanrl"), "gym"),
    (stand_in("--agent-reply", "both", "--n-actions", "4", task="chess_v6"), "agent"),
])
def test_conformance_certifies_each_kind_of_mosaic_worker(argv: list[str], env_mode: str) -> None:
    report = check_worker(argv, env_mode=env_mode, dialect="mosaic", timeout=20)
    assert report.passed, str(report)


def test_conformance_blames_the_check_that_failed() -> None:
    report = check_worker(stand_in("--bad-return"), dialect="mosaic", timeout=20)
    [failure] = report.failures
    assert failure.name.startswith("step fields") and "total_reward" in failure.detail
    assert report["stop -> stopped, exit code 0"].passed

    native = check_worker(stand_in(), timeout=20)  # MOSAIC's worker held to mosaic's protocol
    assert "Unknown command: ping" in native["ping -> pong"].detail
    assert not native["no unsolicited lines"].passed
    assert "--dialect mosaic" in native["no unsolicited lines"].detail
    assert not native["id echoed in every reply"].passed


def test_conformance_names_a_worker_of_neither_dialect() -> None:
    report = check_worker([sys.executable, str(GARBAGE)], dialect="mosaic", timeout=10)
    first = report.checks[0]
    assert first.passed is False
    assert "not valid JSON" in first.detail and "MOSAIC's dialect" in first.detail


# --- reading: mosaic evaluate and experiment-start ------------------------------------------------


@pytest.mark.e2e
def test_mosaic_evaluate_runs_mosaic_workers_as_command_operators(tmp_path: Path) -> None:
    operators = [
        {"id": name, "type": "command", "env": "CartPole-v1", "command": stand_in(*extra)}
        for name, extra in (("random-style", ()), ("llm-style", ("--imitate", "llm")),
                            ("cleanrl-style", ("--imitate", "cleanrl")))
    ]
    path = tmp_path / "evaluation.yml"
    path.write_text(yaml.safe_dump({
        "uid": "mosaic-workers", "operators": operators, "seeds": [3], "episodes": 2,
        "timeouts": {"step": 20, "reset": 30, "stop": 3},
        "telemetry": str(tmp_path / "telemetry.jsonl")}, sort_keys=False))
    result = run_mosaic("evaluate", str(path), "--store", str(tmp_path / "results.sqlite"),
                        "--quiet", timeout=80)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    records = [json.loads(line) for line in (tmp_path / "telemetry.jsonl").read_text().splitlines()]
    for name in ("random-style", "llm-style", "cleanrl-style"):
        episodes = [r for r in records if r["kind"] == "episode" and r["operator"] == name]
        assert len(episodes) == 2, name
        for episode in episodes:
            steps = [r["step_index"] for r in records if r["kind"] == "step"
                     and r["operator"] == name and r["episode"] == episode["episode"]]
            assert steps == list(range(episode["length"])), name
            assert episode["ended_by"] == "environment" and episode["length"] > 0
    assert not [r for r in records if r["kind"] == "failure"]


@pytest.mark.e2e
@pytest.mark.parametrize("with_task", [True, False], ids=["--task", "task-key-only"])
def test_an_operator_muscle_plays_a_mosaic_worker_in_experiment_start(
        tmp_path: Path, with_task: bool) -> None:
    """Without ``--task`` in the command (the README's form: the ``task:`` key only), the run
    failed at the first reset: MOSAIC's workers answer one with "--task is required"."""
    command = stand_in("--agent-reply", "both", "--n-actions", "4", task="frozenlake")
    if not with_task:
        at = command.index("--task")
        del command[at:at + 2]
    text = f"""\
        uid: mosaic-worker-agent
        seed: 3
        episodes: 12
        placement: thread
        environments:
          - uid: lake
            env: gymnasium:FrozenLake-v1
            params: {{is_slippery: false, max_episode_steps: 20}}
        agents:
          - uid: walker
            muscle:
              class: mosaic.operators:OperatorMuscle
              params:
                operator:
                  type: command
                  id: mosaic-worker
                  task: frozenlake
                  command: {json.dumps(command)}
                timeout: 10
        """
    path = write_experiment(tmp_path, text)
    store = tmp_path / "results.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store), timeout=80)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    [(status, episodes, steps, error)] = query(store,
                                               "SELECT status, episodes, steps, error FROM runs")
    assert (status, episodes, error) == ("finished", 12, None)
    assert steps >= 24  # no hole is less than 2 steps from the start
    actions = {unpack(row[0]) for row in query(store, "SELECT action FROM steps")}
    # Drawn from the 4 actions the stand-in was told of. Its draws are not seeded here: in 24
    # or more uniform draws, fewer than 3 distinct actions come up less than once in 10^6.
    assert actions <= {0, 1, 2, 3} and len(actions) > 2


# --- writing: mosaic's workers under a MOSAIC-style driver ---------------------------------------


class MosaicStyleDriver:
    """Drives a worker as MOSAIC's launcher and handle do: MOSAIC's flags, no request ids, raw
    lines read in order. Each read waits at most ``timeout`` seconds."""

    def __init__(self, argv: list[str], timeout: float = 20.0) -> None:
        self.timeout = timeout
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE,
                                        env={**os.environ, **workers_on_path()})
        self._buffer = b""

    def send(self, **command: Any) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command).encode() + b"\n")
        self.process.stdin.flush()

    def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        deadline = time.monotonic() + self.timeout
        fd = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no line within {self.timeout} s"
            if select.select([fd], [], [], remaining)[0]:
                chunk = os.read(fd, 65536)
                assert chunk, f"the worker exited: {self.stderr()}"
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def stderr(self) -> str:
        if self.process.poll() is None:
            return ""
        assert self.process.stderr is not None
        return self.process.stderr.read().decode(errors="replace")

    def close(self) -> int:
        if self.process.poll() is None:
            self.process.kill()
        code = self.process.wait(timeout=10)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        return code


@pytest.fixture
def drive() -> Iterator[Callable[..., MosaicStyleDriver]]:
    drivers: list[MosaicStyleDriver] = []

    def make(argv: list[str]) -> MosaicStyleDriver:
        drivers.append(MosaicStyleDriver(argv))
        return drivers[-1]

    yield make
    for driver in drivers:
        driver.close()


def workers_on_path() -> dict[str, str]:
    """MOSAIC runs ``python -m random_worker``: mosaic's workers/ folder goes on the path."""
    return {"PYTHONPATH": os.pathsep.join([str(REPO / "workers"), str(REPO),
                                           os.environ.get("PYTHONPATH", "")])}


def launched_by_mosaic(module: str, *extra: str, task: str = "FrozenLake-v1",
                       interactive: bool = True) -> list[str]:
    """The argv MOSAIC's OperatorLauncher builds for a worker module (``random_worker``)."""
    return [sys.executable, "-m", module, "--run-id", "op_random_1", "--env-name", "gym",
            "--task", task, "--telemetry-dir", "var/operators/telemetry",
            *(["--interactive"] if interactive else []), "--seed", "42", *extra]


@pytest.mark.parametrize(("module", "extra"), [
    ("random_worker", ()),
    ("passive_worker", ()),
    ("scripted_worker", ("--policy", "workers.scripted_worker:first_legal")),
])
def test_mosaic_workers_speak_mosaics_dialect_to_a_mosaic_style_driver(
    drive: Callable[..., MosaicStyleDriver], module: str, extra: tuple[str, ...],
) -> None:
    driver = drive(launched_by_mosaic(module, *extra))
    init = driver.read()
    assert init == {"type": "init", "run_id": "op_random_1", "worker": module,
                    "behavior": module.removesuffix("_worker")}
    for episode in (0, 1):
        driver.send(cmd="reset", seed=3 + episode)
        ready = driver.read()
        assert ready["type"] == "ready" and "id" not in ready
        assert (ready["episode_index"], ready["step_index"]) == (episode, 0)
        assert ready["run_id"] == "op_random_1" and ready["env_id"] == "FrozenLake-v1"
        total, count = 0.0, 0
        while True:
            driver.send(cmd="step")
            step = driver.read()
            assert step["type"] == "step"
            assert (step["episode_index"], step["step_index"]) == (episode, count)
            total += step["reward"]
            count += 1
            if step["terminated"] or step["truncated"]:
                break
        end = driver.read()
        assert end["type"] == "episode_end"
        assert (end["run_id"], end["episode_index"]) == ("op_random_1", episode)
        assert (end["episode_steps"], end["episode_return"]) == (count, total)
        assert (end["terminated"], end["truncated"]) == (step["terminated"], step["truncated"])
    driver.send(cmd="stop")
    assert driver.read() == {"type": "stopped"}
    assert driver.process.wait(timeout=10) == 0


def test_selector_mode_takes_the_action_space_from_game_name(
    drive: Callable[..., MosaicStyleDriver],
) -> None:
    driver = drive(launched_by_mosaic("random_worker", task="tictactoe_v3"))
    assert driver.read()["type"] == "init"
    driver.send(cmd="init_agent", game_name="tictactoe_v3", player_id="player_1")
    assert driver.read()["type"] == "agent_ready"
    actions = set()
    for _ in range(40):
        driver.send(cmd="select_action", observation=[0] * 9, player_id="player_1")
        reply = driver.read()
        assert reply["type"] == "action_selected", reply
        actions.add(reply["action"])
    assert actions <= set(range(9)) and len(actions) > 4  # tic-tac-toe's nine squares


@pytest.mark.parametrize(("module", "extra"), [("random_worker", ()), ("passive_worker", ())])
def test_without_interactive_the_workers_serve_reset_and_step_as_mosaics_do(
    drive: Callable[..., MosaicStyleDriver], module: str, extra: tuple[str, ...],
) -> None:
    """They played an episode on their own and ignored stdin, so MOSAIC's harness failed
    ("worker closed stdout (reset)"); only MOSAIC's LLM worker plays alone then."""
    driver = drive(launched_by_mosaic(module, *extra, task="CartPole-v1", interactive=False))
    assert driver.read()["type"] == "init"
    driver.send(cmd="reset", seed=5)
    ready = driver.read()
    assert ready["type"] == "ready" and ready["env_id"] == "CartPole-v1", ready
    driver.send(cmd="step")
    assert driver.read()["type"] == "step"
    driver.send(cmd="stop")
    assert driver.read() == {"type": "stopped"}
    assert driver.process.wait(timeout=10) == 0


def test_without_interactive_only_the_llm_worker_plays_alone() -> None:
    def settled(*argv: str, plays_alone: bool) -> argparse.Namespace:
        parser = argparse.ArgumentParser()
        add_runtime_arguments(parser)
        args = parser.parse_args(list(argv))
        apply_launcher_flags(args, plays_alone=plays_alone)
        return args

    launched = ("--task", "CartPole-v1", "--env-name", "gym", "--telemetry-dir", "t")
    assert settled(*launched, plays_alone=True).batch
    assert not settled(*launched, plays_alone=False).batch
    assert not settled(*launched, "--interactive", plays_alone=True).batch
    assert settled(*launched, plays_alone=False).env_id == "CartPole-v1"


class OneLinePerPollReader:
    """Reads a worker's stdout as MOSAIC's OperatorProcessHandle does: ``select`` on the pipe,
    then one ``readline`` from a line-buffered text file, one line per poll."""

    def __init__(self, argv: list[str]) -> None:
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True, bufsize=1,
                                        env={**os.environ, **workers_on_path()})

    def send(self, **command: Any) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def poll(self, timeout: float) -> dict[str, Any] | None:
        assert self.process.stdout is not None
        if not select.select([self.process.stdout], [], [], timeout)[0]:
            return None
        line = self.process.stdout.readline()
        return json.loads(line) if line else None

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


def test_a_reader_that_takes_one_line_per_poll_gets_every_episode_end() -> None:
    """MOSAIC's handle saw 1 of 39 episode ends of mosaic's worker: the ``episode_end`` came in
    the same write as its ``step`` and stayed in the reader's buffer, where ``select`` does not
    look. Each poll here waits at most 5 s; a line left in the buffer is never seen."""
    reader = OneLinePerPollReader(launched_by_mosaic("random_worker", task="FrozenLake-v1",
                                                     interactive=False))
    try:
        assert (reader.poll(20) or {}).get("type") == "init"
        ends = 0
        for episode in range(12):
            reader.send(cmd="reset", seed=episode)
            assert (reader.poll(5) or {}).get("type") == "ready"
            while True:
                reader.send(cmd="step")
                step = reader.poll(5)
                assert step is not None and step["type"] == "step", step
                if step["terminated"] or step["truncated"]:
                    break
            end = reader.poll(5)
            assert end is not None and end["type"] == "episode_end", f"episode {episode}: {end}"
            ends += 1
        assert ends == 12
        reader.send(cmd="stop")
        assert reader.poll(5) == {"type": "stopped"}
    finally:
        reader.close()


@pytest.mark.parametrize("interactive", [True, False], ids=["--interactive", "env-owning"])
@pytest.mark.parametrize(("module", "extra"), [
    ("random_worker", ()),
    ("passive_worker", ()),
    ("scripted_worker", ("--policy", "workers.scripted_worker:first_legal")),
])
def test_mosaic_workers_started_by_mosaics_launcher_pass_mosaic_dialect_conformance(
        module: str, extra: tuple[str, ...], interactive: bool) -> None:
    """In both of the forms MOSAIC's launcher starts a worker in."""
    argv = launched_by_mosaic(module, *extra, task="CartPole-v1", interactive=interactive)
    report = check_worker(argv, dialect="mosaic", timeout=20, env=workers_on_path())
    assert report.passed, str(report)
    if module != "scripted_worker":  # claimed with --reproducible only
        assert report["same seed, same trajectory"].passed


def test_without_mosaics_flags_the_workers_keep_mosaics_own_protocol(
    drive: Callable[..., MosaicStyleDriver],
) -> None:
    driver = drive([sys.executable, "-m", "workers.random_worker", "--env-id", "FrozenLake-v1"])
    driver.send(cmd="reset", seed=1, id=1)
    ready = driver.read()  # no init line first
    assert ready["type"] == "ready" and ready["id"] == 1 and "episode_index" not in ready
