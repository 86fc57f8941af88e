"""Do the examples keep their word? Runs every file in examples/ as a user runs it and checks
each figure its header states.

Run: ``python benchmarks/examples.py [--only NAME ...] [--list]``. A figure is a header line

    #   seed 1: train env steps 63.4k; test mean return 500
    #   seeds 1-3: train last-20 mean >= 475

that is: ``seed N`` or ``seeds A-B`` (or ``A, B``), a colon, then figures separated by ``;``,
each ``<phase> <measure> [>= | <=] <value>``. ``<phase>`` is the name of one of the file's
phases (its run is ``<run uid>-<phase>``); ``<measure>`` is one of :data:`MEASURES`:

* ``env steps``, ``episodes``: the phase run's counters (``runs.steps``, ``runs.episodes``);
* ``mean return``: the mean ``total_return`` of the phase's episodes (evaluation ones left out);
* ``last-20 mean``: the same over its last 20 episodes;
* ``win rate``: the share of its episodes that the seat(s) the agent ``learner`` plays won
  (its return in ``episodes.returns`` above 0; a board game's ``total_return`` is 0).

A value without ``>=``/``<=`` holds when the measured one, rounded as the value is written,
equals it (``500``: 499.5 to 500.5; ``169.35``: to 0.005; ``63.4k``: 63,350 to 63,450 steps).
Runs are deterministic for a seed, so a figure that stops holding means the example changed.
A figure for several seeds holds for each.

For every example this runs, one at a time, the command its header names (``mosaic
experiment-start FILE`` unless it says ``mosaic evaluate``) from a temporary folder, with
``--set seed=N`` for each seed its figures name (the file's own seed where it states none),
into a temporary store, and prints each figure as stated, as measured and whether it holds.
Nothing is shortened: each seed's figures include its test phase, so every phase before it runs
in full (a test phase takes a second). :data:`NOT_RUN` are left out, with the reason. Exits
with 1 when a figure does not hold or a run fails. The whole took 472 s on a 2-core machine
at a load of about 1, its own (DQN's four seeds 294 s of it), before the TD3 and SAC Pendulum
examples, which add about 225 s (three seeds each, at a load of about 2); ``--only NAME`` runs
one example.
``tests/e2e/test_examples.py`` checks, in seconds, that every figure in a header is one this
benchmark reads.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"

#: What a figure can measure of a phase's run.
MEASURES = ("env steps", "episodes", "mean return", "last-20 mean", "win rate")
WINDOW = 20
LEARNER = "learner"  # the agent whose seats a win rate counts

#: Examples this benchmark does not run, and why (they state no figures).
NOT_RUN = {
    "frozenlake_llm": "needs an OpenAI-compatible chat-completions server on this machine",
    "chess_llm_vs_llm": "needs two OpenAI-compatible chat-completions servers on this machine",
    "evaluate_chess_llm_vs_llm": "needs two OpenAI-compatible chat-completions servers on "
                                 "this machine",
    "manual_frozenlake": "interactive (mosaic manual)",
}

#: A header line that states figures: "#   seed 1: ..." or "#   seeds 1-3: ...".
FIGURE_LINE = re.compile(r"^#\s+seeds?\s+(?P<seeds>\d[\d ,\-]*?)\s*:\s*(?P<figures>.+?)\s*$")
#: A header line that looks like one (checked by the test: it must parse).
LOOKS_LIKE_FIGURES = re.compile(r"^#\s+seeds?\s+\d")
FIGURE = re.compile(r"^(?P<phase>[A-Za-z0-9_.-]+) (?P<measure>" + "|".join(MEASURES)
                    + r") (?:(?P<op>>=|<=) )?(?P<value>-?\d+(?:\.\d+)?)(?P<k>k?)$")
COMMAND = re.compile(r"mosaic (experiment-start|evaluate|manual) examples/(?P<file>\S+\.yml)")


class FigureError(ValueError):
    """A header line that looks like figures but does not parse, or names what is not there."""


@dataclass(frozen=True)
class Figure:
    seed: int
    phase: str
    measure: str
    op: str  # "=", ">=" or "<="
    value: float
    decimals: int  # how the value is written: rounding for "="
    scale: int  # 1000 for a value written with k
    text: str  # as written, without the seed

    def holds(self, measured: float) -> bool:
        if self.op == ">=":
            return measured >= self.value
        if self.op == "<=":
            return measured <= self.value
        return round(measured / self.scale, self.decimals) == round(self.value / self.scale,
                                                                       self.decimals)

    def show(self, measured: float) -> str:
        if self.scale == 1000:
            return f"{measured / 1000:.{self.decimals + 1}f}k ({measured:.0f})"
        decimals = max(self.decimals, 2) if self.measure in ("mean return", "last-20 mean") \
            else max(self.decimals, 3) if self.measure == "win rate" else self.decimals
        return f"{measured:.{decimals}f}"


def header(path: Path) -> list[str]:
    """The comment lines that open ``path``, up to its first line of YAML."""
    lines = []
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            lines.append(line)
        elif line.strip():
            break
    return lines


def parse_seeds(text: str) -> list[int]:
    seeds: list[int] = []
    for part in text.replace(" ", "").split(","):
        first, dash, last = part.partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise FigureError(f"seeds {text!r}: write N, A-B or A, B")
        seeds.extend(range(int(first), int(last) + 1) if dash else [int(first)])
    return seeds


def phases(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each phase of an experiment file by name, with the environments it inherits."""
    environments = data.get("environments") or []
    result = {}
    for phase in data.get("phases") or [{"name": "main"}]:
        environments = phase.get("environments", environments)
        result[str(phase.get("name"))] = {**phase, "environments": environments}
    return result


