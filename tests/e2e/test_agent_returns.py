"""A run of several agents (self-play, PettingZoo games) reads per agent wherever a mean return
is shown: the summary, ``runs list``, ``runs show``, ``runs_frame`` and ``mosaic.run``'s
results, all with the same values; a run of one agent reads as a single number, as before."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

import mosaic
from mosaic.results import load_curves
from mosaic.store import open_store
from tests.e2e.cli import cartpole, query, run_mosaic, selfplay, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

#: More than the 100 episodes "last 100" is over, so that it differs from "all".
EPISODES = 120
MAPPING = {"player_0": "learner", "player_1": "past"}


def _expected(store: Path) -> dict[str, tuple[float, float]]:
    """Each agent's (last 100, all) mean, computed here from the stored episodes: the env
    agents' returns, each counted for the agent that played it."""
    rows = [json.loads(text) for (text,) in query(
        store, "SELECT e.returns FROM episodes e JOIN runs r ON r.id = e.run_id "
        "WHERE r.uid LIKE 'selfplay-%' AND NOT e.evaluation ORDER BY e.id")]
    assert len(rows) == EPISODES
    means = {}
    for slot, agent in MAPPING.items():
        values = [row[slot] for row in rows]
        means[agent] = (sum(values[-100:]) / 100, sum(values) / len(values))
    return means


def _shown(means: dict[str, float], digits: str) -> str:
    return ", ".join(f"{agent} {value:{digits}}" for agent, value in sorted(means.items()))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A self-play run and a CartPole run in one store, by the real command; what the first
    command said (its run's line on stderr, the summary on stdout)."""
    folder = tmp_path_factory.mktemp("agents")
    store = folder / "agents.sqlite"
    path = write_experiment(folder, selfplay(episodes=EPISODES), "selfplay.yml")
    done = run_mosaic("experiment-start", str(path), "--store", str(store), timeout=150)
    assert done.returncode == 0, done.stderr
    single = write_experiment(folder, cartpole(uid="single", episodes=3), "single.yml")
    alone = run_mosaic("experiment-start", str(single), "--store", str(store), "-q")
    assert alone.returncode == 0, alone.stderr
    return store, done.stderr + done.stdout


def test_self_play_shows_each_agents_mean_everywhere(store: tuple[Path, str]) -> None:
    path, summary = store
    expected = _expected(path)
    recent = {agent: values[0] for agent, values in expected.items()}
    every = {agent: values[1] for agent, values in expected.items()}
    # Not the zero-sum total of 0: the learner's and the past's, which differ.
    assert recent["learner"] == -recent["past"] != 0 and recent != every

    assert f"mean return (last 100) {_shown(recent, '.2f')}," in summary
    (row,) = [line for line in summary.splitlines() if line.startswith("selfplay-")]
    assert _shown(recent, ".2f") in row

    listed = run_mosaic("runs", "list", "--store", str(path))
    assert listed.returncode == 0, listed.stderr
    (row,) = [line for line in listed.stdout.splitlines() if line.startswith("selfplay-")]
    assert f"{_shown(recent, '.4g')}  {_shown(every, '.4g')}" in row
    (single,) = [line for line in listed.stdout.splitlines() if line.startswith("single-")]
    assert "learner" not in single and re.search(r"\s3\s+\d+\s+\d+(\.\d+)?\s+\d+", single)

    shown = run_mosaic("runs", "show", "selfplay-", "--store", str(path))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    at = next(index for index, line in enumerate(lines) if line.startswith("mean return"))
    assert lines[at].endswith(f"  (last 100) {_shown(recent, '.4g')} (total 0)")
    assert re.fullmatch(rf" +\(all\) {_shown(every, '.4g')} over {EPISODES} episodes "
                        r"\(total 0, min 0, max 0\)", lines[at + 1])

    with open_store(path) as opened:
        frame = opened.runs_frame("selfplay-", "single-")
    for agent, (last, whole) in expected.items():
        assert frame[f"recent_mean_return_{agent}"][0] == pytest.approx(last)
        assert frame[f"mean_return_{agent}"][0] == pytest.approx(whole)
        assert pd.isna(frame[f"mean_return_{agent}"][1])  # the CartPole run has one agent
    assert frame["recent_mean_return"][0] == pytest.approx(0.0)


def test_runs_plot_draws_a_line_per_agent(store: tuple[Path, str], tmp_path: Path) -> None:
    path, _ = store
    with open_store(path) as opened:
        curves = load_curves(opened, experiment="selfplay").curves
    learner, past = curves
    assert learner.label.startswith("selfplay learner (") and past.label.startswith(
        "selfplay past (")
    returns = [json.loads(text) for (text,) in query(
        path, "SELECT e.returns FROM episodes e JOIN runs r ON r.id = e.run_id "
        "WHERE r.uid LIKE 'selfplay-%' ORDER BY e.id")]
    assert list(learner.y) == [row["player_0"] for row in returns] == list(-past.y)
    assert list(learner.x) == list(range(1, EPISODES + 1))
    done = run_mosaic("runs", "plot", "--experiment", "selfplay", "--store", str(path),
                      "--out", str(tmp_path / "selfplay.png"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "selfplay.png").stat().st_size > 0


def test_a_run_of_one_agent_reads_as_before(store: tuple[Path, str]) -> None:
    path, _ = store
    with open_store(path) as opened:
        frame = opened.runs_frame("single-")
        (run,) = opened.list_runs(experiment="single")
        detail = opened.show_run("single-")
    assert not [column for column in frame.columns if column.startswith("mean_return_")]
    assert run.agent_means == run.agent_recent_means == {} and run.mean_return is not None
    assert detail.episode_stats.agent_recent_means == {}


def test_results_of_mosaic_run_give_each_agents_mean(tmp_path: Path) -> None:
    path = write_experiment(tmp_path, selfplay(episodes=8), "selfplay.yml")
    results = mosaic.run(path, progress=False, store={"path": "selfplay.sqlite"})
    assert results.ok
    (run,) = results
    with open_store(results.store_path) as opened:
        (listed,) = opened.list_runs()
    assert set(run.agent_recent_means) == {"learner", "past"}
    assert run.agent_recent_means == pytest.approx(listed.agent_recent_means)
    assert run.agent_means == pytest.approx(listed.agent_means)

    single = mosaic.run(write_experiment(tmp_path, cartpole(episodes=2), "single.yml"),
                        progress=False, store={"path": "single.sqlite"})
    assert single[0].agent_means == single[0].agent_recent_means == {}
