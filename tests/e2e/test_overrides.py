"""``--set KEY=VALUE`` on ``experiment-start`` and ``experiment-check``: values read as YAML
over the file, with the key paths and errors of ``mosaic.run`` and sweeps, and kept with the
experiment so that ``--resume`` takes the same settings only."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.cli import cartpole, query, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def test_settings_replace_the_files_values(tmp_path: Path) -> None:
    path = write_experiment(tmp_path, cartpole(uid="set", episodes=3))
    store = tmp_path / "set.sqlite"
    done = run_mosaic("experiment-start", str(path), "--store", str(store), "-q",
                      "--set", "episodes=5", "--set", "seed=11",
                      "--set", "environments.0.params={sutton_barto_reward: true}",
                      "--set", "episodes=7")  # the last of a key wins
    assert done.returncode == 0, done.stderr
    assert query(store, "SELECT episodes FROM runs") == [(7,)]
    checked = run_mosaic("experiment-check", str(path), "--set", "environments.0.copies=2")
    assert checked.returncode == 0, checked.stderr
    assert "ok: experiment 'set'" in checked.stdout


@pytest.mark.parametrize("setting, says", [
    ("episods=3", "episods: unknown key 'episods' (set by the override 'episods')"),
    ("episodes=-3", "episodes: expected a whole number >= 1, got the number -3 (set by the "
                    "override 'episodes')"),
    ("agents.5.uid=x", "agents.5"),
    ("episodes", "--set 'episodes': expected KEY=VALUE"),
    ("uid=[a", "--set 'uid=[a': the value is not YAML"),
])
@pytest.mark.parametrize("command", ["experiment-start", "experiment-check"])
def test_a_bad_setting_is_exit_2_naming_it(tmp_path: Path, command: str, setting: str,
                                          says: str) -> None:
    path = write_experiment(tmp_path, cartpole(uid="bad"))
    done = run_mosaic(command, str(path), "--store", str(tmp_path / "bad.sqlite"),
                      "--set", setting) if command == "experiment-start" else run_mosaic(
        command, str(path), "--set", setting)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr, done.stderr
    assert str(path) in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "bad.sqlite").exists()


def test_resume_takes_the_settings_the_experiment_was_started_with(tmp_path: Path) -> None:
    path = write_experiment(tmp_path, cartpole(uid="kept", episodes=3))
    store = tmp_path / "kept.sqlite"
    start = ("experiment-start", str(path), "--store", str(store), "-q")
    assert run_mosaic(*start, "--set", "episodes=4").returncode == 0
    same = run_mosaic(*start, "--resume", "--set", "episodes=4")
    assert same.returncode == 0, same.stderr
    assert "nothing to resume" in same.stderr
    for other, was in ((("--set", "episodes=5"), "now episodes=5"), ((), "now none")):
        changed = run_mosaic(*start, "--resume", *other)
        assert changed.returncode == 2, changed.stderr
        assert "the overrides (--set) were episodes=4, " + was in changed.stderr
    assert query(store, "SELECT count(*) FROM runs") == [(1,)]
