"""What a user sees while runs step: a progress bar per active run, or plain lines.

On a terminal (or in a notebook), :class:`ProgressDisplay` draws one line per active run with
rich: a bar, the percentage of its episodes, the ETA, steps/s and the mean return of the last
:data:`~mosaic.conductors.run_context.RECENT_EPISODES` episodes; a run's line goes when the run
ends. Elsewhere (a CI log, a file) it writes a plain line each time a run passes another tenth
of its episodes, without control characters, so that a log reads top to bottom.

It never starts a thread: the executor's callbacks draw it, at most every :data:`REDRAW_S`.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from mosaic.conductors.run_context import RECENT_EPISODES, RunContext

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

__all__ = ["REDRAW_S", "ProgressDisplay"]

#: Redraw a live display at most this often (seconds).
REDRAW_S = 0.2
#: A plain line each time a run passes another this many percent of its episodes.
PLAIN_STEP_PERCENT = 10


@dataclass
class _Run:
    """What the display keeps of one active run."""

    started_at: float
    steps_at_start: int
    task: TaskID | None = None
    reported_percent: int = -1


class ProgressDisplay:
    """Progress of an experiment's runs on ``stream`` (default: stderr).

    ``live``: ``True`` draws bars (which need a terminal or a notebook to be seen), ``False``
    writes plain lines, ``None`` picks bars when ``stream`` is a terminal or a notebook's.
    :meth:`update` and :meth:`run_ended` may be called from any thread (one per run with
    ``--jobs``); :meth:`close` removes the bars.
    """

    def __init__(self, runs: int, stream: TextIO | None = None, *,
                 live: bool | None = None) -> None:
        from rich.console import Console

        self.stream = stream or sys.stderr
        self.runs = runs
        self.console = Console(file=self.stream, highlight=False)
        self.live = (self.console.is_terminal or self.console.is_jupyter) if live is None else live
        self._runs: dict[int, _Run] = {}
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
            now = time.monotonic()
            p = ctx.progress
            run = self._runs.get(index)
            if run is None:
                run = self._runs[index] = _Run(now, p.steps)
            rate = (p.steps - run.steps_at_start) / (now - run.started_at) if (
                now > run.started_at) else 0.0
            mean = p.recent_mean
            shown_rate, shown_mean = f"{rate:,.0f}", "-" if mean is None else f"{mean:.2f}"
            fields = {"rate": shown_rate, "mean": shown_mean}
            total = p.episodes_total or None
            if self._progress is not None:
                if run.task is None:
                    run.task = self._progress.add_task(f"run {index + 1}/{self.runs}",
                                                       total=total, rate=shown_rate,
                                                       mean=shown_mean)
                self._progress.update(run.task, total=total, completed=p.episodes,
                                      rate=shown_rate, mean=shown_mean)
                if now - self._last_draw >= REDRAW_S:
                    self._last_draw = now
                    self._progress.refresh()
            elif total:
                self._plain(index, run, p.episodes, total, now, fields)

    def _plain(self, index: int, run: _Run, episodes: int, total: int, now: float,
               fields: dict[str, str]) -> None:
        percent = min(100, episodes * 100 // total)
        step = percent - percent % PLAIN_STEP_PERCENT
        if step <= run.reported_percent or episodes == 0:
            return
        run.reported_percent = step
        elapsed = now - run.started_at
        eta = elapsed * (total - episodes) / episodes
        self._write(f"run {index + 1}/{self.runs}: {percent}% ({episodes}/{total} episodes), "
                    f"ETA {_duration(eta)}, {fields['rate']} steps/s, "
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
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[rate]} steps/s"),
        TextColumn(f"mean return (last {RECENT_EPISODES}) {{task.fields[mean]}}"),
        console=console,
        auto_refresh=False,  # redrawn by the callbacks: no thread of its own
        transient=True,
        redirect_stdout=False,
        redirect_stderr=False,
    )


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
