"""Soak: a long multi-agent run whose processes must not grow and whose store must lose nothing.

The experiment is rock-paper-scissors as a PettingZoo Parallel game (``rps_v2``): two random
agents act in every step. The environment and both muscles run in processes of their own (the
brains stay in the mosaic process), every step is recorded, and episodes have a fixed length
(``max_cycles`` and ``max_steps``), so the number of steps is exact: ``--steps`` environment
steps, each of which stores one row per player (two rows).

The real ``mosaic experiment-start`` runs in a subprocess. While it runs, every ``--interval``
seconds this script reads, for the mosaic process and each of its descendants, the resident
memory (``VmRSS`` in ``/proc/PID/status``) and the number of open file descriptors
(``/proc/PID/fd``), together with the number of step rows committed to the store so far (read
with sqlite3, read-only).

Only samples taken while the run steps count (between the first and the last step, from the
``--timings`` file mosaic writes): start-up and shut-down allocate and open what they must.
Warm-up is the first ``--warmup`` fraction of the steps, and at least ``--min-warmup-s``
seconds: imports finish, SQLite's page cache and the allocator's arenas fill, ZeroMQ sets up its
buffers. The sample at the end of warm-up is each process's baseline. The criteria:

* resident memory: every process's largest RSS after warm-up is at most 1.10 x its baseline;
* file descriptors: no process ever has more than at the end of warm-up;
* processes: none appears or disappears after warm-up;
* the command exits 0 and its one run is ``finished``;
* no step is lost: ``runs.steps`` (environment steps the run counted) equals the steps asked
  for, the episodes' steps add up to it, and each player has exactly that many step rows.

It prints one row per process and exits 1, naming each failed criterion, if one fails.

Usage: python benchmarks/soak.py [--steps 1000000] [--episode-steps 100] [--interval 0.5]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

RSS_LIMIT = 1.10
"""Largest allowed RSS after warm-up, as a multiple of the baseline."""
PLAYERS = ("player_0", "player_1")
"""rps_v2's agents: each stores one row per environment step."""
MIN_SAMPLES_AFTER_WARMUP = 5
"""Fewer samples than this after warm-up judge nothing: the run is too short to be a soak."""

EXPERIMENT = """\
uid: soak
seed: 1
episodes: {episodes}
max_steps: {episode_steps}
placement: thread
environments:
  - uid: rps
    env: pettingzoo:classic.rps_v2
    params: {{api: parallel, max_cycles: {episode_steps}}}
    placement: process
    policy_mapping: {{player_0: alice, player_1: bob}}
agents:
  - uid: alice
    muscle: {alice_muscle}
    placement: {{brain: thread, muscle: process}}
  - uid: bob
    muscle: mosaic.agents:RandomMuscle
    placement: {{brain: thread, muscle: process}}
store:
  record_steps: true
"""


@dataclass(frozen=True)
class ProcessSample:
    """One process at one instant."""

    rss_kib: int
    fds: int


@dataclass(frozen=True)
class Sample:
    """Every process of the run at one instant, and how many step rows the store held then."""

    at: float  # time.time(), comparable with mosaic's --timings
    rows: int
    processes: dict[int, ProcessSample]


@dataclass(frozen=True)
class ProcessReport:
    """What one process did after warm-up, against its baseline at the end of warm-up."""

    pid: int
    role: str
    baseline_rss_kib: int
    max_rss_kib: int
    warmup_fds: int
    max_fds: int

    @property
    def rss_ratio(self) -> float:
        return self.max_rss_kib / self.baseline_rss_kib if self.baseline_rss_kib else float("inf")


@dataclass
class SoakResult:
    """Everything a soak measured, and the criteria it failed (none: it passed)."""

    steps_requested: int
    episodes: int
    episode_steps: int
    exit_code: int | None
    status: str | None
    run_steps: int | None
    episode_steps_sum: int | None
    rows_by_player: dict[str, int]
    samples: list[Sample]
    roles: dict[int, str]
    first_step_at: float | None
    last_step_at: float | None
    warmup_end_at: float | None = None
    warmup_rows: int | None = None
    samples_after_warmup: int = 0
    processes: list[ProcessReport] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    stderr_tail: str = ""

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def stepping_s(self) -> float | None:
        if self.first_step_at is None or self.last_step_at is None:
            return None
        return self.last_step_at - self.first_step_at

    @property
    def steps_per_s(self) -> float | None:
        elapsed = self.stepping_s
        if not elapsed or self.run_steps is None:
            return None
        return self.run_steps / elapsed


