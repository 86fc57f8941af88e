"""Curves cut down on the server: bounded points, the mean kept, the extremes kept as a band."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mosaic.dashboard.curves import downsample, run_curves
from mosaic.store import open_store


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
