"""Set-up of a PyTorch brain beside CPU hogs: how often a healthy run is failed as hung.

Each trial runs a short experiment whose brain is PyTorch PPO (importing torch is most of its
set-up) and whose muscle is NumPy PPO, each in a process of its own, with the default
``timeouts.setup`` (30 s) or ``--setup`` seconds, beside ``--hogs`` busy loops that keep every
CPU full. A trial that
does not finish is a false failure: nothing in it hangs. It also prints the median time from
the command's start to its end, against the same trials without hogs measured in the same run.

Usage: python benchmarks/setup_under_load.py [--trials 20] [--hogs 4] [--setup 30]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

HOG = "import time\nend = time.time() + 3600\nwhile time.time() < end: pass"

EXPERIMENT = """\
uid: setup-under-load
seed: {seed}
episodes: 2
placement: process
timeouts: {{setup: {setup}}}
environments:
  - uid: cartpole
    env: gymnasium:CartPole-v1
agents:
  - uid: learner
    brain: mosaic.agents.learners.torch_ppo:TorchPPOBrain
    muscle: mosaic.agents.learners:PPOMuscle
    placement: {{brain: process, muscle: process}}
"""


def trial(folder: Path, seed: int, setup: float) -> tuple[bool, float, str]:
    """One run: whether it finished, its wall time, the last line it printed."""
    path = folder / f"trial-{seed}.yml"
    path.write_text(EXPERIMENT.format(seed=seed, setup=setup))
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mosaic", "experiment-start", str(path),
                           "--store", str(folder / f"trial-{seed}.sqlite"), "-q"],
                          cwd=REPO, capture_output=True, text=True, timeout=setup * 12 + 120)
    took = time.perf_counter() - started
    last = (done.stderr.strip().splitlines() or [""])[-1]
    return done.returncode == 0, took, last


def series(trials: int, setup: float, hogs: int) -> tuple[int, list[float], list[str]]:
    running = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(hogs)]
    failures, times, errors = 0, [], []
    try:
        with tempfile.TemporaryDirectory(prefix="mosaic-setup-") as folder:
            for seed in range(trials):
                ok, took, last = trial(Path(folder), seed, setup)
                times.append(took)
                if not ok:
                    failures += 1
                    errors.append(last)
    finally:
        for hog in running:
            hog.kill()
            hog.wait()
    return failures, times, errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--hogs", type=int, default=4)
    parser.add_argument("--setup", type=float, default=30.0, help="timeouts.setup, seconds")
    parser.add_argument("--quiet-trials", type=int, default=3,
                        help="trials without hogs, for the reference time")
    args = parser.parse_args()
    _, quiet, _ = series(args.quiet_trials, args.setup, 0)
    failures, loaded, errors = series(args.trials, args.setup, args.hogs)
    reference = statistics.median(quiet)
    print(f"PyTorch PPO brain in a process, timeouts.setup {args.setup:g} s")
    print(f"  without hogs: median {reference:.1f} s over {len(quiet)} trials")
    print(f"  beside {args.hogs} CPU hogs: median {statistics.median(loaded):.1f} s "
          f"({statistics.median(loaded) / reference:.2f}x), max {max(loaded):.1f} s")
    print(f"false failures: {failures} of {args.trials}")
    for error in errors:
        print(f"  {error}")


if __name__ == "__main__":
    main()