def figures(path: Path) -> list[Figure]:
    """Every figure in the header of ``path``, one per seed (:class:`FigureError` for a line
    that looks like figures and does not parse, or names a phase the file does not have)."""
    data = yaml.safe_load(path.read_text()) or {}
    names = phases(data) if "environments" in data else {}
    found = []
    for line in header(path):
        match = FIGURE_LINE.match(line)
        if match is None:
            if LOOKS_LIKE_FIGURES.match(line):
                raise FigureError(f"{path.name}: {line!r}: write '#   seed N: <figure>; ...'")
            continue
        seeds = parse_seeds(match["seeds"])
        for text in match["figures"].split(";"):
            text = text.strip()
            figure = FIGURE.match(text)
            if figure is None:
                raise FigureError(f"{path.name}: {text!r} is not '<phase> <measure> [>=|<=] "
                                  f"<value>' with a measure of {', '.join(MEASURES)}")
            if figure["phase"] not in names:
                raise FigureError(f"{path.name}: {text!r}: the file has no phase "
                                  f"{figure['phase']!r} (it has {', '.join(names) or 'none'})")
            value = figure["value"]
            decimals = len(value.partition(".")[2])
            scale = 1000 if figure["k"] else 1
            for seed in seeds:
                found.append(Figure(seed, figure["phase"], figure["measure"],
                                    figure["op"] or "=", float(value) * scale, decimals, scale,
                                    text))
    return found


def command(path: Path) -> str:
    """The mosaic command the header of ``path`` runs it with (experiment-start by default)."""
    for line in header(path):
        match = COMMAND.search(line)
        if match and match["file"] == path.name:
            return match[1]
    return "experiment-start"


def learner_seats(phase: dict[str, Any]) -> set[str]:
    return {seat for environment in phase["environments"]
            for seat, agent in (environment.get("policy_mapping") or {}).items()
            if agent == LEARNER}


def measure(store: Path, phase: dict[str, Any], figure: Figure) -> float:
    with closing(sqlite3.connect(store)) as db:
        rows = db.execute("SELECT id, steps, episodes FROM runs WHERE uid LIKE ?",
                          (f"%-{figure.phase}",)).fetchall()
        if len(rows) != 1:
            raise SystemExit(f"{store}: {len(rows)} runs of phase {figure.phase!r}")
        run_id, steps, episodes = rows[0]
        if figure.measure == "env steps":
            return float(steps)
        if figure.measure == "episodes":
            return float(episodes)
        rows = db.execute("SELECT total_return, returns FROM episodes WHERE run_id = ? AND "
                          "evaluation = 0 ORDER BY id", (run_id,)).fetchall()
    if not rows:
        raise SystemExit(f"{store}: no episodes in phase {figure.phase!r}")
    if figure.measure == "mean return":
        return sum(value for value, _ in rows) / len(rows)
    if figure.measure == "last-20 mean":
        last = [value for value, _ in rows[-WINDOW:]]
        return sum(last) / len(last)
    seats = learner_seats(phase)
    if not seats:
        raise SystemExit(f"no seat of the agent {LEARNER!r} in phase {figure.phase!r}")
    wins = sum(any(json.loads(returns)[seat] > 0 for seat in seats) for _, returns in rows)
    return wins / len(rows)


