"""The dashboard's HTML, rendered on the server: the page frame, the runs table and its rows,
and a run's summary, transitions and episodes.

Every value from the store is escaped. Fragments that change while a run goes on (a row of the
runs table, a run's sections) are rendered by the same functions for the first page and for
the live updates, so the page never renders them a second way in script.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from html import escape
from typing import Any

from mosaic.store import RunDetail, RunSummary, format_means

__all__ = [
    "page",
    "run_row",
    "run_sections",
    "runs_table",
]

_NAV = (("/", "Runs"), ("/compare", "Compare"), ("/manual", "Manual mode"))


def page(title: str, body: str, *, where: str, script: str | None = None,
         data: dict[str, Any] | None = None) -> str:
    """A whole page: the navigation, ``body``, and ``/static/<script>`` given ``data`` as JSON."""
    nav = "".join(f'<a href="{href}">{name}</a>' for href, name in _NAV)
    scripts = '<script src="/static/chart.js"></script>'
    if script:
        scripts += f'<script src="/static/{script}"></script>'
    # A script element's text is not HTML-decoded: keep it JSON, with no "<" to end it early.
    payload = json.dumps(data or {}).replace("<", "\\u003c")
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{escape(title)} · mosaic</title>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        '<link rel=stylesheet href="/static/style.css"></head><body>'
        f'<header><strong>mosaic</strong><nav>{nav}</nav>'
        f'<span class=where title="the store">{escape(where)}</span>'
        '<span id=live class=live title="live updates">●</span></header>'
        f"<main>{body}</main>"
        f'<script id=page-data type="application/json">{payload}</script>{scripts}'
        "</body></html>"
    )


def badge(status: str) -> str:
    """A run's status as a coloured label."""
    return f'<span class="badge s-{escape(status)}">{escape(status)}</span>'


def _num(value: float | None, digits: int = 2) -> str:
    return "&ndash;" if value is None else f"{value:,.{digits}f}"


def _when(at: datetime | None) -> str:
    return "&ndash;" if at is None else at.strftime("%Y-%m-%d %H:%M:%S")


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "&ndash;"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def _means(total: float | None, by_agent: dict[str, float], *, with_total: bool = False) -> str:
    """A mean return as every view gives it (see ``format_means``): per agent in a run of
    several, each agent's kept on one line; ``with_total`` adds the total after them."""
    if len(by_agent) < 2:
        return _num(total)
    shown = ", ".join(f"<span class=agent>{escape(agent)} {_num(value)}</span>"
                      for agent, value in sorted(by_agent.items()))
    return shown + (f" (total {_num(total)})" if with_total else "")


def _means_text(total: float | None, by_agent: dict[str, float]) -> str:
    """:func:`_means` as plain text, for a title."""
    return format_means(total, by_agent, lambda value: "-" if value is None else f"{value:,.2f}")


def _returns(returns: dict[str, float]) -> str:
    """An episode's return per env agent, as ``runs show`` gives it."""
    return ", ".join(f"{slot}={_num(value)}" for slot, value in sorted(returns.items()))


def _uid(uid: str) -> str:
    """A run's uid, free to wrap after each '-': the runs of an experiment differ only at
    its end (stamp, suffix, index, phase), which a cut would hide."""
    return escape(uid).replace("-", "-<wbr>")


def _params(params: dict[str, Any]) -> str:
    return " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                    for k, v in params.items())


RUN_COLUMNS = ("", "run", "status", "seed", "episodes", "steps", "mean return (last 100)", "digest",
               "parameters", "started", "duration", "error")


def run_row(run: RunSummary) -> str:
    """One row of the runs list (the search box matches its text)."""
    params = _params(run.params)
    digest = run.digest or ""
    error = run.error or ""
    return (
        f'<div class=row role=row data-run="{run.id}" data-experiment="{escape(run.experiment)}">'
        f'<div><input type=checkbox class=pick value="{run.id}"></div>'
        f'<div class=uid><a href="/runs/{run.id}" title="{escape(run.uid)}">{_uid(run.uid)}</a>'
        "</div>"
        f"<div>{badge(run.status)}</div>"
        f'<div class=num>{"&ndash;" if run.seed is None else run.seed}</div>'
        f"<div class=num>{run.episodes:,}</div><div class=num>{run.steps:,}</div>"
        f'<div class="num means" title="mean return (all): '
        f'{escape(_means_text(run.mean_return, run.agent_means))}">'
        f"{_means(run.recent_mean_return, run.agent_recent_means)}</div>"
        f'<div class=mono title="{escape(digest)}">{escape(digest[:12]) or "&ndash;"}</div>'
        f"<div>{escape(params) or '&ndash;'}</div><div>{_when(run.started_at)}</div>"
        f"<div class=num>{_duration(run.duration)}</div>"
        f'<div class=err title="{escape(error)}">{escape(error[:80])}</div></div>'
    )


