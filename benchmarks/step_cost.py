"""CPU per step and steps/s of mosaic against a raw pyzmq + msgpack loop, measured in one run.

The raw loop is what mosaic's process placement does, written by hand: three processes
(controller, environment, muscle), DEALER -> ROUTER over ipc, plain msgpack with NumPy arrays
as raw bytes + dtype + shape, CartPole-v1 in the environment process, random actions in the
muscle process, and per step the same two round trips (controller -> environment ->
controller, controller -> muscle -> controller). No validation, no correlation ids, no logging:
the floor that mosaic's own protocol is measured against.

mosaic runs the real ``mosaic experiment-start`` command on the same CartPole with a random
muscle, environment and agent each in a process of its own, ``record_steps: none``.

CPU is the total of every process involved: the command and all its descendants, read from
``/proc/PID/stat`` (utime + stime + cutime + cstime of each live process, so a child that has
exited and been reaped still counts through its parent). A sampler reads it every
``SAMPLE_S``; the figure at the first and at the last step is interpolated between samples, so
start-up and shut-down are left out and only the stepping phase counts.

It also runs the all-threads placement against the plain in-process Gymnasium loop.

Usage: python benchmarks/step_cost.py [--episodes 1000] [--repeat 3]
Run it with PYTHONPATH pointing at the checkout to measure.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from throughput import in_process, mosaic_command

EXPERIMENT = """\
uid: step-cost
seed: 1
episodes: {episodes}
placement: {placement}
transport: ipc
environments:
  - uid: cartpole
    env: gymnasium:CartPole-v1
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
store:
  record_steps: none
"""

#: How often the sampler reads the CPU times of the measured process tree.
SAMPLE_S = 0.05
#: How often it looks for new processes in the tree (start-up only, in practice).
RESCAN_S = 0.25
_TICKS = os.sysconf("SC_CLK_TCK")


# -- CPU accounting ---------------------------------------------------------------------------

def _stat(pid: int) -> tuple[int, float] | None:
    """``(parent pid, utime + stime + cutime + cstime in seconds)`` of ``pid``, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: the fields start after the last ')'.
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), sum(int(value) for value in fields[11:15]) / _TICKS


def _descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None:
                parents[int(entry)] = stat[0]
    tree = {root}
    grown = True
    while grown:
        grown = False
        for pid, parent in parents.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grown = True
    return tree


class TreeSampler:
    """Samples the total CPU seconds of a process and its descendants in a background thread."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.samples: list[tuple[float, float]] = []  # (time.time(), CPU seconds)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        tree: set[int] = {self.root}
        next_scan = 0.0
        while not self._done.is_set():
            now = time.monotonic()
            if now >= next_scan:
                tree |= _descendants(self.root)
                next_scan = now + RESCAN_S
            total = 0.0
            for pid in tree:
                stat = _stat(pid)
                if stat is not None:
                    total += stat[1]
            self.samples.append((time.time(), total))
            self._done.wait(SAMPLE_S)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def cpu_at(self, when: float) -> float:
        """CPU seconds of the tree at wall-clock time ``when``, interpolated between samples."""
        times = [t for t, _ in self.samples]
        index = bisect.bisect_left(times, when)
        if index == len(times) and times and when - times[-1] <= 2 * SAMPLE_S:
            # A command that exits right after its last step leaves no sample after it: its
            # last sample, at most two intervals earlier, stands for it.
            return self.samples[-1][1]
        if index == 0 or index == len(times):
            raise SystemExit("the sampler did not cover the stepping phase; run longer")
        (t0, c0), (t1, c1) = self.samples[index - 1], self.samples[index]
        return c0 + (c1 - c0) * (when - t0) / (t1 - t0)


def measure(command: list[str], env: dict[str, str] | None = None) -> tuple[str, TreeSampler]:
    """Run ``command`` while sampling its CPU; return its stdout and the sampler."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    sampler = TreeSampler(proc.pid)
    try:
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        sampler.stop()
    if proc.returncode != 0:
        raise SystemExit(f"{command[:4]} failed ({proc.returncode}):\n{stderr}")
    return stdout, sampler


