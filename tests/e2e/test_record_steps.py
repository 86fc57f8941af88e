"""End to end: ``record_steps`` (all, episodes, none; true and false) stores what it says, per
environment too, in threads and in processes, and never changes the run's digest."""

from __future__ import annotations

import pytest

from tests.e2e.cli import cartpole, query, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

TWO_ENVIRONMENTS = """\
    uid: two
    seed: 3
    episodes: 2
    placement: {placement}
    environments:
      - uid: full
        env: gymnasium:CartPole-v1
        record_steps: all
      - uid: summary
        env: gymnasium:CartPole-v1
        record_steps: episodes
      - uid: quiet
        env: gymnasium:CartPole-v1
    agents:
      - uid: random
        muscle: mosaic.agents:RandomMuscle
    store:
      record_steps: none
"""


def _run(tmp_path, name: str, text: str) -> tuple[int, int, str, int, int]:
    """Run the experiment; its steps and episodes counted, digest, and step and episode rows."""
    store = tmp_path / f"{name}.sqlite"
    path = write_experiment(tmp_path, text, f"{name}.yml")
    result = run_mosaic("experiment-start", str(path), "--store", str(store), timeout=60)
    assert result.returncode == 0, result.stderr
    [(status, steps, episodes, digest)] = query(
        store, "SELECT status, steps, episodes, digest FROM runs")
    assert status == "finished" and steps > 0 and episodes == 3
    states = [s for (s,) in query(store, "SELECT to_state FROM transitions ORDER BY seq")]
    assert states[-1] == "finished"
    step_rows = query(store, "SELECT COUNT(*) FROM steps")[0][0]
    episode_rows = query(store, "SELECT COUNT(*) FROM episodes")[0][0]
    return steps, episodes, digest, step_rows, episode_rows


@pytest.mark.parametrize("placement", ["thread", "process"])
def test_each_setting_stores_what_it_says_with_the_same_digest(tmp_path, process_tag, placement):
    seen = {}
    for setting in ["all", "true", "episodes", "false", "none"]:
        text = cartpole(placement=placement) + f"    store: {{record_steps: {setting}}}\n"
        seen[setting] = _run(tmp_path, setting, text)
    steps, episodes, digest = seen["all"][:3]
    assert {s[:3] for s in seen.values()} == {(steps, episodes, digest)}
    assert seen["all"][3:] == seen["true"][3:] == (steps, episodes)
    assert seen["episodes"][3:] == seen["false"][3:] == (0, episodes)
    assert seen["none"][3:] == (0, 0)


@pytest.mark.parametrize("placement", ["thread", "process"])
def test_an_environment_overrides_the_store_setting(tmp_path, process_tag, placement):
    store = tmp_path / "two.sqlite"
    path = write_experiment(tmp_path, TWO_ENVIRONMENTS.format(placement=placement))
    result = run_mosaic("experiment-start", str(path), "--store", str(store), timeout=60)
    assert result.returncode == 0, result.stderr
    [(steps, episodes)] = query(store, "SELECT steps, episodes FROM runs")
    assert episodes == 6
    steps_by_env = dict(query(store, "SELECT environment, COUNT(*) FROM steps GROUP BY 1"))
    episodes_by_env = dict(query(store, "SELECT environment, COUNT(*) FROM episodes GROUP BY 1"))
    full_steps = query(store, "SELECT SUM(steps) FROM episodes WHERE environment = 'full'")[0][0]
    assert steps_by_env == {"full": full_steps}
    assert episodes_by_env == {"full": 2, "summary": 2}
    assert steps > full_steps  # the other two stepped as well, unrecorded


def test_a_bad_value_is_exit_2_with_the_file_key_and_a_hint(tmp_path, process_tag):
    text = cartpole() + "    store: {record_steps: episode}\n"
    path = write_experiment(tmp_path, text)
    store = tmp_path / "results.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store))
    assert result.returncode == 2
    assert (f"{path}:13: store.record_steps: expected all, episodes or none, got the text "
            "'episode' (hint: did you mean 'episodes'?)") in result.stderr
    assert not store.exists()
