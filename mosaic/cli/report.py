"""What ``mosaic experiment-start`` prints about its runs: the title, a line per run that
ends, and the summary table (progress bars: :mod:`mosaic.api.progress`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mosaic.core.run_states import RunStatus
from mosaic.core.text_table import format_table
from mosaic.orchestration.executor import RunResult
from mosaic.stepping.progress import RECENT_EPISODES
from mosaic.store import format_means

if TYPE_CHECKING:
    from mosaic.experiment import Experiment

def format_title(experiment: Experiment) -> str:
    """The first line of ``mosaic experiment-start``: what is about to run."""
    if experiment.points or experiment.search is not None:
        return (f"mosaic: experiment {experiment.uid!r}: {experiment.run_count} run(s) = "
                f"{experiment.run_count // experiment.runs} "
                f"{'search' if experiment.search is not None else 'sweep'} point(s) x "
                f"{experiment.runs} seed(s), seed {experiment.seed}")
    schedule = ", ".join(
        f"{config.phase} ({config.mode}, {config.episodes} episodes)"
        for config in (experiment.run_config(0, p)
                       for p in range(len(experiment.phase_names()))))
    if not experiment.phases:
        schedule = f"{experiment.episodes} episode(s)"
    return (f"mosaic: experiment {experiment.uid!r}: {experiment.runs} run(s) x {schedule}, "
            f"seed {experiment.seed}")


def _mean(result: RunResult) -> str:
    """The mean return of the last RECENT_EPISODES episodes; per agent when several agents
    share the environments (as ``runs list`` gives it)."""
    return format_means(result.recent_mean, result.agent_recent_means, _two_digits)


def _two_digits(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _param(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def format_run_line(result: RunResult) -> str:
    """One line per finished run, printed as soon as it ends."""
    mean = _mean(result)
    phase = f" ({result.phase})" if result.phase != "main" else ""
    values = "".join(f" {path}={_param(value)}" for path, value in result.params.items())
    if result.earlier:
        return (f"run {result.index + 1}{phase}{values} finished before: {result.episodes} "
                f"episodes, {result.steps:,} steps; not run again")
    line = (f"run {result.index + 1}{phase}{values} {result.status}: {result.episodes} episodes, "
            f"{result.steps:,} steps, mean return (last {RECENT_EPISODES}) {mean}, "
            f"{result.wall_time:.2f} s")
    if result.node is not None:
        line += f", on Ray {result.node}"
    if result.ended_early:
        line += (f"\n  ended early: {result.ended_early}" if result.status == RunStatus.PRUNED else
                 f"\n  ended early by its termination condition: {result.ended_early}")
    if result.error:
        line += f"\n  error: {result.error}"
    if result.killed:
        line += f"\n  killed at shutdown: {', '.join(result.killed)}"
    return line


def format_summary(results: list[RunResult], store_path: str,
                   fallbacks: dict[str, tuple[int, float]] | None = None,
                   best: str | None = None) -> str:
    """The table at the end of ``mosaic experiment-start``.

    ``fallbacks`` (run uid -> actions accounted, fallbacks; from the ``llm.fallback`` metric)
    adds a line per run whose operators account for LLM calls; ``best`` (a search's best
    point, in words) a line of its own.
    """
    paths = list(dict.fromkeys(path for r in results for path in r.params))
    headers = ("run", "seed", *paths, "status", "episodes", "steps",
               f"mean return (last {RECENT_EPISODES})", "wall time", "steps/s", "digest")
    rows = []
    for r in results:
        rate = r.steps / r.wall_time if r.wall_time > 0 else 0.0
        rows.append((r.uid, str(r.seed),
                     *(_param(r.params[path]) if path in r.params else "-" for path in paths),
                     r.status, str(r.episodes), f"{r.steps:,}", _mean(r),
                     f"{r.wall_time:.2f} s", f"{rate:,.0f}", (r.digest or "-")[:16]))
    lines = [format_table(headers, rows)]
    total_steps = sum(r.steps for r in results)
    total_episodes = sum(r.episodes for r in results)
    lines.append("")
    for r in results:
        if r.ended_early:
            lines.append(f"Ended early: {r.uid}: {r.ended_early} "
                         f"({'search' if r.status == RunStatus.PRUNED else 'termination'})")
        if fallbacks and r.uid in fallbacks:
            actions, fell_back = fallbacks[r.uid]
            lines.append(f"LLM fallbacks: {r.uid}: {int(fell_back)} of {actions} actions "
                         f"(metric llm.fallback)")
    if best is not None:
        lines.append(best)
    lines.append(f"{len(results)} run(s), {total_episodes} episodes, {total_steps:,} steps.")
    lines.append(f"Results: {store_path}")
    lines.append(f"  mosaic runs list --store {store_path}")
    if results:
        lines.append(f"  mosaic runs show {results[-1].uid} --store {store_path}")
    return "\n".join(lines)
