"""What a user sees while runs step: a progress bar per active run, or plain lines.

On a terminal (or in a notebook), :class:`ProgressDisplay` draws one line per active run with
rich: a bar, the percentage done, the ETA, what is done of how much, steps/s and the mean return
of the last :data:`~mosaic.stepping.progress.RECENT_EPISODES` episodes (per agent when
several agents play); a run's line goes when the run ends. Elsewhere (a CI log, a file) it
writes a plain line each time a run passes another tenth, without control characters, so that
a log reads top to bottom.

A run that learns counts env steps: a learner's episodes grow longer as it learns (CartPole's
from 20 steps to 500), so a share of its episodes says little of the time left. Its total is
the steps taken plus the episodes left times the length of its recent episodes, and its ETA
the steps left at its rate of steps. A run that does not learn counts episodes.

It never starts a thread: the executor's callbacks draw it, at most every :data:`REDRAW_S`.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

from mosaic.conductors.run_context import RunContext
from mosaic.messages import RunConfig
from mosaic.stepping import progress as run_progress
from mosaic.stepping.progress import RECENT_EPISODES
from mosaic.store import format_means

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

__all__ = ["REDRAW_S", "ProgressDisplay"]

#: Redraw a live display at most this often (seconds).
REDRAW_S = 0.2
#: A plain line each time a run passes another this many percent of its episodes or steps.
PLAIN_STEP_PERCENT = 10


@dataclass
class _Run:
    """What the display keeps of one active run."""

    started_at: float
    steps_at_start: int
    #: Whether it counts env steps (a run that learns) rather than episodes.
    in_steps: bool = False
    #: What was done when the display first saw it, in its unit (None: not yet).
    done_at_start: int | None = None
    task: TaskID | None = None
    reported_percent: int = -1
    #: (episodes, steps) each time its episodes changed: the length of its recent episodes.
    seen: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=RECENT_EPISODES))

    def totals(self, p: run_progress.Progress) -> tuple[int, int | None]:
        """What is done and of how much, in the run's unit (the total None while unknown)."""
        if not self.in_steps:
            return p.episodes, p.episodes_total or None
        if not self.seen or self.seen[-1][0] != p.episodes:
            self.seen.append((p.episodes, p.steps))
        if not p.episodes_total or not p.episodes:
            return p.steps, None
        left = max(p.episodes_total - p.episodes, 0)
        # Over the last tenth of its episodes (1 to RECENT_EPISODES of them), where it stands.
        window = min(RECENT_EPISODES, max(1, p.episodes_total // 10))
        before = [(e, s) for e, s in self.seen if e < p.episodes] or [(0, 0)]
        episodes, steps = next(((e, s) for e, s in before if e >= p.episodes - window),
                               before[-1])
        length = (p.steps - steps) / (p.episodes - episodes)
        return p.steps, p.steps + round(left * length)

    def eta(self, done: int, total: int | None, now: float) -> float | None:
        """Seconds left: what is left of ``total`` at the rate ``done`` grew since the display
        first saw the run (steps for a run that counts steps)."""
        if self.done_at_start is None:
            self.done_at_start = done
        if total is not None and done >= total:
            return 0.0
        if total is None or now <= self.started_at:
            return None
        rate = (done - self.done_at_start) / (now - self.started_at)
        return max(total - done, 0) / rate if rate > 0 else None


def counts_steps(config: RunConfig) -> bool:
    """Whether a run of ``config`` shows its progress in env steps: a training phase with a
    learner, an agent whose brain is not the NoOpBrain (told by its class's name, so that no
    user module is imported here)."""
    return config.mode == "train" and any(
        agent.self_play is None
        and agent.brain.class_path.replace(":", ".").rsplit(".", 1)[-1] != "NoOpBrain"
        for agent in config.agents)


class ProgressDisplay:
    """Progress of an experiment's runs on ``stream`` (default: stderr).

    ``live``: ``True`` draws bars (which need a terminal or a notebook to be seen), ``False``
    writes plain lines, ``None`` picks bars when ``stream`` is a terminal or a notebook's;
    ``clock`` tells the time (seconds), from which rates and ETAs are measured.
    :meth:`update` and :meth:`run_ended` may be called from any thread (one per run with
    ``--jobs``); :meth:`close` removes the bars.
    """

    def __init__(self, runs: int, stream: TextIO | None = None, *,
                 live: bool | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        from rich.console import Console

        self.stream = stream or sys.stderr
        self.runs = runs
        self.console = Console(file=self.stream, highlight=False)
        self.live = (self.console.is_terminal or self.console.is_jupyter) if live is None else live
        self._runs: dict[int, _Run] = {}
        self._clock = clock
        self._lock = threading.Lock()
        self._last_draw = 0.0
        self._progress: Progress | None = None
        if self.live:
            self._progress = _bars(self.console)
            self._progress.start()

    def update(self, index: int, ctx: RunContext) -> None:
        """Show run ``index``'s progress (an :class:`~mosaic.orchestration.executor.Executor`
        ``on_progress`` callback)."""
        with self._lock:
            now = self._clock()
            p = ctx.progress
            run = self._runs.get(index)
            if run is None:
                run = self._runs[index] = _Run(now, p.steps, counts_steps(ctx.config))
            rate = (p.steps - run.steps_at_start) / (now - run.started_at) if (
                now > run.started_at) else 0.0
            done, total = run.totals(p)
            eta = run.eta(done, total, now)
            unit = "env steps" if run.in_steps else "episodes"
            # Copies: the controller appends meanwhile.
            recents = {agent: list(recent) for agent, recent in
                       list(p.agent_recent_returns.items())}
            agents = {agent: sum(recent) / len(recent)
                      for agent, recent in recents.items() if recent}
            fields = {
                "rate": f"{rate:,.0f}",
                "mean": format_means(p.recent_mean, agents, _two_digits),
                "eta": "-" if eta is None else _duration(eta),
                "count": f"{done:,}/{'?' if total is None else f'{total:,}'} {unit}",
            }
            if self._progress is not None:
                if run.task is None:
                    run.task = self._progress.add_task(
                        f"run {index + 1}/{self.runs}", total=total, rate=fields["rate"],
                        mean=fields["mean"], eta=fields["eta"], count=fields["count"])
                self._progress.update(run.task, total=total, completed=done, rate=fields["rate"],
                                      mean=fields["mean"], eta=fields["eta"],
                                      count=fields["count"])
                if now - self._last_draw >= REDRAW_S:
                    self._last_draw = now
                    self._progress.refresh()
            elif total:
                self._plain(index, run, p.episodes, done, total, fields)

    def _plain(self, index: int, run: _Run, episodes: int, done: int, total: int,
               fields: dict[str, str]) -> None:
        percent = min(100, done * 100 // total)
        step = percent - percent % PLAIN_STEP_PERCENT
        # A learner's estimated total grows as its episodes lengthen: a share that fell by more
        # than a tenth is said too, rather than nothing until it is passed again.
        if episodes == 0 or run.reported_percent - PLAIN_STEP_PERCENT <= step <= (
                run.reported_percent):
            return
        run.reported_percent = step
        self._write(f"run {index + 1}/{self.runs}: {percent}% ({fields['count']}), "
                    f"ETA {fields['eta']}, {fields['rate']} steps/s, "
                    f"mean return (last {RECENT_EPISODES}) {fields['mean']}")

    def run_ended(self, index: int, line: str | None = None) -> None:
        """Remove run ``index``'s bar, and print ``line`` (its summary) above the bars."""
        with self._lock:
            run = self._runs.pop(index, None)
            if self._progress is not None and run is not None and run.task is not None:
                self._progress.remove_task(run.task)
                self._progress.refresh()
            if line is not None:
                self._write(line)

    def print(self, line: str) -> None:
        """Print ``line`` above the bars (or as a plain line)."""
        with self._lock:
            self._write(line)

    def _write(self, line: str) -> None:
        if self._progress is not None:
            self._progress.console.print(line, markup=False, highlight=False, soft_wrap=True)
        else:
            self.stream.write(line + "\n")
            self.stream.flush()

    def close(self) -> None:
        """Remove the bars; idempotent."""
        with self._lock:
            if self._progress is not None:
                self._progress.stop()
                self._progress = None


def _bars(console: Console) -> Progress:
    from rich.progress import (
        BarColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
    )

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("ETA {task.fields[eta]}"),
        TextColumn("{task.fields[count]}"),
        TextColumn("{task.fields[rate]} steps/s"),
        TextColumn(f"mean return (last {RECENT_EPISODES}) {{task.fields[mean]}}"),
        console=console,
        auto_refresh=False,  # redrawn by the callbacks: no thread of its own
        transient=True,
        redirect_stdout=False,
        redirect_stderr=False,
    )


def _two_digits(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
