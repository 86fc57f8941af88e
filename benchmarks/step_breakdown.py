"""Where the simulation controller's CPU goes, per step (or per batch of copies).

It runs a CartPole experiment in this process with ``mosaic.run`` (the environment in a process
of its own, the random muscle in a thread, so that it is called directly), and times the
controller's own methods with the thread's CPU clock (``time.thread_time_ns``): what each costs
of the controller's thread, without the time it waits for the environment. The clock calls
cost about a microsecond each, so read the rows against each other, not to the microsecond.

Rows nest: ``receive`` is the wait for the environment's answer and its decoding (its CPU, not
the wait), ``step`` the accounting of one step (with the muscle's direct call in it), ``send``
the encoding and sending of the next request, and ``do_work`` all of it.

Usage: python benchmarks/step_breakdown.py [--copies N] [--episodes 3000]
Run it with PYTHONPATH pointing at the checkout to measure.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import mosaic  # noqa: E402 (the repository root, first)
from mosaic.orchestration import simulation_controller  # noqa: E402
from mosaic.runtime import direct  # noqa: E402
from mosaic.stepping.copy_episodes import CopyEpisodes  # noqa: E402
from mosaic.stepping.player_episodes import PlayerEpisodes  # noqa: E402
from mosaic.transport import client  # noqa: E402

EXPERIMENT = """\
uid: breakdown
seed: 1
episodes: {episodes}
environments:
  - uid: cartpole
    env: gymnasium:CartPole-v1
    placement: process{copies}
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
    placement: thread
store:
  record_steps: none
"""

Controller = simulation_controller.SimulationController
#: (owner, method, row) of the single-environment loop, and of a loop with copies.
SINGLE = [(Controller, "do_work", "do_work (all)"),
          (client.RequestClient, "receive", "receive"),
          (client.RequestClient, "send", "send"),
          (PlayerEpisodes, "_on_update", "step"),
          (PlayerEpisodes, "_settle", "  settle (digest, rows)"),
          (Controller, "_ask_muscles", "  muscles"),
          (direct.DirectClient, "call", "    direct call")]
COPIES = [(Controller, "do_work", "do_work (all)"),
          (client.RequestClient, "receive", "receive"),
          (client.RequestClient, "send", "send"),
          (CopyEpisodes, "accept", "step"),
          (CopyEpisodes, "_outcome", "  accounting (digest, episode ends)"),
          (direct.DirectClient, "call", "  muscle's direct call")]


def timed(owner: type, name: str, row: str, spent: collections.Counter[str],
          calls: collections.Counter[str]) -> None:
    """Wrap ``owner.name`` so that its thread CPU time adds up in ``spent[row]``."""
    method: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time_ns()
        try:
            return method(*args, **kwargs)
        finally:
            spent[row] += time.thread_time_ns() - started
            calls[row] += 1

    setattr(owner, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=None,
                        help="copies of the environment (default: one environment, no copies)")
    parser.add_argument("--episodes", type=int, default=3000)
    args = parser.parse_args()

    spent: collections.Counter[str] = collections.Counter()
    calls: collections.Counter[str] = collections.Counter()
    rows = SINGLE if args.copies is None else COPIES
    for owner, name, row in rows:
        timed(owner, name, row, spent, calls)
    copies = "" if args.copies is None else f"\n    copies: {args.copies}"
    with tempfile.TemporaryDirectory(prefix="mosaic-bench-") as tmp:
        experiment = Path(tmp) / "breakdown.yml"
        experiment.write_text(EXPERIMENT.format(episodes=args.episodes, copies=copies))
        (run,) = mosaic.run(experiment, progress=False,
                            **{"store.path": str(Path(tmp) / "breakdown.sqlite")})
    per = run.steps / (args.copies or 1)
    unit = "step" if args.copies is None else f"batch of {args.copies}"
    print(f"{run.steps:,} steps; controller thread CPU per {unit}")
    for _, _, row in rows:
        print(f"{row:<40}{spent[row] / per / 1000:>8.1f} µs{calls[row] / per:>8.2f} calls")


if __name__ == "__main__":
    main()