# -- /proc ------------------------------------------------------------------------------------

def descendants(root: int) -> list[int]:
    """``root`` and every live process below it (component processes, their workers)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        fields = stat_fields(int(entry.name))
        if fields is not None and fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, queue = [], [root]
    while queue:
        pid = queue.pop()
        found.append(pid)
        queue.extend(children.get(pid, ()))
    return found


def read_process(pid: int) -> ProcessSample | None:
    """RSS and open descriptors of ``pid``; None if it is gone (or a zombie, without RSS)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            rss = next((int(line.split()[1]) for line in status if line.startswith("VmRSS:")),
                       None)
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    return None if rss is None else ProcessSample(rss, fds)


#: The role of a child not yet known: it had not started its own program when first seen.
UNSETTLED = "?"


def role(pid: int, root: int) -> str:
    """What a process is, from its command line: ``environment rps``, ``muscle alice@rps``."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return UNSETTLED
    if "mosaic.runtime.processes.zygote" in argv:
        # The command's fork server, which starts the component processes. A process it forked
        # shows the same command line until it names itself: not known yet.
        return "zygote" if parent(pid) == root else UNSETTLED
    if "mosaic.runtime.process_main" in argv:
        at = argv.index("mosaic.runtime.process_main")
        return " ".join(argv[at + 1:at + 3])
    if "experiment-start" in argv:
        # A child caught between fork and exec still shows mosaic's own command line.
        return "mosaic experiment-start" if pid == root else UNSETTLED
    return " ".join(Path(a).name if i == 0 else a for i, a in enumerate(argv[:3]) if a)


def parent(pid: int) -> int | None:
    """The parent of ``pid`` (None: gone)."""
    fields = stat_fields(pid)
    return None if fields is None else int(fields[1])


def stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command's name (state, ppid, ...); None if
    ``pid`` is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # "pid (comm) state ppid ...": the name may hold spaces and parentheses.
    return stat.rsplit(")", 1)[1].split()


def step_rows(store: Path) -> int:
    """Step rows committed so far (ids count up from 1 in a fresh store); 0 before any."""
    if not store.exists():
        return 0
    try:
        with closing(sqlite3.connect(store.as_uri() + "?mode=ro", uri=True,
                                     timeout=1.0)) as connection:
            return int(connection.execute("SELECT MAX(id) FROM steps").fetchone()[0] or 0)
    except sqlite3.Error:
        return 0  # not created yet


# -- running and judging ----------------------------------------------------------------------

def mosaic_command() -> list[str]:
    script = Path(sys.executable).with_name("mosaic")
    return [str(script)] if script.exists() else [sys.executable, "-m", "mosaic"]


def soak(steps: int, *, episode_steps: int = 100, interval: float = 0.5,
         warmup: float = 0.10, min_warmup_s: float = 5.0, timeout: float | None = None,
         alice_muscle: str = "mosaic.agents:RandomMuscle", folder: Path | None = None,
         cwd: Path = REPO, report: bool = False) -> SoakResult:
    """Run the soak experiment for ``steps`` environment steps and judge it.

    ``alice_muscle`` replaces the first player's muscle (a class path or a ``{class, params}``
    mapping in YAML flow style), which is how a leak is planted to check that the soak sees it.
    ``timeout`` bounds the whole command; past it the command is interrupted, then killed, and
    the result fails. ``report`` prints a progress line to stderr every tenth of the steps.
    """
    if steps < 1 or episode_steps < 1 or steps % episode_steps:
        raise ValueError(f"--steps ({steps}) must be a positive multiple of --episode-steps "
                         f"({episode_steps})")
    episodes = steps // episode_steps
    with tempfile.TemporaryDirectory(prefix="mosaic-soak-", dir=folder) as tmp:
        where = Path(tmp)
        experiment = where / "soak.yml"
        experiment.write_text(EXPERIMENT.format(episodes=episodes, episode_steps=episode_steps,
                                                alice_muscle=alice_muscle))
        store, timings = where / "soak.sqlite", where / "timings.json"
        stderr_path = where / "stderr.txt"
        with open(stderr_path, "w") as stderr:
            process = subprocess.Popen(
                [*mosaic_command(), "experiment-start", str(experiment), "--store", str(store),
                 "--quiet", "--timings", str(timings)],
                cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
            try:
                samples, roles, exit_code = _sample(process, store, steps * len(PLAYERS),
                                                    interval, timeout, report)
            finally:
                if process.poll() is None:  # interrupted here: mosaic must not outlive us
                    _stop(process)
        marks = json.loads(timings.read_text()) if timings.exists() else {}
        result = SoakResult(steps, episodes, episode_steps, exit_code, None, None, None, {},
                            samples, roles, marks.get("first_step_at"), marks.get("last_step_at"),
                            stderr_tail="\n".join(stderr_path.read_text().splitlines()[-20:]))
        _read_store(result, store)
    _judge(result, warmup, min_warmup_s)
    return result


def _sample(process: subprocess.Popen[bytes], store: Path, total_rows: int, interval: float,
            timeout: float | None, report: bool
            ) -> tuple[list[Sample], dict[int, str], int | None]:
    """Sample until ``process`` exits; interrupt (then kill) it past ``timeout``.

    Roles are read from each process's command line when it is first seen, while it lives.
    """
    started = time.monotonic()
    samples: list[Sample] = []
    roles: dict[int, str] = {}
    next_report = 0.1
    while process.poll() is None:
        if timeout is not None and time.monotonic() - started > timeout:
            _stop(process)
            return samples, roles, None
        at = time.time()
        found = {}
        for pid in descendants(process.pid):
            measured = read_process(pid)
            if measured is not None:
                found[pid] = measured
                if roles.get(pid, UNSETTLED) == UNSETTLED:
                    roles[pid] = role(pid, process.pid)
        rows = step_rows(store)
        samples.append(Sample(at, rows, found))
        if report and rows >= next_report * total_rows:
            next_report += 0.1
            total_rss = sum(p.rss_kib for p in found.values()) / 1024
            print(f"  {rows // len(PLAYERS):>12,} steps, {len(found)} processes, "
                  f"{total_rss:,.1f} MiB resident", file=sys.stderr, flush=True)
        time.sleep(max(0.0, interval - (time.time() - at)))
    return samples, roles, process.returncode


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGINT (mosaic stops in order), then SIGKILL; component processes die with mosaic."""
    process.send_signal(signal.SIGINT)
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _read_store(result: SoakResult, store: Path) -> None:
    if not store.exists():
        return
    with closing(sqlite3.connect(store.as_uri() + "?mode=ro", uri=True)) as connection:
        runs = connection.execute("SELECT status, steps FROM runs").fetchall()
        if len(runs) == 1:
            result.status, result.run_steps = runs[0]
        result.episode_steps_sum = connection.execute(
            "SELECT SUM(steps) FROM episodes").fetchone()[0]
        result.rows_by_player = dict(connection.execute(
            "SELECT slot, COUNT(*) FROM steps GROUP BY slot").fetchall())


