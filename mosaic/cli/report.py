"""What a user sees while a run steps, and the summary at the end."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from mosaic.conductors.run_context import RunContext
from mosaic.orchestration.executor import RunResult

#: Redraw the progress line at most this often (seconds).
REDRAW_S = 0.2


class ProgressLine:
    """A one-line progress display on a terminal; silent when the stream is not a terminal."""

    def __init__(self, runs: int, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self.runs = runs
        self._last_draw = 0.0
        self._width = 0
        self._started: dict[int, tuple[float, int]] = {}
        self._lock = threading.Lock()

    def update(self, index: int, ctx: RunContext) -> None:
        """Redraw for run ``index``; called from each run's thread (several with --jobs)."""
        with self._lock:
            self._update(index, ctx)

    def _update(self, index: int, ctx: RunContext) -> None:
        now = time.monotonic()
        if not self.enabled or now - self._last_draw < REDRAW_S:
            return
        self._last_draw = now
        p = ctx.progress
        started_at, _ = self._started.setdefault(index, (now, p.steps))
        rate = p.steps / (now - started_at) if now > started_at else 0.0
        last = f" | last return {p.last_return:.2f}" if p.last_return is not None else ""
        text = (f"run {index + 1}/{self.runs} | episode {p.episodes}/{p.episodes_total} | "
                f"{p.steps:,} steps | {rate:,.0f} steps/s{last}")
        self.stream.write("\r" + text.ljust(self._width))
        self._width = len(text)
        self.stream.flush()

    def clear(self) -> None:
        with self._lock:
            self._clear()

    def _clear(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0


def _mean(result: RunResult) -> str:
    """The mean return; per agent when several agents share the environments."""
    if len(result.agent_means) > 1:
        return " ".join(f"{agent} {value:.2f}"
                        for agent, value in sorted(result.agent_means.items()))
    return f"{result.mean_return:.2f}" if result.mean_return is not None else "-"


def format_run_line(result: RunResult) -> str:
    """One line per finished run, printed as soon as it ends."""
    mean = _mean(result)
    phase = f" ({result.phase})" if result.phase != "main" else ""
    line = (f"run {result.index + 1}{phase} {result.status}: {result.episodes} episodes, "
            f"{result.steps:,} steps, mean return {mean}, {result.wall_time:.2f} s")
    if result.error:
        line += f"\n  error: {result.error}"
    if result.killed:
        line += f"\n  killed at shutdown: {', '.join(result.killed)}"
    return line


def format_summary(results: list[RunResult], store_path: str) -> str:
    """The table at the end of ``mosaic experiment-start``."""
    headers = ("run", "seed", "status", "episodes", "steps", "mean return", "wall time", "steps/s",
               "digest")
    rows = []
    for r in results:
        rate = r.steps / r.wall_time if r.wall_time > 0 else 0.0
        rows.append((r.uid, str(r.seed), r.status, str(r.episodes), f"{r.steps:,}",
                     _mean(r),
                     f"{r.wall_time:.2f} s", f"{rate:,.0f}", (r.digest or "-")[:16]))
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    total_steps = sum(r.steps for r in results)
    total_episodes = sum(r.episodes for r in results)
    lines.append("")
    lines.append(f"{len(results)} run(s), {total_episodes} episodes, {total_steps:,} steps.")
    lines.append(f"Results: {store_path}")
    lines.append(f"  mosaic runs list --store {store_path}")
    if results:
        lines.append(f"  mosaic runs show {results[-1].uid} --store {store_path}")
    return "\n".join(lines)