def runs_table(runs: Sequence[RunSummary]) -> str:
    """The runs page's body: search box, compare button, and every run under its experiment.

    The list is a grid of rows rather than a table: rows outside the window are not laid out
    until scrolled to (``content-visibility``), which a table's rows cannot skip, so a store
    of a thousand runs shows as fast as one of fifty.
    """
    head = "".join(f"<div>{escape(c)}</div>" for c in RUN_COLUMNS)
    rows: list[str] = []
    experiment = None
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.experiment] = counts.get(run.experiment, 0) + 1
    for run in runs:
        if run.experiment != experiment:
            experiment = run.experiment
            rows.append(f'<div class="row experiment" data-experiment="{escape(experiment)}">'
                        f"<div>{escape(experiment)} <small>{counts[experiment]} run(s)</small>"
                        "</div></div>")
        rows.append(run_row(run))
    empty = "" if runs else "<p class=empty>The store holds no runs yet.</p>"
    return (
        '<div class=toolbar><input id=search type=search placeholder="Search runs: uid, '
        'experiment, status, seed, parameters, digest, error">'
        '<span id=shown></span><button id=compare disabled>Compare selected</button></div>'
        f'<div id=runs class=runs role=table><div class="row head" role=row>{head}</div>'
        f'{"".join(rows)}</div>{empty}'
    )


def run_sections(detail: RunDetail, environments: Iterable[str], replayable: bool,
                 metrics: Sequence[str]) -> dict[str, str]:
    """The parts of a run's page that change while it runs: ``summary``, ``failure``,
    ``transitions`` and ``episodes``; plus its ``status``."""
    run = detail.run
    facts = [
        ("status", badge(run.status)), ("experiment", escape(run.experiment)),
        ("seed", "&ndash;" if run.seed is None else str(run.seed)),
        ("episodes", f"{run.episodes:,}"), ("steps", f"{run.steps:,}"),
        (f"mean return (last {detail.episode_stats.recent})",
         _means(detail.episode_stats.recent_mean_return, detail.episode_stats.agent_recent_means,
                with_total=True)),
        ("mean return (all)", _means(run.mean_return, run.agent_means, with_total=True)),
        ("digest", f'<span class=mono>{escape(detail.digest)}</span>' if detail.digest
         else "&ndash;"),
        ("parameters", escape(_params(run.params)) or "&ndash;"),
        ("started", _when(run.started_at)), ("ended", _when(run.ended_at)),
        ("duration", _duration(run.duration)),
        ("host", f"{escape(detail.hostname or '?')} (pid {detail.pid or '?'})"),
        ("metrics", escape(", ".join(metrics)) or "&ndash;"),
    ]
    summary = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    failure = ""
    if run.error:
        failure = (f'<div class=failure><strong>{escape(run.status)}:</strong> '
                   f"<pre>{escape(run.error)}</pre></div>")
    transitions = "".join(
        f"<tr><td class=num>{t.seq}</td><td>{escape(t.from_state or '&ndash;')}</td>"
        f"<td>{escape(t.to_state)}</td><td>{_when(t.at)}</td>"
        f"<td>{escape(t.reason or '')}</td></tr>" for t in detail.transitions)
    shown = [*detail.first_episodes, *detail.last_episodes]
    names = set(environments)
    # Several env agents: each one's return beside the total, which a zero-sum game makes 0.
    several = any(len(e.returns) > 1 for e in shown)
    episodes = "".join(
        f"<tr><td>{escape(e.environment)}</td><td class=num>{e.episode}</td>"
        f"<td class=num>{e.steps}</td><td class=num>{_num(e.total_return)}</td>"
        + (f"<td>{escape(_returns(e.returns))}</td>" if several else "")
        + f"<td>{'terminated' if e.terminated else 'truncated' if e.truncated else '&ndash;'}</td>"
        f'<td class=num>{"&ndash;" if e.seed is None else e.seed}</td><td>'
        + (f'<a class=replay href="/runs/{run.id}/replay?environment={escape(e.environment)}'
           f'&amp;episode={e.episode}">replay</a>'
           if replayable and e.environment in names and e.seed is not None else "")
        + "</td></tr>" for e in shown)
    return {
        "status": run.status,
        "summary": f"<dl>{summary}</dl>",
        "failure": failure,
        "transitions": ("<table><thead><tr><th>#</th><th>from</th><th>to</th><th>at</th>"
                        f"<th>reason</th></tr></thead><tbody>{transitions}</tbody></table>"),
        "episodes": ("<table><thead><tr><th>environment</th><th>episode</th><th>steps</th>"
                     "<th>return</th>" + ("<th>returns</th>" if several else "")
                     + "<th>end</th><th>seed</th><th></th></tr></thead>"
                     f"<tbody>{episodes}</tbody></table>"),
    }


def chart_controls(metrics: Sequence[str]) -> str:
    """The chart's choices: what to draw, against what, and how much smoothing."""
    options = '<option value="">return</option>' + "".join(
        f'<option value="{escape(m)}">{escape(m)}</option>' for m in metrics)
    return (
        '<div class=controls><label>show <select id=metric>'
        f"{options}</select></label>"
        '<label>against <select id=xaxis><option value=episodes>episodes</option>'
        '<option value=steps>env steps</option></select></label>'
        '<label>smoothing <input id=smooth type=number min=1 max=10000 value=1></label></div>'
        '<div class=chart><svg id=chart role=img aria-label="learning curve"></svg></div>'
    )
