"""Plain-text formatting of runs for the command line (``mosaic runs list`` and ``runs show``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from mosaic.core.run_states import RunStatus
from mosaic.core.text_table import format_table
from mosaic.store._records import EpisodeStats, EpisodeSummary, RunDetail, RunSummary


def format_runs_table(runs: Sequence[RunSummary]) -> str:
    """The runs as an aligned plain-text table, one line per run (``no runs`` if empty), with
    each run's mean return over its last 100 episodes and over all of them (per agent in a run
    of several agents, see :func:`format_means`).

    Runs of a sweep show their values, one column per key path, and a second table groups
    them by those values: how many runs each point has, how many finished, and the mean and
    range of their mean returns (last 100).
    """
    if not runs:
        return "no runs"
    paths = list(dict.fromkeys(path for run in runs for path in run.params))
    headers = [
        "RUN",
        "EXPERIMENT",
        "#",
        "SEED",
        *paths,
        "STATUS",
        "STARTED",
        "DURATION",
        "EPISODES",
        "STEPS",
        "MEAN RETURN (LAST 100)",
        "(ALL)",
        "ERROR",
    ]
    rows = [
        [
            run.uid,
            run.experiment,
            str(run.run_index),
            _text(run.seed),
            *(_param(run.params, path) for path in paths),
            run.status,
            _local(run.started_at),
            _run_duration(run),
            str(run.episodes),
            str(run.steps),
            format_means(run.recent_mean_return, run.agent_recent_means),
            format_means(run.mean_return, run.agent_means),
            _first_line(run.error, 50),
        ]
        for run in runs
    ]
    shift = len(paths)
    table = format_table(headers, rows, right={2, 3, *(i + shift for i in (6, 7, 8, 9, 10))})
    if not paths:
        return table
    return "\n\n".join([table, _by_params(runs, paths), *_best_points(runs, paths)])


def _best_points(runs: Sequence[RunSummary], paths: list[str]) -> list[str]:
    """A line per experiment of a search: its best point, whose runs all finished (none
    pruned), by the mean of what they reported last."""
    points: dict[str, dict[tuple[str, ...], list[RunSummary]]] = {}
    for run in runs:
        if run.search is not None:
            values = tuple(_param(run.params, path) for path in paths)
            points.setdefault(run.experiment, {}).setdefault(values, []).append(run)
    lines = []
    for experiment, groups in points.items():
        best: tuple[float, tuple[str, ...], list[RunSummary]] | None = None
        for values, members in groups.items():
            reported = [run.search.value for run in members if run.search is not None]
            if any(run.status != RunStatus.FINISHED for run in members) or None in reported:
                continue
            value = sum(v for v in reported if v is not None) / len(reported)
            search = members[0].search
            higher = search is None or search.direction == "maximize"
            if best is None or (value > best[0] if higher else value < best[0]):
                best = (value, values, members)
        if best is None:
            lines.append(f"best point of {experiment}: none (no point whose runs all finished)")
            continue
        value, values, members = best
        metric = members[0].search.metric if members[0].search is not None else "return"
        shown = " ".join(f"{path}={text}" for path, text in zip(paths, values, strict=True)
                         if text != "-")
        lines.append(f"best point of {experiment}: {shown}: {metric} {_number(value)} "
                     f"(mean of {len(members)} run(s))")
    return lines


def _by_params(runs: Sequence[RunSummary], paths: list[str]) -> str:
    """One line per combination of sweep values: runs, finished runs, and the mean and range
    of their mean returns over their last 100 episodes (where each run ended up)."""
    groups: dict[tuple[str, ...], list[RunSummary]] = {}
    for run in runs:
        groups.setdefault(tuple(_param(run.params, path) for path in paths), []).append(run)
    rows = []
    for values, members in groups.items():
        means = [run.recent_mean_return for run in members
                 if run.recent_mean_return is not None]
        # Runs of several agents: each agent's mean and range over the runs, not the total's.
        by_agent: dict[str, list[float]] = {}
        for run in members:
            if len(run.agent_recent_means) > 1:
                for agent, value in run.agent_recent_means.items():
                    by_agent.setdefault(agent, []).append(value)
        spread = ", ".join(f"{agent} {_number(min(seen))} .. {_number(max(seen))}"
                           for agent, seen in sorted(by_agent.items()))
        rows.append([
            *values,
            str(len(members)),
            str(sum(run.status == RunStatus.FINISHED for run in members)),
            format_means(sum(means) / len(means) if means else None,
                         {agent: sum(seen) / len(seen) for agent, seen in by_agent.items()}),
            spread or (f"{_number(min(means))} .. {_number(max(means))}" if means else "-"),
        ])
    headers = [*paths, "RUNS", "FINISHED", "MEAN RETURN (LAST 100)", "RANGE"]
    shift = len(paths)
    return "by sweep values\n" + format_table(headers, rows, right={shift, shift + 1, shift + 2})


def _param(params: dict[str, Any], path: str) -> str:
    if path not in params:
        return "-"
    value = params[path]
    if isinstance(value, float):
        return f"{value:.4g}"
    return json.dumps(value) if isinstance(value, list | dict) else str(value)


def format_run_detail(detail: RunDetail) -> str:
    """One run's details as plain text: facts, transitions and a few episodes."""
    run, stats = detail.run, detail.episode_stats
    facts = [
        ("run", f"{run.uid} (id {run.id})"),
        (
            "experiment",
            run.experiment + (f" ({detail.experiment_file})" if detail.experiment_file else ""),
        ),
        ("index", str(run.run_index)),
        ("seed", _text(run.seed)),
        ("status", run.status),
        ("started", _local(run.started_at)),
        ("ended", _local(run.ended_at)),
        ("duration", _run_duration(run)),
        ("process", f"pid {_text(detail.pid)} on {_text(detail.hostname)}"),
        ("episodes", f"{run.episodes} ({stats.count} recorded)"),
        ("steps", f"{run.steps} ({detail.step_rows} step rows stored)"),
        *_mean_returns(run, stats),
        ("mean length", _number(stats.mean_steps) + (" steps" if stats.count else "")),
        ("digest", _text(detail.digest)),
    ]
    if run.status == "interrupted":
        facts.append(("last seen", _local(detail.last_heartbeat)))
    if run.error:
        facts.append(("error", run.error.strip()))
    width = max(len(name) for name, _ in facts)
    lines = [f"{name.ljust(width)}  {value}" for name, value in facts]
    lines += ["", "transitions"]
    if detail.transitions:
        table = format_table(
            ["SEQ", "AT", "FROM", "TO", "REASON"],
            [
                [
                    str(t.seq),
                    _local(t.at),
                    _text(t.from_state),
                    t.to_state,
                    _first_line(t.reason, 60),
                ]
                for t in detail.transitions
            ],
            right={0},
        )
        lines += ["  " + line for line in table.splitlines()]
    else:
        lines.append("  none recorded")
    shown = detail.first_episodes + detail.last_episodes
    if detail.last_episodes:
        title = (
            f"episodes (first {len(detail.first_episodes)} and last "
            f"{len(detail.last_episodes)} of {stats.count})"
        )
    else:
        title = "episodes"
    lines += ["", title]
    if shown:
        # A run with copies numbers each copy's episodes from 0: the copy tells them apart.
        copies = any(ep.copy for ep in shown)
        rows = [_episode_cells(ep, copies) for ep in detail.first_episodes]
        if detail.last_episodes:
            rows.append(["..."] + [""] * (7 if copies else 6))
            rows += [_episode_cells(ep, copies) for ep in detail.last_episodes]
        headers = ["ENVIRONMENT", *(["COPY"] if copies else []), "EPISODE", "STEPS", "RETURN",
                   "END", "SEED", "RETURNS"]
        table = format_table(headers, rows,
                       right={1, 2, 3, 4, 6} if copies else {1, 2, 3, 5})
        lines += ["  " + line for line in table.splitlines()]
    else:
        lines.append("  none recorded")
    return "\n".join(lines)


