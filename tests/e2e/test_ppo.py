"""End to end: the PPO example, shortened, runs in threads and in processes with the same
digest, and stores its per-update metrics."""

from __future__ import annotations

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
