"""Store size and writer time with image observations: each ``record_steps`` setting, with and
without compression, against the uncompressed store measured in the same run.

1. Runs PettingZoo's cooperative_pong (parallel API: two paddles, each observing a 280x480 RGB
   frame every step) through the real ``mosaic experiment-start`` once per ``record_steps``
   setting (all, episodes, none) and prints the store's size per step and the command's wall
   time. ``render_mode: rgb_array`` matters: without it the game never draws its screen, every
   frame is black, and compression looks far better than it is.
2. Reads the steps of the ``all`` store back and writes them again in this process with two
   StoreWriters, one compressing large values (the default) and one not (``compress_above=None``):
   the baseline. It prints both store sizes per step, their ratio, and each writer's time from the
   first record to the end of ``close()`` (encoding, compression and SQLite).

Usage: python benchmarks/store_size.py [--episodes 2] [--max-cycles 60]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mosaic.store import StoreWriter, open_store

EXPERIMENT = """\
uid: store-size
seed: 1
episodes: {episodes}
environments:
  - uid: pong
    env: pettingzoo:butterfly.cooperative_pong_v6
    params: {{api: parallel, render_mode: rgb_array, max_cycles: {max_cycles}}}
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
store:
  record_steps: {setting}
"""

MB = 1024 * 1024


def mosaic_command() -> list[str]:
    script = Path(sys.executable).with_name("mosaic")
    return [str(script)] if script.exists() else [sys.executable, "-m", "mosaic"]


def size(store: Path) -> int:
    """Bytes of the SQLite store, with its write-ahead log if one is left."""
    return sum(p.stat().st_size for p in store.parent.glob(store.name + "*"))


def through_cli(folder: Path, setting: str, episodes: int, max_cycles: int) -> dict[str, Any]:
    experiment = folder / f"{setting}.yml"
    experiment.write_text(EXPERIMENT.format(episodes=episodes, max_cycles=max_cycles,
                                            setting=setting))
    store = folder / f"{setting}.sqlite"
    started = time.perf_counter()
    result = subprocess.run([*mosaic_command(), "experiment-start", str(experiment), "--store",
                             str(store), "--quiet"], capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"mosaic failed:\n{result.stderr}")
    with open_store(store) as opened:
        (run,) = opened.list_runs()
    return {"store": store, "uid": run.uid, "steps": run.steps, "bytes": size(store),
            "wall_s": wall}


def rewrite(rows: list[tuple[Any, ...]], store: Path, compress_above: int | None) -> float:
    """Write ``rows`` to a new store; seconds from the first record to the end of close()."""
    writer = StoreWriter(store, compress_above=compress_above)
    writer.start()
    try:
        experiment = writer.experiment_started("store-size", None, None)
        run = writer.run_started(experiment, "rewrite", 0, 1)
        started = time.perf_counter()
        writer.record_steps([(run, *row) for row in rows])
    finally:
        writer.close(timeout=600)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=2, help="episodes per run")
    parser.add_argument("--max-cycles", type=int, default=60,
                        help="cooperative_pong's max_cycles: steps per episode at most")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="mosaic-bench-") as tmp:
        folder = Path(tmp)
        runs = {setting: through_cli(folder, setting, args.episodes, args.max_cycles)
                for setting in ("all", "episodes", "none")}

        with open_store(runs["all"]["store"]) as opened:
            rows = [(r.environment, r.episode, r.step, r.agent, r.slot, r.observation, r.action,
                     r.reward, r.terminated, r.truncated) for r in opened.steps(runs["all"]["uid"])]
        plain_s = rewrite(rows, folder / "uncompressed.sqlite", None)
        packed_s = rewrite(rows, folder / "compressed.sqlite", 4096)
        plain = size(folder / "uncompressed.sqlite")
        packed = size(folder / "compressed.sqlite")

    steps = runs["all"]["steps"]
    print(f"cooperative_pong_v6, {steps} steps ({len(rows)} step rows), "
          f"through `mosaic experiment-start`:")
    print(f"{'record_steps':<14}{'store MB':>10}{'MB/step':>10}{'command s':>11}")
    for setting, run in runs.items():
        print(f"{setting:<14}{run['bytes'] / MB:>10.2f}{run['bytes'] / MB / run['steps']:>10.4f}"
              f"{run['wall_s']:>11.2f}")
    print()
    print("the same step rows written again in this process (writer: first record to close):")
    print(f"{'store':<14}{'store MB':>10}{'MB/step':>10}{'writer s':>11}{'ms/step':>9}")
    for name, bytes_, seconds in (("uncompressed", plain, plain_s),
                                  ("compressed", packed, packed_s)):
        print(f"{name:<14}{bytes_ / MB:>10.2f}{bytes_ / MB / steps:>10.4f}{seconds:>11.2f}"
              f"{seconds * 1000 / steps:>9.2f}")
    print(f"\ncompressed / uncompressed: size {packed / plain:.3f}, "
          f"writer time {packed_s / plain_s:.2f}")


if __name__ == "__main__":
    main()
