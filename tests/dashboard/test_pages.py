"""The HTML is escaped: values from the store never become markup or end the page's data."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

from mosaic.dashboard import pages
from mosaic.store import RunSummary


def test_page_data_survives_markup_in_values() -> None:
    value = "</script><img src=x onerror=alert(1)> & \"quotes\""
    html = pages.page("t", "", where="w", data={"label": value})
    text = re.search(r'<script id=page-data type="application/json">(.*?)</script>', html)
    assert text is not None and json.loads(text.group(1)) == {"label": value}


def test_a_run_row_escapes_what_the_store_holds() -> None:
    run = RunSummary(1, "r<b>", "exp\"'", 0, 3, "failed", datetime.now(UTC), None, None, 2, 20,
                     1.5, "<script>alert(1)</script>", {"a<": "<i>"}, "d" * 32)
    row = pages.run_row(run)
    assert "<script>" not in row and "<b>" not in row and "<i>" not in row
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in row


def test_a_running_runs_missing_digest_is_a_dash_not_the_text_of_one() -> None:
    from mosaic.store import EpisodeStats, RunDetail

    run = RunSummary(1, "r", "exp", 0, 3, "running", datetime.now(UTC), None, None, 2, 20,
                     1.5, None, {}, None)
    detail = RunDetail(run, None, None, None, None, None, [],
                       EpisodeStats(0, 0, None, None, None, None))
    summary = pages.run_sections(detail, [], False, [])["summary"]
    assert "&amp;ndash;" not in summary
    assert "<span class=mono>" not in summary and "&ndash;" in summary


def test_a_run_of_several_agents_shows_each_agents_means_escaped() -> None:
    from mosaic.store import EpisodeStats, EpisodeSummary, RunDetail

    run = RunSummary(1, "selfplay-20261127-r0", "selfplay", 0, 3, "finished", datetime.now(UTC),
                     None, None, 120, 1500, 0.0, None, {}, "d" * 32, 0.0,
                     agent_recent_means={"learner": 0.68, "<past>": -0.68},
                     agent_means={"learner": 0.5, "<past>": -0.5})
    row = pages.run_row(run)
    assert "<past>" not in row
    assert ("<span class=agent>&lt;past&gt; -0.68</span>, <span class=agent>learner 0.68</span>"
            in row)
    assert 'title="mean return (all): &lt;past&gt; -0.50, learner 0.50"' in row
    # The uid breaks after its dashes only: its text is the uid, whole.
    assert 'title="selfplay-20261127-r0">selfplay-<wbr>20261127-<wbr>r0</a>' in row

    stats = EpisodeStats(120, 1500, 12.5, 0.0, 0.0, 0.0, 100, 0.0,
                         agent_recent_means={"learner": 0.68, "<past>": -0.68})
    episode = EpisodeSummary("connect_four", 0, 12, 0.0, {"player_1": -1.0, "player_0": 1.0},
                             True, False, 5)
    detail = RunDetail(run, None, None, None, None, None, [], stats, [episode])
    sections = pages.run_sections(detail, [], False, [])
    summary = sections["summary"]
    # Each episode's return per env agent, beside its total.
    assert "<th>return</th><th>returns</th>" in sections["episodes"]
    assert "<td class=num>0.00</td><td>player_0=1.00, player_1=-1.00</td>" in sections[
        "episodes"]
    assert ("<dt>mean return (last 100)</dt><dd><span class=agent>&lt;past&gt; -0.68</span>, "
            "<span class=agent>learner 0.68</span> (total 0.00)</dd>") in summary
    assert ("<dt>mean return (all)</dt><dd><span class=agent>&lt;past&gt; -0.50</span>, "
            "<span class=agent>learner 0.50</span> (total 0.00)</dd>") in summary
