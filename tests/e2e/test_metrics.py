"""End to end: metrics that brains and muscles report reach the store, stamped with the run's
episodes and steps, in threads and in processes, the last ones too, without changing the
trajectory."""

from __future__ import annotations

import pytest

from mosaic.agents.metrics import METRICS_PER_REPLY
from tests.e2e.cli import REPO, query, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

PG_EPISODES = 24


def _policy_gradient(tmp_path, name: str, placement: str, quiet: bool = False):
    text = (REPO / "examples" / "cartpole_pg.yml").read_text()
    text = (text.replace("episodes: 500", f"episodes: {PG_EPISODES}")
            .replace("episodes: 20", "episodes: 3")
            .replace("placement: thread", f"placement: {placement}"))
    if quiet:
        text = text.replace("mosaic.agents.learners:PolicyGradient",
                            "tests.fixtures.metrics:QuietPolicyGradient")
    path = tmp_path / f"{name}.yml"
    path.write_text(text)
    store = tmp_path / f"{name}.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store), timeout=180)
    assert result.returncode == 0, result.stderr
    return store


@pytest.mark.parametrize("placement", ["thread", "process"])
def test_policy_gradient_metrics_are_stored_with_stamps_and_the_same_digest(
        tmp_path, process_tag, placement):
    store = _policy_gradient(tmp_path, placement, placement)
    runs = query(store, "SELECT id, uid, digest, steps FROM runs ORDER BY id")
    assert [uid.rsplit("-", 1)[1] for _, uid, _, _ in runs] == ["train", "test"]
    (train, _, _, train_steps), (test, _, _, _) = runs
    rows = query(store, "SELECT agent, source, name, value, episode, step FROM metrics "
                 "WHERE run_id = ? ORDER BY id", train)
    names = ["policy_loss", "value_loss", "entropy", "grad_norm"]
    updates = PG_EPISODES // 8  # batch_episodes
    assert [name for _, _, name, _, _, _ in rows] == names * updates
    assert {(agent, source) for agent, source, *_ in rows} == {("learner", "learner")}
    # An update follows every 8th episode: the rows say so, with the steps taken by then.
    stamps = sorted({(episode, step) for *_, episode, step in rows})
    assert [episode for episode, _ in stamps] == [8, 16, 24]
    assert stamps[-1][1] == train_steps
    steps_after = [query(store, "SELECT COALESCE(SUM(steps), 0) FROM episodes WHERE run_id = ? "
                         "AND episode < ?", train, episode)[0][0] for episode, _ in stamps]
    assert [step for _, step in stamps] == steps_after
    assert query(store, "SELECT COUNT(*) FROM metrics WHERE run_id = ?", test) == [(0,)]

    quiet = _policy_gradient(tmp_path, f"{placement}-quiet", placement, quiet=True)
    assert query(quiet, "SELECT COUNT(*) FROM metrics") == [(0,)]
    assert (query(quiet, "SELECT digest, steps FROM runs ORDER BY id")
            == [(digest, steps) for _, _, digest, steps in runs])


REPORTING = """\
    uid: reporting
    seed: 3
    episodes: 3
    placement: {placement}
    environments:
      - uid: cartpole
        env: gymnasium:CartPole-v1
    agents:
      - uid: learner
        brain: tests.fixtures.metrics:ReportingBrain
        muscle: {{class: tests.fixtures.metrics:ReportingMuscle, params: {{flood: {flood}}}}}
        placement: {{brain: {placement}, muscle: {placement}}}
"""


@pytest.mark.parametrize("placement", ["thread", "process"])
def test_a_custom_brain_and_muscle_report_every_metric_the_last_ones_too(
        tmp_path, process_tag, placement):
    path = write_experiment(tmp_path, REPORTING.format(placement=placement, flood=0))
    store = tmp_path / "reporting.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store), timeout=120)
    assert result.returncode == 0, result.stderr
    [(run, steps, episodes)] = query(store, "SELECT id, steps, episodes FROM runs")
    rewards = query(store, "SELECT source, value, episode, step FROM metrics "
                    "WHERE name = 'reward' ORDER BY id")
    # One per step, reported with the step's feedback: stamped with that step.
    assert [row[3] for row in rewards] == list(range(1, steps + 1))
    assert {row[0] for row in rewards} == {"learner@cartpole"}
    assert all(value == 1.0 for _, value, _, _ in rewards)
    seen = query(store, "SELECT source, value FROM metrics WHERE name = 'seen' ORDER BY id")
    assert seen == [("learner", float(count)) for count in range(1, steps + 1)]
    # Reported while the brain saved its state at shutdown, after the last step.
    assert query(store, "SELECT source, value, episode, step FROM metrics "
                 "WHERE name = 'saved'") == [("learner", float(steps), episodes, steps)]
    assert query(store, "SELECT DISTINCT run_id, agent FROM metrics") == [(run, "learner")]


def test_a_flood_keeps_the_latest_metrics_and_says_how_many_were_dropped(tmp_path, process_tag):
    flood = METRICS_PER_REPLY + 25
    path = write_experiment(tmp_path, REPORTING.format(placement="process", flood=flood))
    store = tmp_path / "flood.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store), timeout=120)
    assert result.returncode == 0, result.stderr
    # The step's reward came first, so it is dropped with the 25 oldest floods.
    kept = query(store, "SELECT MIN(value), MAX(value), COUNT(*) FROM metrics "
                 "WHERE name = 'flood'")
    assert kept == [(25.0, float(flood - 1), METRICS_PER_REPLY)]
    assert query(store, "SELECT MIN(step) FROM metrics WHERE name = 'reward'") == [(2,)]
    assert "26 metrics dropped" in result.stderr
