"""Manual mode driven through a pseudo-terminal, as a person would use it."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mosaic.operators.evaluation.manual import ManualSession
from mosaic.operators.evaluation.schema import load_evaluation
from mosaic.operators.evaluation.script import operator_config_for
from tests.processes import children_of

pytestmark = pytest.mark.timeout(60)

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
FLAKY = Path(__file__).parent / "script_fixtures" / "flaky_worker.py"


class Terminal:
    """``python -m mosaic manual FILE`` on the slave side of a pty."""

    def __init__(self, path: Path, cwd: Path) -> None:
        master, slave = pty.openpty()
        self.master = master
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mosaic", "manual", str(path)],
            stdin=slave, stdout=slave, stderr=slave, cwd=cwd, start_new_session=True,
            env={**os.environ, "TERM": "xterm"},
        )
        os.close(slave)
        self.screen = ""

    def read_until(self, text: str, timeout: float = 20.0) -> str:
        """Everything the program wrote until ``text`` appeared (colour codes stripped)."""
        deadline = time.monotonic() + timeout
        while text not in self.screen:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{text!r} did not appear; the screen was:\n{self.screen}")
            ready, _, _ = select.select([self.master], [], [], remaining)
            if not ready:
                continue
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # EIO: the program exited and closed the terminal
                chunk = b""
            if not chunk:
                raise AssertionError(f"exited before {text!r}; the screen was:\n{self.screen}")
            self.screen += ANSI.sub("", chunk.decode("utf-8", "replace")).replace("\r\n", "\n")
        before, _, after = self.screen.partition(text)
        self.screen = after
        return before + text

    def command(self, keys: str) -> str:
        """Type ``keys`` and Enter; returns the screen up to the next prompt."""
        os.write(self.master, keys.encode() + b"\n")
        return self.read_until("\n> ")

    def close(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)  # its workers die with it (parent death)
            self.process.wait(timeout=10)
        os.close(self.master)


@pytest.fixture
def frozenlake(tmp_path: Path) -> Path:
    path = tmp_path / "manual.yml"
    path.write_text(yaml.safe_dump({
        "uid": "manual-test",
        "operators": [
            {"id": "random", "type": "random", "display_name": "Random", "env": "FrozenLake-v1",
             "env_kwargs": {"is_slippery": False}},
            {"id": "passive", "type": "passive", "env": "FrozenLake-v1",
             "env_kwargs": {"is_slippery": False}},
        ],
        "seeds": [42, 5],
        "max_steps": 6,
        "telemetry": str(tmp_path / "manual.jsonl"),
        "timeouts": {"step": 20, "reset": 30, "stop": 3},
    }, sort_keys=False))
    return path


@pytest.fixture
def terminal(frozenlake: Path, tmp_path: Path) -> Iterator[Terminal]:
    term = Terminal(frozenlake, tmp_path)
    try:
        yield term
    finally:
        term.close()


def test_step_reset_and_quit_in_a_terminal(terminal: Terminal, tmp_path: Path) -> None:
    start = terminal.read_until("\n> ", timeout=30)
    assert "[random] Random  episode 0 (seed 42)  step 0  (ready)" in start
    assert "[passive]  episode 0 (seed 42)" in start
    assert start.count("HFFG") == 2  # both lakes are drawn

    screen = terminal.command("s")
    assert "[random] Random  episode 0 (seed 42)  step 1  action" in screen
    assert "[passive]  episode 0 (seed 42)  step 1  action 0  reward 0  return 0" in screen
    assert "(Left)" in screen  # the render of the passive operator's move

    screen = terminal.command("n 10")  # max_steps 6: every episode is over after 6 steps
    assert "[passive]  episode 0 (seed 42)  step 6  action 0" in screen
    assert "step 7" not in screen
    assert screen.count("episode over") == 2

    assert "every episode is over" in terminal.command("s")

    screen = terminal.command("r")  # the next scheduled seed
    assert "episode 1 (seed 5)  step 0  (ready)" in screen
    screen = terminal.command("r 7")
    assert "[passive]  episode 2 (seed 7)  step 0" in screen
    terminal.command("s")
    assert "[passive]  episode 2 (seed 7)  step 2" in terminal.command("s")

    assert "Reset All" in terminal.command("h")
    assert "unknown command 'x'" in terminal.command("x")

    workers = set(children_of(terminal.process.pid))
    assert len(workers) == 2
    os.write(terminal.master, b"q\n")
    terminal.read_until("stopped every worker")
    assert terminal.process.wait(timeout=20) == 0
    assert not any(Path(f"/proc/{pid}").exists() for pid in workers)

    lines = [json.loads(line) for line in (tmp_path / "manual.jsonl").read_text().splitlines()]
    kinds = [record["kind"] for record in lines]
    assert kinds[0] == "run" and kinds[-1] == "run_end"
    passive_steps = [r for r in lines if r["kind"] == "step" and r["operator"] == "passive"]
    assert [(r["episode"], r["step_index"]) for r in passive_steps] == [
        *((0, i) for i in range(6)), (2, 0), (2, 1)]
    assert kinds.count("episode") in (2, 3)  # the random walk may fall in a hole at once
    assert {r["seed"] for r in lines if r["kind"] == "step"} == {42, 7}
    # episode 1 (seed 5) was reset away by "r 7" before any step; episode 2 was cut short by
    # q after two steps, and is recorded as the partial episode it is
    abandoned = [(r["operator"], r["episode"], r["seed"], r["ended_by"], r["length"])
                 for r in lines if r["kind"] == "episode_abandoned"]
    assert abandoned[:2] == [("random", 1, 5, "reset", 0), ("passive", 1, 5, "reset", 0)]
    assert ("passive", 2, 7, "quit", 2) in abandoned[2:]  # always left: still on the lake
    random_ended = [r for r in lines if r["kind"] == "episode" and r["episode"] == 2]
    assert len(abandoned) + len(random_ended) == 4
    assert kinds[-2:] == ["episode_abandoned", "run_end"]


def test_end_of_input_quits_and_stops_the_workers(terminal: Terminal) -> None:
    terminal.read_until("\n> ", timeout=30)
    os.write(terminal.master, b"\x04")  # Ctrl-D on an empty line: end of input
    terminal.read_until("stopped every worker")
    assert terminal.process.wait(timeout=20) == 0


# -- the session object, without a terminal --------------------------------------------------------


def test_session_lock_step_and_a_failing_operator(frozenlake: Path, tmp_path: Path) -> None:
    config = load_evaluation(frozenlake)
    configs = [operator_config_for(spec, config, render=True) for spec in config.operators]
    from mosaic.operators.api.config import OperatorConfig

    configs.append(OperatorConfig.single_agent(
        "flaky", "command", "flaky", "Flaky", "gymnasium", "FrozenLake-v1",
        command=[sys.executable, str(FLAKY), "--mode", "crash", "--die-after", "1"]))
    pids: list[int] = []
    session = ManualSession(configs, seed=42, telemetry_path=tmp_path / "s.jsonl",
                            timeouts=config.timeouts)
    with session:
        pids = session.pids
        assert len(pids) == 3
        assert session.step_all() == 3
        views: dict[str, Any] = {v.operator_id: v for v in session.views()}
        assert views["passive"].last_action == 0 and views["passive"].steps == 1
        assert views["random"].render_text is not None and "HFFG" in views["random"].render_text
        assert session.step_all() == 2  # flaky dies on its second step
        views = {v.operator_id: v for v in session.views()}
        assert views["flaky"].failure is not None and "exit code 3" in views["flaky"].failure
        assert views["passive"].steps == 2 and views["passive"].failure is None
        session.reset_all(9)
        assert {v.seed for v in session.views() if v.failure is None} == {9}
        assert session.step_n(100) <= 6  # max_steps ends every episode
        assert not session.any_playing and session.failed
    for pid in pids:  # every worker was reaped
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_run_manual_on_operator_configs_with_plain_streams(tmp_path: Path) -> None:
    import io

    from mosaic.operators.api.config import OperatorConfig
    from mosaic.operators.evaluation.manual import run_manual

    configs = [
        OperatorConfig.single_agent("left", "passive", "passive_worker", "Left", "gymnasium",
                                    "CartPole-v1", max_steps=3),
        OperatorConfig.single_agent("dice", "random", "random_worker", "Dice", "gymnasium",
                                    "CartPole-v1", max_steps=3),
    ]
    output = io.StringIO()
    code = run_manual(configs, input=io.StringIO("s\nn 5\nr\nr 3\nq\n"), output=output,
                      telemetry=tmp_path / "m.jsonl")
    assert code == 0
    screen = output.getvalue()
    assert "[left] Left  episode 0 (seed 0)  step 1  action 0" in screen
    assert "episode over (truncated): return 3 in 3 steps" in screen  # max_steps 3
    assert "episode 1 (seed 0)  step 0" in screen and "episode 2 (seed 3)  step 0" in screen
    kinds = [json.loads(line)["kind"] for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert kinds.count("step") == 6 and kinds.count("episode") == 2
