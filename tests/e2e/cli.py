"""Running the real ``mosaic`` command in a subprocess, and reading its store with sqlite3."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def mosaic_command() -> list[str]:
    script = Path(sys.executable).with_name("mosaic")
    return [str(script)] if script.exists() else [sys.executable, "-m", "mosaic"]


def run_mosaic(*args: str, timeout: float = 60.0, cwd: Path = REPO,
               **env: str) -> subprocess.CompletedProcess[str]:
    """Run the ``mosaic`` command to its end, in ``cwd`` (the repository's root unless told);
    ``env`` adds to its environment."""
    return subprocess.run([*mosaic_command(), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1", **env})


def start_mosaic(*args: str, **env: str) -> subprocess.Popen[str]:
    """Start the ``mosaic`` command; stdout and stderr are piped (read them with communicate)."""
    return subprocess.Popen([*mosaic_command(), *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", **env})


#: Seconds from Ctrl-C (or SIGTERM) to the end of the command, as the README promises.
SIGNAL_EXIT_S = 2.0


def signal_and_time(proc: subprocess.Popen[str], *signals: int, gap: float = 0.0,
                    pid: int | None = None) -> float:
    """Send ``signals`` to ``pid`` (default: ``proc``), ``gap`` s apart; return the seconds from
    the first one until ``proc`` (the mosaic command) exited (20 at most)."""
    target = proc.pid if pid is None else pid
    sent = time.monotonic()
    for index, sig in enumerate(signals):
        if index:
            time.sleep(gap)
        os.kill(target, sig)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=20)
    return time.monotonic() - sent


def finish(proc: subprocess.Popen[str]) -> str:
    """Make sure ``proc`` has ended (SIGKILL if not) and return its stderr."""
    if proc.poll() is None:
        proc.kill()
    return proc.communicate()[1]


def write_experiment(folder: Path, text: str, name: str = "experiment.yml") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def query(store: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(store) as connection:
        return connection.execute(sql, params).fetchall()


def check_continuation(start: Callable[..., tuple[int, str]], folder: Path,
                       episodes: int) -> None:
    """A run of ``2 * episodes`` episodes and the same work in two invocations (the second
    loading the first's phase checkpoint) give one digest and the same returns; the first half
    alone another digest. ``start(folder, name, store, episodes=..., load=...)`` is the test
    module's invocation of the real command (its exit code and stderr)."""
    whole = folder / "whole.sqlite"
    code, stderr = start(folder, "run", whole, episodes=2 * episodes)
    assert code == 0, stderr
    split = folder / "split.sqlite"
    code, stderr = start(folder, "run", split, episodes=episodes)
    assert code == 0, stderr
    code, stderr = start(folder, "run", split, episodes=episodes, load="load: {phase: main}")
    assert code == 0, stderr
    [(whole_digest,)] = query(whole, "SELECT digest FROM runs")
    [(first,), (second,)] = query(split, "SELECT digest FROM runs ORDER BY id")
    assert second == whole_digest and first != whole_digest
    returns = "SELECT total_return FROM episodes ORDER BY run_id, episode"
    assert query(split, returns) == query(whole, returns)


def wait_for_steps(store: Path, proc: subprocess.Popen[str], minimum: int = 1,
                   timeout: float = 30.0) -> int:
    """Wait until ``store`` holds at least ``minimum`` committed steps; return how many it holds.

    Fails at once if ``proc`` ends first, and after ``timeout`` s.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        if store.exists():
            try:
                count = int(query(store, "SELECT COUNT(*) FROM steps")[0][0])
            except sqlite3.Error:  # the schema may not be there yet
                count = 0
            if count >= minimum:
                return count
        time.sleep(0.05)
    raise AssertionError(f"{minimum} steps were not recorded within {timeout:g} s")


def wait_for_file(path: Path, proc: subprocess.Popen[str], timeout: float = 30.0) -> None:
    """Wait until ``path`` exists (a stage marker); fail if ``proc`` ends first."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, f"{path.name} did not appear within {timeout:g} s"
        time.sleep(0.02)


def assert_store_consistent(store: Path) -> None:
    """The counters of each run match the rows recorded for it."""
    for run_id, steps, episodes in query(store, "SELECT id, steps, episodes FROM runs"):
        assert query(store, "SELECT COUNT(*) FROM steps WHERE run_id = ?", run_id)[0][0] == steps
        recorded = query(store, "SELECT COUNT(*) FROM episodes WHERE run_id = ?", run_id)[0][0]
        assert recorded == episodes


CARTPOLE = """\
    uid: {uid}
    seed: {seed}
    runs: {runs}
    episodes: {episodes}
    placement: {placement}{settings}
    environments:
      - uid: cartpole
        env: {env}
        params: {params}
    agents:
      - uid: random
        muscle: {muscle}
"""


def cartpole(uid: str = "t", runs: int = 1, episodes: int = 3, placement: str = "thread",
             env: str = "gymnasium:CartPole-v1", params: str = "{}", seed: int = 7,
             muscle: str = "mosaic.agents:RandomMuscle", **settings: str) -> str:
    """An experiment of CartPole and one agent, ``random``, whose muscle is ``muscle`` (a class
    path, or ``{class: ..., params: {...}}``); ``settings`` are further top-level keys."""
    lines = "".join(f"\n    {key}: {value}" for key, value in settings.items())
    return CARTPOLE.format(uid=uid, seed=seed, runs=runs, episodes=episodes, placement=placement,
                           settings=lines, env=env, params=params, muscle=muscle)


STAGED = """\
    uid: stages
    seed: 7
    runs: {runs}
    episodes: {episodes}
    placement: process
    environments:
      - uid: cartpole
        env: tests.fixtures.stages:StallingCartPole
        params: {environment}
    agents:
      - uid: learner
        brain: {{class: tests.fixtures.stages:StallingBrain, params: {brain}}}
        muscle: {{class: tests.fixtures.stages:StallingMuscle, params: {muscle}}}
"""
#: The uid of each component of a staged experiment, by kind.
UIDS = {"environment": "cartpole", "muscle": "learner@cartpole", "brain": "learner"}


def staged_experiment(runs: int = 1, episodes: int = 100_000,
                      stall: tuple[str, str, Path] | None = None, hold: float = 20.0) -> str:
    """An experiment of tests.fixtures.stages components, each in a process of its own.

    ``stall`` = (kind, stage, marker) makes the component of that kind hold ``hold`` s at that
    stage, after writing its pid to ``marker``.
    """
    params = {"environment": "{}", "brain": "{}", "muscle": "{}"}
    if stall is not None:
        kind, stage, marker = stall
        params[kind] = f"{{stall_in: {stage}, marker: '{marker}', hold: {hold}}}"
    return STAGED.format(runs=runs, episodes=episodes, **params)


SELF_PLAY = """\
    uid: {uid}
    seed: {seed}
    episodes: {episodes}
    placement: thread
    environments:
      - uid: connect_four
        env: pettingzoo:classic.connect_four_v3
        policy_mapping: {{player_0: learner, player_1: past}}
    agents:
      - uid: learner
        brain: mosaic.agents.learners:PPOBrain
        muscle: mosaic.agents.learners:PPOMuscle
        params: {{rollout_steps: 16, epochs: 1, minibatch_size: 16, hidden_sizes: [8]}}
      - uid: past
        self_play: {{of: learner, snapshot_every: 2, pool_size: 2}}
    store:
      record_steps: episodes
"""


def selfplay(uid: str = "selfplay", episodes: int = 6, seed: int = 3) -> str:
    """A small self-play experiment: a PPO ``learner`` plays Connect Four (as ``player_0``)
    against ``past``, its own snapshots (as ``player_1``); about a second."""
    return SELF_PLAY.format(uid=uid, seed=seed, episodes=episodes)
