"""mosaic commands side by side, as researchers start them in several terminals.

Each trial starts ``--commands`` separate ``mosaic experiment-start`` commands at once (each with
one run of CartPole, environment and muscle in processes of their own, default settings),
optionally beside ``--hogs`` CPU-bound busy loops, and waits for all of them. It reports how
many runs failed (the target is none: a busy machine is not a broken run), why, and the steps/s
of all commands together against an in-process Gymnasium loop measured in the same run, with
``cpu_affinity: none`` (the default) and ``auto`` in alternation.

Then it starts the same commands on endless runs, sends each a SIGINT once all are stepping, and
reports the seconds from the signal to its exit (the target is 2 s at most), its exit code (130)
and the status of its run (``cancelled``).

Usage: python benchmarks/concurrent_runs.py [--trials 10] [--commands 3] [--hogs 4]
       [--episodes 200]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from throughput import in_process, mosaic_command

EXPERIMENT = """\
uid: side-by-side-{index}
seed: {index}
runs: 1
episodes: {episodes}
placement: process
cpu_affinity: {affinity}
environments:
  - uid: cartpole
    env: gymnasium:CartPole-v1
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
"""
HOG = "import time\nend = time.time() + 3600\nwhile time.time() < end: pass"


Started = list[tuple[subprocess.Popen[str], Path, Path]]


def start(folder: Path, commands: int, episodes: int, affinity: str) -> Started:
    """Start ``commands`` commands at once; each with its process, store and timings file."""
    started = []
    for index in range(commands):
        experiment = folder / f"e{index}.yml"
        experiment.write_text(EXPERIMENT.format(index=index, episodes=episodes, affinity=affinity))
        store = folder / f"e{index}-{time.monotonic_ns()}.sqlite"
        timings = folder / f"t{index}-{time.monotonic_ns()}.json"
        proc = subprocess.Popen([*mosaic_command(), "experiment-start", str(experiment), "--store",
                                 str(store), "--quiet", "--timings", str(timings)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        started.append((proc, store, timings))
    return started


def stored(store: Path) -> list[tuple[str, str | None, int]]:
    """``(status, error, steps)`` of each run in ``store``; none before the store exists."""
    if not store.exists():
        return []
    with sqlite3.connect(store) as connection:
        return connection.execute("SELECT status, error, steps FROM runs").fetchall()


def stepping(store: Path) -> bool:
    if not store.exists():
        return False
    try:
        with sqlite3.connect(store) as connection:
            return connection.execute("SELECT COUNT(*) FROM steps").fetchone()[0] > 0
    except sqlite3.OperationalError:  # the tables are not there yet
        return False


def interrupt(folder: Path, commands: int, affinity: str) -> dict[str, object]:
    """Start ``commands`` endless runs, SIGINT each once all step; seconds to exit, failures."""
    started = start(folder, commands, 1_000_000, affinity)
    seconds: list[float] = []
    failures: list[str] = []
    try:
        deadline = time.monotonic() + 120
        while not all(stepping(store) for _, store, _ in started):
            if time.monotonic() > deadline or any(p.poll() is not None for p, _, _ in started):
                failures.append("did not all start stepping within 120 s")
                return {"seconds": seconds, "failures": failures}
            time.sleep(0.05)
        for proc, _, _ in started:
            sent = time.monotonic()
            os.kill(proc.pid, signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                failures.append("still running 60 s after SIGINT")
            seconds.append(time.monotonic() - sent)
    finally:
        for proc, _, _ in started:
            if proc.poll() is None:
                proc.kill()
            _, stderr = proc.communicate()
            if proc.returncode != 130:
                failures.append(f"exit {proc.returncode}: {stderr.strip()[-300:]}")
    for _, store, _ in started:
        failures += [f"{status}: {error}" for status, error, _ in stored(store)
                     if status != "cancelled"]
    return {"seconds": seconds, "failures": failures}


def trial(folder: Path, commands: int, episodes: int, affinity: str) -> dict[str, object]:
    """Run ``commands`` commands at once; their failures and their steps/s together."""
    started = start(folder, commands, episodes, affinity)
    failures: list[str] = []
    steps, first, last = 0, float("inf"), 0.0
    for proc, store, timings in started:
        try:
            _, stderr = proc.communicate(timeout=900)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, stderr = proc.communicate()
            failures.append("stalled")
            continue
        rows = stored(store)
        failures += [f"{status}: {error}" for status, error, _ in rows if status != "finished"]
        if proc.returncode != 0 and not failures:
            failures.append(f"exit {proc.returncode}: {stderr.strip()[-300:]}")
        steps += sum(count for _, _, count in rows)
        marks = json.loads(timings.read_text()) if timings.exists() else {}
        if marks.get("first_step_at") is not None:
            first = min(first, marks["first_step_at"])
            last = max(last, marks["last_step_at"])
    return {"runs": commands, "failures": failures,
            "steps_per_s": steps / (last - first) if last > first else 0.0, "steps": steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--commands", type=int, default=3)
    parser.add_argument("--hogs", type=int, default=0, help="CPU-bound busy loops beside them")
    parser.add_argument("--episodes", type=int, default=200, help="per run")
    args = parser.parse_args()
    hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(args.hogs)]
    results: dict[str, list[dict[str, object]]] = {"none": [], "auto": []}
    stops: list[dict[str, object]] = []
    baselines = []
    try:
        with tempfile.TemporaryDirectory(prefix="mosaic-bench-") as tmp:
            for number in range(args.trials):
                for affinity in results:
                    result = trial(Path(tmp), args.commands, args.episodes, affinity)
                    results[affinity].append(result)
                    baselines.append(in_process(20_000))  # the same machine load, in between
                    print(f"trial {number + 1} cpu_affinity {affinity}: "
                          f"{len(result['failures'])} of {result['runs']} runs failed, "
                          f"{result['steps_per_s']:,.0f} steps/s", flush=True)
                    for failure in result["failures"]:
                        print(f"  {failure}", flush=True)
                stop = interrupt(Path(tmp), args.commands, "none")
                stops.append(stop)
                print(f"trial {number + 1} SIGINT: exits after "
                      + ", ".join(f"{t:.2f}" for t in stop["seconds"])  # type: ignore[attr-defined]
                      + " s", flush=True)
                for failure in stop["failures"]:  # type: ignore[attr-defined]
                    print(f"  {failure}", flush=True)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    baseline = statistics.median(baselines)
    print(f"\n{args.commands} commands side by side, {args.hogs} CPU hogs, {args.trials} trials; "
          f"in-process loop {baseline:,.0f} steps/s")
    for affinity, rows in results.items():
        failed = sum(len(row["failures"]) for row in rows)  # type: ignore[arg-type]
        total = sum(row["runs"] for row in rows)  # type: ignore[misc]
        rate = statistics.median(row["steps_per_s"] for row in rows)  # type: ignore[misc]
        print(f"cpu_affinity {affinity:<5} {failed} of {total} runs failed; all commands together "
              f"{rate:,.0f} steps/s (x{rate / baseline:.4f} in-process)")
    times = [t for stop in stops for t in stop["seconds"]]  # type: ignore[attr-defined]
    failed = sum(len(stop["failures"]) for stop in stops)  # type: ignore[arg-type]
    if times:
        print(f"SIGINT to exit: {len(times)} commands, median {statistics.median(times):.2f} s, "
              f"max {max(times):.2f} s; {failed} did not end cancelled with exit 130")


if __name__ == "__main__":
    main()