def result(steps: int, first: float, last: float, sampler: TreeSampler) -> dict[str, float]:
    cpu = sampler.cpu_at(last) - sampler.cpu_at(first)
    return {"steps": steps, "steps_per_s": steps / (last - first),
            "cpu_us_per_step": cpu / steps * 1e6}


# -- the raw loop ------------------------------------------------------------------------------

def _encode_array(array: Any) -> dict[str, Any]:
    return {"data": array.tobytes(), "dtype": array.dtype.str, "shape": list(array.shape)}


def _decode_array(value: dict[str, Any]) -> Any:
    import numpy as np

    return np.frombuffer(value["data"], value["dtype"]).reshape(value["shape"])


def _serve(endpoint: str, handle: Any) -> None:
    """A ROUTER on ``endpoint`` answering each msgpack request with ``handle``'s answer."""
    import msgpack
    import zmq

    ctx = zmq.Context()
    ctx.linger = 0
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.RCVTIMEO, 30_000)
    sock.bind(endpoint)
    while True:
        peer, frame = sock.recv_multipart()
        request = msgpack.unpackb(frame)
        if request is None:
            sock.send_multipart([peer, msgpack.packb(None)])
            break
        sock.send_multipart([peer, msgpack.packb(handle(request))])
    sock.close()
    ctx.term()


def raw_environment(endpoint: str) -> None:
    """The raw loop's environment process: CartPole-v1, reset and step on request."""
    import gymnasium

    serve_environment(endpoint, gymnasium.make("CartPole-v1"))


def serve_environment(endpoint: str, env: Any) -> None:
    """Reset and step the single environment ``env`` on request, as the raw loops ask."""

    def handle(request: dict[str, Any]) -> dict[str, Any]:
        if "seed" in request:
            observation, _ = env.reset(seed=request["seed"])
            return {"observation": _encode_array(observation)}
        observation, reward, terminated, truncated, _ = env.step(request["action"])
        return {"observation": _encode_array(observation), "reward": float(reward),
                "terminated": terminated, "truncated": truncated}

    _serve(endpoint, handle)


def raw_muscle(endpoint: str) -> None:
    """The raw loop's muscle process: a random action for each observation."""
    import gymnasium

    space = gymnasium.spaces.Discrete(2, seed=1)

    def handle(request: dict[str, Any]) -> dict[str, Any]:
        _decode_array(request["observation"])
        return {"action": int(space.sample())}

    _serve(endpoint, handle)


def raw_controller(steps: int) -> None:
    """The raw loop's controller: starts both servers, steps, prints its step times as JSON."""
    import msgpack
    import zmq

    folder = tempfile.mkdtemp(prefix="mosaic-raw-")
    endpoints = {role: f"ipc://{folder}/{role}" for role in ("environment", "muscle")}
    children = [subprocess.Popen([sys.executable, __file__, f"--raw-{role}", endpoint])
                for role, endpoint in endpoints.items()]
    ctx = zmq.Context()
    ctx.linger = 0
    sockets = {}
    for role, endpoint in endpoints.items():
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.RCVTIMEO, 30_000)
        sock.connect(endpoint)
        sockets[role] = sock
    env, muscle = sockets["environment"], sockets["muscle"]

    def ask(sock: Any, request: Any) -> Any:
        sock.send(msgpack.packb(request))
        return msgpack.unpackb(sock.recv())

    episode = 0
    reply = ask(env, {"seed": episode})
    first = 0.0
    for step in range(steps):
        observation = _decode_array(reply["observation"])
        action = ask(muscle, {"observation": _encode_array(observation)})["action"]
        reply = ask(env, {"action": action})
        if step == 0:
            first = time.time()
        if reply["terminated"] or reply["truncated"]:
            episode += 1
            reply = ask(env, {"seed": episode})
    last = time.time()
    for sock in sockets.values():
        ask(sock, None)
        sock.close()
    for child in children:
        child.wait(30)
    ctx.term()
    print(json.dumps({"steps": steps - 1, "first_step_at": first, "last_step_at": last}))


