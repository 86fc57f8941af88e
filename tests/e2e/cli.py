"""Running the real ``mosaic`` command in a subprocess, and reading its store with sqlite3."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def mosaic_command() -> list[str]:
    script = Path(sys.executable).with_name("mosaic")
    return [str(script)] if script.exists() else [sys.executable, "-m", "mosaic"]


def run_mosaic(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*mosaic_command(), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def start_mosaic(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*mosaic_command(), *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


def write_experiment(folder: Path, text: str, name: str = "experiment.yml") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def query(store: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(store) as connection:
        return connection.execute(sql, params).fetchall()


CARTPOLE = """\
    uid: {uid}
    seed: 7
    runs: {runs}
    episodes: {episodes}
    placement: {placement}
    environments:
      - uid: cartpole
        env: {env}
        params: {params}
    agents:
      - uid: random
        muscle: mosaic.agents:RandomMuscle
"""


def cartpole(uid: str = "t", runs: int = 1, episodes: int = 3, placement: str = "thread",
             env: str = "gymnasium:CartPole-v1", params: str = "{}") -> str:
    return CARTPOLE.format(uid=uid, runs=runs, episodes=episodes, placement=placement, env=env,
                           params=params)
