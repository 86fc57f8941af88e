"""``mosaic.run``: the same runs as ``mosaic experiment-start``, overrides that change what
they say, results with a DataFrame of episodes, and nothing left running afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pykka
import pytest

import mosaic
from mosaic.core.errors import ConfigError
from mosaic.transport.security import GATEKEEPER_THREAD
from tests.e2e.cli import REPO, cartpole, query, run_mosaic, wait_for_steps, write_experiment
from tests.processes import tagged_processes

pytestmark = pytest.mark.timeout(180)


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def _threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.is_alive() and t.name != GATEKEEPER_THREAD}


def test_run_gives_the_digest_of_the_command_and_leaves_nothing_running(tmp_path, process_tag):
    path = write_experiment(tmp_path, cartpole(episodes=3, placement="process"))
    command = run_mosaic("experiment-start", str(path), "-q",
                         "--store", str(tmp_path / "cli.sqlite"))
    assert command.returncode == 0, command.stderr
    (digest,) = query(tmp_path / "cli.sqlite", "SELECT digest FROM runs")[0]

    threads = _threads()
    first = mosaic.run(path, store={"path": "first.sqlite"})  # imports, the ZeroMQ context
    descriptors = _open_descriptors()
    results = mosaic.run(path, store={"path": "second.sqlite"})
    assert first.ok and results.ok and len(results) == 1
    assert [run.digest for run in results] == [digest] == [run.digest for run in first]
    assert results.store_path == (tmp_path / "second.sqlite").resolve()

    assert not pykka.ActorRegistry.get_all()
    assert not tagged_processes(process_tag), "component processes outlived the run"
    deadline = time.monotonic() + 5
    while (_threads() - threads or _open_descriptors() > descriptors) and (
            time.monotonic() < deadline):
        time.sleep(0.05)
    assert _threads() - threads == set(), "threads outlived the run"
    # Every socket, pipe and database connection of the run is closed again.
    assert _open_descriptors() <= descriptors


def test_overrides_change_what_they_say_and_a_sweep_records_its_values(tmp_path):
    path = write_experiment(tmp_path, cartpole(episodes=3, seed=7))
    results = mosaic.run(path, episodes=2, seed=3, runs=2, max_steps=4)
    assert [(run.episodes, run.steps) for run in results] == [(2, 8), (2, 8)]
    assert [run.seed for run in results] == mosaic.load_experiment(path, overrides={
        "seed": 3, "runs": 2}).run_seeds()

    swept = mosaic.run(path, sweep={"grid": {"max_steps": [2, 5]}}, progress=False,
                       **{"store.path": "swept.sqlite"})
    assert [run.params for run in swept] == [{"max_steps": 2}, {"max_steps": 5}]
    assert [run.steps for run in swept] == [6, 15]
    stored = query(tmp_path / "swept.sqlite", "SELECT params FROM runs ORDER BY run_index")
    assert stored == [('{"max_steps": 2}',), ('{"max_steps": 5}',)]

    frame = swept.episodes()
    assert list(frame.columns[:2]) == ["run", "max_steps"]
    assert len(frame) == 6 and frame.groupby("max_steps")["steps"].sum().to_dict() == {2: 6,
                                                                                        5: 15}


def test_an_experiment_or_a_mapping_runs_too(tmp_path, monkeypatch):
    path = write_experiment(tmp_path, cartpole(episodes=2, max_steps="3"))
    experiment = mosaic.load_experiment(path, store_override=str(tmp_path / "given.sqlite"))
    results = mosaic.run(experiment, episodes=1)
    assert results.store_path == tmp_path / "given.sqlite" and results[0].episodes == 1
    monkeypatch.chdir(tmp_path)
    data = {"uid": "inline", "max_steps": 2,
            "environments": [{"uid": "e", "env": "gymnasium:CartPole-v1"}],
            "agents": [{"uid": "a", "muscle": "mosaic.agents:RandomMuscle"}]}
    inline = mosaic.run(data)
    assert inline.ok and inline.store_path == tmp_path / "inline.sqlite"


def test_a_bad_override_raises_the_config_error_with_its_key_path(tmp_path):
    path = write_experiment(tmp_path, cartpole())
    with pytest.raises(ConfigError) as caught:
        mosaic.run(path, **{"agents.0.parms.learning_rate": 0.1})
    assert caught.value.location == "agents[0].parms"
    assert "did you mean 'params'" in str(caught.value)
    with pytest.raises(ConfigError, match=r"sweep\.grid\.episodes: expected at least 1 item"):
        mosaic.run(path, sweep={"grid": {"episodes": []}})
    assert not (tmp_path / "experiment.sqlite").exists()


def test_metrics_come_per_report_with_the_sweeps_columns(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = {"uid": "lake", "seed": 1, "max_steps": 5,
            "environments": [{"uid": "lake", "env": "gymnasium:FrozenLake-v1"}],
            "agents": [{"uid": "q", "brain": "mosaic.agents.learners:TabularQBrain",
                        "muscle": "mosaic.agents.learners:TabularQMuscle",
                        "params": {"epsilon_decay_episodes": 4}}]}
    results = mosaic.run(data, sweep={"grid": {"episodes": [2, 3]}}, progress=False)
    assert results.ok
    frame = results.metrics()
    assert list(frame.columns[:2]) == ["run", "episodes"]
    assert {"epsilon", "td_error", "updates"} <= set(frame["name"])
    epsilon = results.metrics("epsilon")
    assert set(epsilon["name"]) == {"epsilon"}
    # One epsilon per training episode (the muscle reports it at each episode's start),
    # falling from 1.0 over the first four.
    assert epsilon.groupby("episodes").size().to_dict() == {2: 2, 3: 3}
    assert list(epsilon[epsilon["episodes"] == 3]["value"]) == sorted(
        epsilon[epsilon["episodes"] == 3]["value"], reverse=True)
    assert epsilon["value"].max() == pytest.approx(1.0)


def test_episodes_without_pandas_names_the_extra(tmp_path, monkeypatch):
    path = write_experiment(tmp_path, cartpole(episodes=1, max_steps="2"))
    results = mosaic.run(path)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"mosaic\[results\]"):
        results.episodes()


SCRIPT = """\
    import sys
    import mosaic
    try:
        mosaic.run(sys.argv[1], progress=False)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(7)
"""


def test_ctrl_c_cancels_the_runs_in_order_and_raises_keyboard_interrupt(tmp_path, process_tag):
    path = write_experiment(tmp_path, cartpole(episodes=100_000, placement="process"))
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(SCRIPT))
    process = subprocess.Popen([sys.executable, str(script), str(path)], cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        wait_for_steps(tmp_path / "experiment.sqlite", process, minimum=50, timeout=60)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 7, err
    assert out.strip() == "interrupted"
    assert query(tmp_path / "experiment.sqlite", "SELECT status FROM runs") == [("cancelled",)]
    assert not tagged_processes(process_tag)


def test_a_store_given_as_a_path_is_the_commands_store(tmp_path, monkeypatch):
    path = write_experiment(tmp_path, cartpole(episodes=2))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "here").mkdir()
    results = mosaic.run(path, store="here/x.sqlite")  # from the current folder, as --store
    assert results.ok and results.store_path == (tmp_path / "here" / "x.sqlite").resolve()
    loaded = mosaic.load_experiment(path)
    again = mosaic.run(loaded, store=tmp_path / "y.sqlite", episodes=1)
    assert again.ok and again.store_path == tmp_path / "y.sqlite"
    assert query(tmp_path / "y.sqlite", "SELECT episodes FROM runs") == [(1,)]
