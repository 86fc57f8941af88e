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