def _judge(result: SoakResult, warmup: float, min_warmup_s: float) -> None:
    failures = result.failures
    if result.exit_code != 0:
        failures.append("exit code: mosaic timed out" if result.exit_code is None
                        else f"exit code: mosaic exited {result.exit_code}")
    if result.status != "finished":
        failures.append(f"run status: {result.status!r}, not 'finished'")
    if result.run_steps != result.steps_requested:
        failures.append(f"steps: the run counted {result.run_steps} environment steps, "
                        f"{result.steps_requested} were asked for")
    if result.episode_steps_sum != result.run_steps:
        failures.append(f"steps: the episodes add up to {result.episode_steps_sum} steps, "
                        f"the run counted {result.run_steps}")
    for player in PLAYERS:
        rows = result.rows_by_player.get(player, 0)
        if rows != result.run_steps:
            failures.append(f"steps lost: {player} has {rows} step rows for {result.run_steps} "
                            "environment steps")
    first, last = result.first_step_at, result.last_step_at
    if first is None or last is None:
        failures.append("no step was timed: mosaic wrote no timings")
        return
    stepping = [s for s in result.samples if first <= s.at <= last]
    total_rows = result.steps_requested * len(PLAYERS)
    boundary = next((i for i, s in enumerate(stepping)
                     if s.at >= first + min_warmup_s and s.rows >= warmup * total_rows), None)
    after = stepping[boundary:] if boundary is not None else []
    result.samples_after_warmup = max(0, len(after) - 1)
    if result.samples_after_warmup < MIN_SAMPLES_AFTER_WARMUP:
        failures.append(f"too short: {result.samples_after_warmup} samples after warm-up, "
                        f"{MIN_SAMPLES_AFTER_WARMUP} needed")
        return
    base = after[0]
    result.warmup_end_at, result.warmup_rows = base.at, base.rows
    for pid, start in sorted(base.processes.items()):
        seen = [s.processes[pid] for s in after if pid in s.processes]
        report = ProcessReport(pid, result.roles.get(pid, "?"), start.rss_kib,
                               max(p.rss_kib for p in seen), start.fds, max(p.fds for p in seen))
        result.processes.append(report)
        if report.max_rss_kib > start.rss_kib * RSS_LIMIT:
            failures.append(f"memory: {report.role} (pid {pid}) grew from "
                            f"{start.rss_kib / 1024:.1f} to {report.max_rss_kib / 1024:.1f} MiB "
                            f"(x{report.rss_ratio:.3f} > x{RSS_LIMIT:.2f})")
        if report.max_fds > start.fds:
            failures.append(f"file descriptors: {report.role} (pid {pid}) went from "
                            f"{start.fds} to {report.max_fds}")
        if len(seen) < len(after):
            failures.append(f"processes: {report.role} (pid {pid}) vanished while stepping")
    born = sorted({pid for s in after for pid in s.processes} - set(base.processes))
    if born:
        failures.append("processes: appeared after warm-up: "
                        + ", ".join(f"{result.roles.get(pid, '?')} (pid {pid})" for pid in born))


