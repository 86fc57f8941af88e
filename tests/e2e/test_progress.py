"""What ``mosaic experiment-start`` shows while it runs: bars with percentage and ETA on a
terminal, plain lines without one (a CI log), nothing with ``--quiet``."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time

import pytest

from tests.e2e.cli import REPO, cartpole, mosaic_command, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: Enough episodes of a random CartPole to be seen stepping for a while, on any machine.
EPISODES = 300


def _in_a_terminal(*args: str, timeout: float = 150.0) -> tuple[int, str]:
    """Run mosaic with stdout and stderr on a pseudo-terminal; its exit code and the screen."""
    master, slave = pty.openpty()
    process = subprocess.Popen([*mosaic_command(), *args], cwd=REPO, stdin=slave, stdout=slave,
                               stderr=slave, start_new_session=True,
                               env={**os.environ, "TERM": "xterm", "COLUMNS": "160"})
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the program exited and closed the terminal
                    chunk = b""
                if not chunk:
                    break
                chunks.append(chunk)
            elif process.poll() is not None:
                break
        code = process.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(master)
    return code, b"".join(chunks).decode(errors="replace")


def test_a_terminal_shows_a_bar_with_percentage_eta_and_recent_mean(tmp_path, process_tag):
    path = write_experiment(tmp_path, cartpole(episodes=EPISODES, runs=2))
    code, screen = _in_a_terminal("experiment-start", str(path), "--jobs", "2")
    assert code == 0, screen
    text = ANSI.sub("", screen)
    assert re.search(r"run [12]/2 .*\d+%", text), text
    bars = [line for line in text.replace("\r", "\n").splitlines() if "ETA" in line]
    assert bars and all("steps/s" in bar and "mean return (last 100)" in bar for bar in bars)
    assert "run 2/2" in text and "1,000" not in text.split("run 1/2")[0]


def test_without_a_terminal_progress_is_plain_lines(tmp_path, process_tag):
    path = write_experiment(tmp_path, cartpole(episodes=EPISODES))
    result = run_mosaic("experiment-start", str(path), timeout=150)
    assert result.returncode == 0, result.stderr
    assert "\r" not in result.stderr and "\x1b[" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("run 1/1: ")]
    assert lines, result.stderr
    assert all(re.search(r": \d+% \(\d+/300 episodes\), ETA .*steps/s", line) for line in lines)
    assert "mean return (last 100)" in result.stdout.splitlines()[1]  # the summary's header

    quiet = run_mosaic("experiment-start", str(path), "--quiet", timeout=150)
    assert quiet.returncode == 0, quiet.stderr
    assert "%" not in quiet.stderr and not quiet.stdout


def test_a_learner_shows_its_progress_in_env_steps(tmp_path, process_tag):
    text = cartpole(episodes=40, muscle="mosaic.agents.learners:PPOMuscle").replace(
        "muscle: mosaic.agents.learners:PPOMuscle",
        "brain: mosaic.agents.learners:PPOBrain\n        muscle: mosaic.agents.learners:PPOMuscle")
    path = write_experiment(tmp_path, text)
    result = run_mosaic("experiment-start", str(path), timeout=150)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("run 1/1: ")]
    assert lines, result.stderr
    counts = [re.search(r": (\d+)% \(([\d,]+)/([\d,]+) env steps\), ETA (-|\d+ s), [\d,]+ "
                        r"steps/s", line) for line in lines]
    assert all(counts), lines
    # The last line is the run's end: every step it took, of as many.
    (steps,) = [line for line in result.stdout.splitlines() if line.startswith("t-")]
    assert counts[-1].group(1) == "100" and counts[-1].group(2) == counts[-1].group(3)
    assert counts[-1].group(2) == steps.split()[4]
