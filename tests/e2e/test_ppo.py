"""End to end: the PPO example, shortened, runs in threads and in processes with the same
digest, and stores its per-update metrics."""

from __future__ import annotations

import re
import statistics

import pytest

from tests.e2e.cli import REPO, query, run_mosaic

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

NAMES = ["policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm"]


def _run(tmp_path, placement: str):
    text = (REPO / "examples" / "cartpole_ppo.yml").read_text()
    text = (text.replace("episodes: 300", "episodes: 40")
            .replace("episodes: 24", "episodes: 8")
            .replace("placement: thread", f"placement: {placement}"))
    assert "episodes: 40" in text and f"placement: {placement}" in text
    path = tmp_path / f"{placement}.yml"
    path.write_text(text)
    store = tmp_path / f"{placement}.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store), timeout=180)
    assert result.returncode == 0, result.stderr
    return store


def test_ppo_runs_in_threads_and_processes_alike_and_stores_its_metrics(tmp_path, process_tag):
    seen = {}
    for placement in ("thread", "process"):
        store = _run(tmp_path, placement)
        runs = query(store, "SELECT id, digest, steps FROM runs ORDER BY id")
        (train, _, train_steps), (test, _, _) = runs
        names = [name for (name,) in query(store, "SELECT name FROM metrics WHERE run_id = ? "
                                          "ORDER BY id", train)]
        # One update per 256 steps of the 8 copies, each reporting the six metrics in order;
        # the last one may come with the phase's last step, after its metrics were sent.
        updates = train_steps // 256
        assert updates >= 1
        assert len(names) in (6 * updates, 6 * (updates - 1)), (len(names), train_steps)
        assert names == NAMES * (len(names) // 6)
        values = query(store, "SELECT name, value FROM metrics WHERE run_id = ?", train)
        assert all(value >= 0 for name, value in values if name != "policy_loss")
        assert query(store, "SELECT COUNT(*) FROM metrics WHERE run_id = ?", test) == [(0,)]
        seen[placement] = [(digest, steps) for _, digest, steps in runs]
    assert seen["thread"] == seen["process"]


@pytest.mark.parametrize(("example", "episodes", "first_at_most", "last_at_least"), [
    # Measured (seed 0): -347 over the first 20 episodes, -145 over the last 20.
    ("acrobot_ppo.yml", 80, -300, -200),
    # Measured (seed 0): -1282 over the first 20 episodes, -381 over the last 20 (of 200 steps).
    ("pendulum_ppo.yml", 200, -1000, -600),
])
def test_ppo_learns_acrobot_and_pendulum_clearly_in_a_short_run(
        tmp_path, example, episodes, first_at_most, last_at_least):
    text = (REPO / "examples" / example).read_text()
    text = text.replace("  - name: test\n    mode: test\n    episodes: 24\n", "")
    assert "mode: test" not in text
    text = re.sub(r"(?m)^    episodes: \d+$", f"    episodes: {episodes}", text)
    path = tmp_path / example
    path.write_text(text)
    store = tmp_path / "learn.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store), timeout=200)
    assert result.returncode == 0, result.stderr
    returns = [r for (r,) in query(store, "SELECT total_return FROM episodes ORDER BY id")]
    assert len(returns) == episodes
    first, last = statistics.mean(returns[:20]), statistics.mean(returns[-20:])
    assert first <= first_at_most and last >= last_at_least, (first, last)