# -- report ---------------------------------------------------------------------------------

def format_result(result: SoakResult) -> str:
    """The table ``main`` prints."""
    lines = [
        f"soak: {result.steps_requested:,} environment steps of rps_v2 (Parallel), "
        f"{result.episodes:,} episodes x {result.episode_steps:,}, {len(PLAYERS)} players: "
        f"{result.steps_requested * len(PLAYERS):,} step rows expected",
    ]
    if result.stepping_s is not None and result.steps_per_s is not None:
        lines.append(f"stepping: {result.stepping_s:,.1f} s, {result.steps_per_s:,.0f} steps/s "
                     f"({result.steps_per_s * len(PLAYERS):,.0f} step rows/s)")
    if result.warmup_end_at is not None and result.first_step_at is not None:
        lines.append(f"warm-up: until {(result.warmup_rows or 0) // len(PLAYERS):,} steps "
                     f"stored, {result.warmup_end_at - result.first_step_at:.1f} s after the "
                     f"first step; {result.samples_after_warmup} samples after it")
    lines.append(f"{'pid':>8}  {'role':<24}{'baseline RSS':>14}{'max RSS':>12}{'ratio':>8}"
                 f"{'fds at warm-up':>16}{'max fds':>9}")
    for p in result.processes:
        lines.append(f"{p.pid:>8}  {p.role:<24}{p.baseline_rss_kib / 1024:>10.1f} MiB"
                     f"{p.max_rss_kib / 1024:>8.1f} MiB{p.rss_ratio:>8.3f}{p.warmup_fds:>16}"
                     f"{p.max_fds:>9}")
    rows = ", ".join(f"{k} {v:,}" for k, v in sorted(result.rows_by_player.items()))
    lines.append(f"store: run {result.status}, runs.steps {result.run_steps}, episodes add up "
                 f"to {result.episode_steps_sum}, step rows: {rows or 'none'}; "
                 f"exit code {result.exit_code}")
    if result.ok:
        lines.append(f"ok: RSS within x{RSS_LIMIT:.2f}, no descriptor growth, no step lost")
    else:
        lines.extend(f"FAILED: {failure}" for failure in result.failures)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1_000_000, help="environment steps")
    parser.add_argument("--episode-steps", type=int, default=100,
                        help="steps per episode; --steps must be a multiple of it")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between samples")
    parser.add_argument("--warmup", type=float, default=0.10,
                        help="fraction of the steps that is warm-up")
    parser.add_argument("--min-warmup-s", type=float, default=5.0,
                        help="warm-up lasts at least this many seconds of stepping")
    args = parser.parse_args()
    try:
        result = soak(args.steps, episode_steps=args.episode_steps, interval=args.interval,
                      warmup=args.warmup, min_warmup_s=args.min_warmup_s, report=True)
    except ValueError as error:
        parser.error(str(error))
    print(format_result(result))
    if not result.ok:
        if result.stderr_tail:
            print(f"mosaic's stderr (last lines):\n{result.stderr_tail}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
