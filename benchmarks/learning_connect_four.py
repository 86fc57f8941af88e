"""Does PPO learn Connect Four against a random player, from PettingZoo's game as it is?

Run: ``python benchmarks/learning_connect_four.py [--seeds 0 1 2 3] [--target 0.9]``.
For each seed it runs ``examples/connect_four_ppo.yml`` (train, then a greedy test phase)
through the real ``mosaic experiment-start`` with that seed, and prints the greedy test
phase's win rate of the learner (player_0, moving first), its loss and draw rates, the
training phase's steps and the command's wall time. As a baseline measured in the same run,
the same file with a random learner (``RandomMuscle``) plays the test phase's episodes; the
ratio of the win rates follows.

Exits with 1 if a seed's greedy win rate is below ``--target``. Takes about 15 s per seed on
one free core.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "connect_four_ppo.yml"
LEARNER_SEAT = "player_0"


def run_example(text: str, folder: Path, name: str) -> tuple[float, Path]:
    """Run the experiment ``text`` through the CLI; return its wall time and its store."""
    path = folder / f"{name}.yml"
    path.write_text(text)
    store = folder / f"{name}.sqlite"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENBLAS_NUM_THREADS": "1",
           "OMP_NUM_THREADS": "1"}
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "mosaic", "experiment-start", str(path),
                             "--store", str(store), "--quiet"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{name} failed:\n{result.stderr}")
    return seconds, store


def outcomes(store: Path, phase: str) -> tuple[float, float, float, int, int]:
    """Win, loss and draw rates of the learner's seat in ``phase``, its episodes and steps."""
    with closing(sqlite3.connect(store)) as db:
        run_id, steps = db.execute("SELECT id, steps FROM runs WHERE uid LIKE ?",
                                   (f"%-{phase}",)).fetchone()
        returns = [json.loads(text)[LEARNER_SEAT] for (text,) in db.execute(
            "SELECT returns FROM episodes WHERE run_id = ? AND evaluation = 0", (run_id,))]
    n = len(returns)
    wins, losses = sum(r > 0 for r in returns), sum(r < 0 for r in returns)
    return wins / n, losses / n, (n - wins - losses) / n, n, int(steps)


def with_seed(text: str, seed: int) -> str:
    if "\nseed: 0\n" not in text:
        raise SystemExit(f"{EXAMPLE} has no 'seed: 0' line to change")
    return text.replace("\nseed: 0\n", f"\nseed: {seed}\n", 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--target", type=float, default=0.9, help="greedy test win rate")
    args = parser.parse_args()
    text = EXAMPLE.read_text()
    learner_muscle = "muscle: mosaic.agents.learners:PPOMuscle"
    if learner_muscle not in text:
        raise SystemExit(f"{EXAMPLE} no longer names {learner_muscle}")

    print(f"Connect Four (connect_four_v3), PPO as {LEARNER_SEAT} against a random player: "
          f"{EXAMPLE.relative_to(REPO)}")
    rates, baseline_rates, times = [], [], []
    missed = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for seed in args.seeds:
            seconds, store = run_example(with_seed(text, seed), folder, f"ppo-{seed}")
            wins, losses, draws, n, _ = outcomes(store, "test")
            *_, train_steps = outcomes(store, "train")
            # The baseline: the same file and seed with a random learner, test phase only.
            random_text = with_seed(text, seed).replace(learner_muscle,
                                                        "muscle: mosaic.agents:RandomMuscle")
            random_text = random_text.replace("brain: mosaic.agents.learners:PPOBrain",
                                              "brain: mosaic.agents:NoOpBrain")
            _, random_store = run_example(random_text, folder, f"random-{seed}")
            baseline = outcomes(random_store, "test")[0]
            rates.append(wins)
            baseline_rates.append(baseline)
            times.append(seconds)
            print(f"  seed {seed}: greedy test win rate {wins:.3f} (loss {losses:.3f}, draw "
                  f"{draws:.3f}, {n} games); training {train_steps} env steps; "
                  f"{seconds:.1f} s wall (train and test); random learner's win rate "
                  f"{baseline:.3f} ({wins / baseline:.2f}x)")
            if wins < args.target:
                missed.append(seed)
    print(f"  median win rate {statistics.median(rates):.3f} against {args.target} "
          f"(random learner {statistics.median(baseline_rates):.3f}); median wall time "
          f"{statistics.median(times):.1f} s")
    if missed:
        print(f"TARGET MISSED for seeds {missed}")
        return 1
    print("target met for every seed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