def run(path: Path, seed: int | None, folder: Path) -> tuple[Path, float, str]:
    """Run ``path`` as its header says, from ``folder``; its store, wall seconds and error."""
    store = folder / f"{path.stem}-{seed}.sqlite"
    how = command(path)
    args = [sys.executable, "-m", "mosaic", how, str(path), "--store", str(store), "--quiet"]
    if how == "evaluate":
        args += ["--telemetry", str(folder / "telemetry")]
    if seed is not None:
        args += ["--set", f"seed={seed}"]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1"}
    started = time.perf_counter()
    result = subprocess.run(args, cwd=folder, env=env, capture_output=True, text=True,
                            timeout=1800)
    seconds = time.perf_counter() - started
    error = ""
    if result.returncode != 0:
        error = f"exit {result.returncode}: {result.stderr.strip()[-1500:]}"
    else:
        with closing(sqlite3.connect(store)) as db:
            bad = db.execute("SELECT uid, status, error FROM runs WHERE status != 'finished'"
                             ).fetchall()
        if bad:
            error = f"runs not finished: {bad}"
    return store, seconds, error


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def check(path: Path, folder: Path) -> bool:
    """Run ``path`` on its seeds and print its figures; whether all hold and every run ran."""
    name = path.stem
    if name in NOT_RUN:
        print(f"{name}: not run: {NOT_RUN[name]}", flush=True)
        return True
    stated = figures(path)
    data = yaml.safe_load(path.read_text()) or {}
    by_name = phases(data) if "environments" in data else {}
    seeds = sorted({figure.seed for figure in stated}, key=lambda s: (s != data.get("seed"), s))
    print(f"{name}: {len(stated)} figure(s), seeds {', '.join(map(str, seeds))}" if stated
          else f"{name}: no figures stated; runs as `mosaic {command(path)}`", flush=True)
    ok = True
    for seed in seeds or [None]:
        store, seconds, error = run(path, seed, folder)
        label = "the file's seed" if seed is None else f"seed {seed}"
        if error:
            print(f"  {label}: FAILED after {seconds:.1f} s ({load()}): {error}", flush=True)
            ok = False
            continue
        print(f"  {label}: ran in {seconds:.1f} s ({load()})", flush=True)
        for figure in (f for f in stated if f.seed == seed):
            measured = measure(store, by_name[figure.phase], figure)
            holds = figure.holds(measured)
            ok &= holds
            print(f"    {figure.text:<36} measured {figure.show(measured):<18} "
                  f"{'holds' if holds else 'DOES NOT HOLD'}", flush=True)
    return ok


def main() -> int:
    names = sorted(path.stem for path in EXAMPLES.glob("*.yml"))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=names, metavar="NAME",
                        help=f"examples to run, by file stem: {', '.join(names)}")
    parser.add_argument("--list", action="store_true", help="print the figures; run nothing")
    args = parser.parse_args()
    chosen = args.only or names
    if args.list:
        for name in chosen:
            for figure in figures(EXAMPLES / f"{name}.yml"):
                print(f"{name}: seed {figure.seed}: {figure.text}")
        return 0
    print(f"examples: {len(chosen)}; {load()} on {os.cpu_count()} CPUs", flush=True)
    started = time.perf_counter()
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in chosen:
            if not check(EXAMPLES / f"{name}.yml", Path(tmp)):
                failed.append(name)
    print(f"{time.perf_counter() - started:.0f} s in all ({load()})")
    print("every figure holds" if not failed else f"FIGURES NOT KEPT: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
