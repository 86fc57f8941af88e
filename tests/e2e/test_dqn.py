"""End to end: the DQN example, shortened, gives the same digest in threads and processes and
stores its metrics."""

from __future__ import annotations

import pytest

from tests.e2e.cli import REPO, query, run_mosaic

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def _dqn(tmp_path, placement: str):
    text = (REPO / "examples" / "cartpole_dqn.yml").read_text()
    text = (text.replace("episodes: 2000", "episodes: 12")
            .replace("episodes: 20\n", "episodes: 2\n")
            .replace("learning_starts: 1000", "learning_starts: 100")
            .replace("placement: thread", f"placement: {placement}"))
    assert "episodes: 12" in text and "episodes: 2\n" in text and "starts: 100 " in text
    path = tmp_path / f"{placement}.yml"
    path.write_text(text)
    store = tmp_path / f"{placement}.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store), timeout=180)
    assert result.returncode == 0, result.stderr
    return store


def test_dqn_gives_one_digest_in_threads_and_processes_and_stores_its_metrics(
        tmp_path, process_tag):
    stores = {placement: _dqn(tmp_path, placement) for placement in ("thread", "process")}
    runs = {placement: query(store, "SELECT digest, steps FROM runs ORDER BY id")
            for placement, store in stores.items()}
    assert runs["thread"] == runs["process"]
    assert len(runs["thread"]) == 2
    for store in stores.values():
        counts = dict(query(store, "SELECT name, COUNT(*) FROM metrics GROUP BY name"))
        assert set(counts) == {"epsilon", "loss", "q_mean", "grad_norm"}
        assert counts["loss"] == counts["q_mean"] == counts["grad_norm"] > 0
        assert counts["epsilon"] >= 12  # one per training episode, of every copy
        epsilons = [value for (value,) in query(store, "SELECT value FROM metrics WHERE "
                                                "name = 'epsilon' ORDER BY id")]
        assert epsilons == sorted(epsilons, reverse=True) and epsilons[0] == 1.0