def raw_loop(steps: int) -> dict[str, float]:
    stdout, sampler = measure([sys.executable, __file__, "--raw-controller", str(steps)])
    marks = json.loads(stdout)
    return result(marks["steps"], marks["first_step_at"], marks["last_step_at"], sampler)


# -- mosaic ------------------------------------------------------------------------------------

def mosaic_run(folder: Path, episodes: int, placement: str) -> dict[str, float]:
    experiment = folder / "step_cost.yml"
    experiment.write_text(EXPERIMENT.format(episodes=episodes, placement=placement))
    store = folder / f"step-cost-{time.monotonic_ns()}.sqlite"
    timings = folder / "timings.json"
    _, sampler = measure([*mosaic_command(), "experiment-start", str(experiment), "--store",
                          str(store), "--quiet", "--timings", str(timings)])
    marks = json.loads(timings.read_text())
    import sqlite3

    with sqlite3.connect(store) as connection:
        steps = connection.execute("SELECT SUM(steps) FROM runs").fetchone()[0]
    # The timings mark the end of the first step; the steps counted lie after it.
    return result(steps - 1, marks["first_step_at"], marks["last_step_at"], sampler)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=1000,
                        help="CartPole episodes per mosaic run (about 22 steps each)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each (median reported)")
    args = parser.parse_args()
    print(f"mosaic from: {os.environ.get('PYTHONPATH') or '(installed)'}; "
          f"{os.cpu_count()} CPUs", flush=True)

    rows: dict[str, list[dict[str, float]]] = {"raw": [], "process": [], "thread": []}
    in_process_rates = []
    with tempfile.TemporaryDirectory(prefix="mosaic-bench-") as tmp:
        for _ in range(args.repeat):
            # Interleaved, so that every configuration sees the same machine load.
            rows["process"].append(mosaic_run(Path(tmp), args.episodes, "process"))
            rows["raw"].append(raw_loop(int(rows["process"][-1]["steps"])))
            rows["thread"].append(mosaic_run(Path(tmp), args.episodes, "thread"))
            in_process_rates.append(in_process(int(rows["thread"][-1]["steps"])))
            for name in rows:
                sample = rows[name][-1]
                print(f"  {name:<8}{sample['steps_per_s']:>9,.0f} steps/s"
                      f"{sample['cpu_us_per_step']:>8.0f} µs CPU/step", flush=True)

    median = {name: {key: statistics.median(s[key] for s in samples) for key in samples[0]}
              for name, samples in rows.items()}
    raw, process, thread = median["raw"], median["process"], median["thread"]
    baseline = statistics.median(in_process_rates)
    print(f"\nmedians of {args.repeat} runs")
    print(f"{'':<34}{'steps/s':>10}{'CPU µs/step':>13}")
    print(f"{'raw pyzmq + msgpack, 3 processes':<34}{raw['steps_per_s']:>10,.0f}"
          f"{raw['cpu_us_per_step']:>13.0f}")
    print(f"{'mosaic, placement: process':<34}{process['steps_per_s']:>10,.0f}"
          f"{process['cpu_us_per_step']:>13.0f}")
    print(f"{'mosaic, placement: thread':<34}{thread['steps_per_s']:>10,.0f}"
          f"{thread['cpu_us_per_step']:>13.0f}")
    print(f"{'in-process Gymnasium loop':<34}{baseline:>10,.0f}")
    print(f"\nmosaic processes / raw loop: CPU per step "
          f"{process['cpu_us_per_step'] / raw['cpu_us_per_step']:.2f}x, steps/s "
          f"{process['steps_per_s'] / raw['steps_per_s']:.2f}x")
    print(f"mosaic threads / in-process loop: steps/s {thread['steps_per_s'] / baseline:.3f}x")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--raw-controller":
        raw_controller(int(sys.argv[2]))
    elif len(sys.argv) == 3 and sys.argv[1] == "--raw-environment":
        raw_environment(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "--raw-muscle":
        raw_muscle(sys.argv[2])
    else:
        main()