def format_means(total: float | None, by_agent: Mapping[str, float],
                 number: Callable[[float | None], str] | None = None) -> str:
    """A mean return as the summary, ``runs list`` and ``runs show`` give it: ``total``, or in
    a run of several agents each agent's (``learner 0.68, past -0.68``), whose total says
    nothing in a zero-sum game. ``number`` formats a value (default: 4 significant digits)."""
    shown = number or _number
    if len(by_agent) > 1:
        return ", ".join(f"{agent} {shown(value)}" for agent, value in sorted(by_agent.items()))
    return shown(total)


def _mean_returns(run: RunSummary, stats: EpisodeStats) -> list[tuple[str, str]]:
    """The last episodes' first: where a learning run ended, not its average on the way."""
    if not stats.count:
        return [("mean return", "-")]
    spread = f"min {_number(stats.min_return)}, max {_number(stats.max_return)}"
    several = len(run.agent_means) > 1
    recent = format_means(stats.recent_mean_return, stats.agent_recent_means)
    every = format_means(stats.mean_return, run.agent_means)
    if several:
        recent += f" (total {_number(stats.recent_mean_return)})"
        spread = f"total {_number(stats.mean_return)}, {spread}"
    # Named as runs list's columns are, under one label that keeps the facts' column narrow.
    return [
        ("mean return", f"(last {stats.recent}) {recent}"),
        ("", f"(all) {every} over {stats.count} episodes ({spread})"),
    ]


def _episode_cells(ep: EpisodeSummary, copies: bool = False) -> list[str]:
    end = "terminated" if ep.terminated else "truncated" if ep.truncated else "-"
    returns = ", ".join(f"{k}={_number(v)}" for k, v in sorted(ep.returns.items()))
    return [
        ep.environment,
        *([str(ep.copy)] if copies else []),
        str(ep.episode),
        str(ep.steps),
        _number(ep.total_return),
        end,
        _text(ep.seed),
        _first_line(returns, 60),
    ]


def _text(value: Any) -> str:
    return "-" if value is None else str(value)


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.1f}"


def _first_line(text: str | None, limit: int) -> str:
    if not text:
        return ""
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= limit else first[: limit - 3] + "..."


def _local(when: datetime | None) -> str:
    return "-" if when is None else when.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _run_duration(run: RunSummary) -> str:
    # An interrupted run's end is not stored: what it stored last is a lower bound of it.
    text = _duration(run.duration)
    return f">={text}" if run.status == "interrupted" and run.duration is not None else text


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"
