"""Curves cut down on the server: bounded points, the mean kept, the extremes kept as a band."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import sqlalchemy as sa

from mosaic.dashboard.curves import CurveCache, downsample, run_curves
from mosaic.dashboard.run_routes import chart
from mosaic.store import open_store, schema


def test_a_short_curve_is_sent_whole_and_smoothed() -> None:
    xs = np.arange(1, 6, dtype=float)
    line = downsample(xs, np.array([1.0, 3.0, 5.0, 7.0, 9.0]), smooth=2)
    assert line["x"] == [1, 2, 3, 4, 5] and line["y"] == [1, 2, 4, 6, 8]
    assert line["low"] is None and line["n"] == 5


def test_a_long_curve_becomes_buckets_with_their_extremes() -> None:
    n = 100_000
    ys = np.zeros(n)
    ys[12_345] = 50.0  # one spike that a mean alone would hide
    line = downsample(np.arange(1, n + 1, dtype=float), ys, points=500)
    assert len(line["x"]) == 500 and line["n"] == n
    assert max(line["high"]) == 50.0 and min(line["low"]) == 0.0
    assert max(line["y"]) < 1.0
    assert line["x"][0] < line["x"][-1] <= n
    assert abs(np.mean(line["y"]) - ys.mean()) < 1e-9  # equal buckets keep the mean


def test_missing_returns_leave_gaps_not_zeros() -> None:
    line = downsample(np.arange(4, dtype=float), np.array([1.0, np.nan, 3.0, 4.0]))
    assert line["y"][1] is None


def test_run_curves_reads_a_real_run(cartpole_store: Path) -> None:
    with open_store(cartpole_store) as store:
        (line,) = run_curves(store, 1)
        detail = store.show_run(1)
        assert line["n"] == detail.episode_stats.count == 5
        (by_steps,) = run_curves(store, 1, x="steps")
        assert by_steps["x"][-1] == detail.episode_stats.total_steps
        assert run_curves(store, 1, metric="no-such-metric") == []


def test_a_self_play_run_draws_each_agents_returns(selfplay_store: Path) -> None:
    with open_store(selfplay_store) as store:
        learner, past = run_curves(store, 1)
        with store.reading() as conn:
            rows = conn.execute(sa.select(schema.episodes.c.returns).where(
                schema.episodes.c.run_id == 1).order_by(schema.episodes.c.id)).scalars().all()
        # Not the total of a zero-sum game, 0 in every episode: player_0's, then player_1's.
        assert (learner["label"], past["label"]) == ("learner", "past")
        assert learner["y"] == [row["player_0"] for row in rows] == [-y for y in past["y"]]
        assert any(learner["y"]) and learner["x"] == list(range(1, len(rows) + 1))
        cache = CurveCache(store)  # read once, then only what was recorded since
        assert cache.lines(1) == cache.lines(1) == [learner, past]
        drawn = chart(store, cache, [1])
        # As the run page's chart labels them: the run's uid and the agent.
        assert [line["label"].split(" ")[-1] for line in drawn["lines"]] == ["learner", "past"]
