"""End to end: the real ``mosaic`` command, real processes, sockets and SQLite."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.e2e.cli import (
    SIGNAL_EXIT_S,
    assert_store_consistent,
    cartpole,
    mosaic_command,
    query,
    run_mosaic,
    start_mosaic,
    wait_for_steps,
    write_experiment,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

FULL_LIFECYCLE = ["setting_up", "running", "stopping", "finished"]


def test_the_example_runs_and_records_every_step(tmp_path, process_tag):
    store = tmp_path / "results.sqlite"
    result = run_mosaic("experiment-start", "examples/cartpole_random.yml", "--store", str(store))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "finished" in result.stdout and str(store) in result.stdout

    [(run_id, status, episodes, steps, error)] = query(
        store, "SELECT id, status, episodes, steps, error FROM runs")
    assert (status, episodes, error) == ("finished", 20, None)
    [(count, total)] = query(store, "SELECT COUNT(*), SUM(steps) FROM episodes")
    assert (count, total) == (20, steps)
    assert_store_consistent(store)
    states = [s for (s,) in query(store, "SELECT to_state FROM transitions WHERE run_id = ? "
                                         "ORDER BY seq", run_id)]
    assert states == FULL_LIFECYCLE
    # Every step of an episode is there, in order, and only the last one ends it.
    rows = query(store, "SELECT step, terminated, truncated FROM steps WHERE episode = 0 "
                        "ORDER BY step")
    assert [r[0] for r in rows] == list(range(len(rows)))
    assert not any(t or u for _, t, u in rows[:-1]) and (rows[-1][1] or rows[-1][2])


def test_two_runs_get_their_own_seeds(tmp_path, process_tag):
    store = tmp_path / "results.sqlite"
    result = run_mosaic("experiment-start", "examples/cartpole_two_runs.yml", "--store", str(store))
    assert result.returncode == 0, result.stderr
    runs = query(store, "SELECT run_index, seed, status, episodes FROM runs ORDER BY run_index")
    assert [(i, s, e) for i, _, s, e in runs] == [(0, "finished", 5), (1, "finished", 5)]
    assert runs[0][1] != runs[1][1]
    assert_store_consistent(store)


def test_a_bad_file_names_the_key_and_starts_nothing(tmp_path, process_tag):
    path = write_experiment(tmp_path, cartpole().replace("episodes:", "episdes:"))
    store = tmp_path / "results.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store))
    assert result.returncode == 2
    assert "experiment.yml" in result.stderr and "episdes" in result.stderr
    assert "episodes" in result.stderr  # the hint
    assert "Traceback" not in result.stderr
    assert not store.exists()


def test_experiment_check_validates_without_running(tmp_path):
    good = run_mosaic("experiment-check", "examples/cartpole_random.yml")
    assert good.returncode == 0, good.stderr
    assert "ok" in good.stdout
    bad = write_experiment(tmp_path, cartpole(env="gymnasium:CartPoel-v1"))
    result = run_mosaic("experiment-check", str(bad))
    assert result.returncode == 2
    assert "environments" in result.stderr and "CartPole-v1" in result.stderr


def test_thread_and_process_placements_give_the_same_trajectory(tmp_path, process_tag):
    recorded, digests = {}, {}
    for placement in ("thread", "process"):
        path = write_experiment(tmp_path, cartpole(placement=placement), f"{placement}.yml")
        store = tmp_path / f"{placement}.sqlite"
        result = run_mosaic("experiment-start", str(path), "--store", str(store), "--quiet")
        assert result.returncode == 0, result.stderr
        recorded[placement] = query(
            store, "SELECT episode, step, observation, action, reward FROM steps ORDER BY id")
        digests[placement] = query(store, "SELECT digest FROM runs")[0][0]
    assert recorded["thread"] == recorded["process"]
    assert len(recorded["thread"]) > 10
    assert digests["thread"] == digests["process"] and len(digests["thread"]) == 32


def test_the_same_file_gives_the_same_digest_and_another_seed_another(tmp_path, process_tag):
    digests = []
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        path = write_experiment(tmp_path, cartpole().replace("seed: 7", f"seed: {seed}"),
                                f"{name}.yml")
        store = tmp_path / f"{name}.sqlite"
        result = run_mosaic("experiment-start", str(path), "--store", str(store))
        assert result.returncode == 0, result.stderr
        [(digest,)] = query(store, "SELECT digest FROM runs")
        assert digest[:16] in result.stdout
        digests.append(digest)
    assert digests[0] == digests[1] != digests[2]


@pytest.mark.parametrize("placement", ["process", "thread"])
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143),
                                           (signal.SIGHUP, 129)],
                         ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_mid_run_shuts_down_in_order(tmp_path, process_tag, sig, code, placement):
    # SIGHUP: the terminal was closed; the command stops as for SIGTERM (process_tag: no
    # component process outlives it).
    path = write_experiment(tmp_path, cartpole(episodes=100_000, placement=placement))
    store = tmp_path / "results.sqlite"
    proc = start_mosaic("experiment-start", str(path), "--store", str(store))
    try:
        wait_for_steps(store, proc, minimum=200)
        sent = time.monotonic()
        proc.send_signal(sig)
        proc.wait(timeout=10)
        elapsed = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
        _, stderr = proc.communicate()
    assert proc.returncode == code, stderr
    assert elapsed < SIGNAL_EXIT_S, f"exit took {elapsed:.2f} s"
    assert "Traceback" not in stderr
    [(status, steps)] = query(store, "SELECT status, steps FROM runs")
    assert status == "cancelled"
    assert steps >= 200
    assert_store_consistent(store)
    states = [s for (s,) in query(store, "SELECT to_state FROM transitions ORDER BY seq")]
    assert states == ["setting_up", "running", "stopping", "cancelled"]


def test_a_crashed_environment_process_fails_the_run_and_names_it(tmp_path, process_tag):
    path = write_experiment(tmp_path, cartpole(env="tests.fixtures.envs:CrashingCartPole",
                                               params="{crash_at: 30}", placement="process"))
    store = tmp_path / "results.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store))
    assert result.returncode == 1, result.stderr
    [(status, error, steps)] = query(store, "SELECT status, error, steps FROM runs")
    assert status == "failed"
    assert "cartpole" in error and "exit code 3" in error
    assert steps == 29
    assert_store_consistent(store)


def test_an_environment_that_raises_fails_the_run_with_its_error(tmp_path, process_tag):
    path = write_experiment(tmp_path, cartpole(env="tests.fixtures.envs:RaisingCartPole",
                                               params="{fail_at: 10}"))
    store = tmp_path / "results.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store))
    assert result.returncode == 1
    [(status, error)] = query(store, "SELECT status, error FROM runs")
    assert status == "failed" and "broken at step 10" in error
    assert "Traceback" not in result.stderr


def test_runs_list_and_show_read_the_store(tmp_path, process_tag):
    store = tmp_path / "results.sqlite"
    assert run_mosaic("experiment-start", "examples/cartpole_two_runs.yml", "--store", str(store),
                      "--quiet").returncode == 0
    uids = [uid for (uid,) in query(store, "SELECT uid FROM runs ORDER BY run_index")]
    listing = run_mosaic("runs", "list", "--store", str(store))
    assert listing.returncode == 0, listing.stderr
    assert all(uid in listing.stdout for uid in uids) and "finished" in listing.stdout
    shown = run_mosaic("runs", "show", uids[1], "--store", str(store))
    assert shown.returncode == 0, shown.stderr
    assert uids[1] in shown.stdout and "running" in shown.stdout and "stopping" in shown.stdout
    missing = run_mosaic("runs", "show", "no-such-run", "--store", str(store))
    assert missing.returncode == 2 and "no-such-run" in missing.stderr
    absent = run_mosaic("runs", "list", "--store", str(tmp_path / "absent.sqlite"))
    assert absent.returncode == 2 and "Traceback" not in absent.stderr


def test_a_second_ctrl_c_exits_at_once_without_orphans(tmp_path, process_tag):
    path = write_experiment(tmp_path, cartpole(episodes=100_000, placement="process"))
    store = tmp_path / "results.sqlite"
    proc = start_mosaic("experiment-start", str(path), "--store", str(store))
    try:
        wait_for_steps(store, proc, minimum=100)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.05)  # sent back to back, two signals reach Python's handler as one
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    assert proc.returncode == 130
    # The process_tag fixture checks that no component process outlived the command.


def test_runs_in_parallel_each_with_its_own_governor_and_one_failure_isolated(
    tmp_path, process_tag
):
    # Run 1 of 3 fails (its environment raises at once); the others finish.
    path = write_experiment(tmp_path, cartpole(runs=3, episodes=3, placement="process",
                                               env="tests.fixtures.envs:FailingForOneSeed"))
    store = tmp_path / "results.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store), "--jobs", "2")
    assert result.returncode == 1
    runs = query(store, "SELECT run_index, status FROM runs ORDER BY run_index")
    assert [status for _, status in runs].count("failed") == 1
    assert [status for _, status in runs].count("finished") == 2
    assert_store_consistent(store)
    for index, _ in runs:
        assert f"run {index + 1} " in result.stderr


def test_a_crashed_brain_process_fails_the_run_and_names_it(tmp_path, process_tag):
    path = write_experiment(tmp_path, cartpole(episodes=1000).replace(
        "muscle: mosaic.agents:RandomMuscle",
        "muscle: tests.fixtures.agents:ExperienceMuscle\n"
        "        brain: {class: tests.fixtures.agents:DyingBrain, params: {die_after: 40}}\n"
        "        placement: {brain: process, muscle: thread}"))
    store = tmp_path / "results.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store))
    assert result.returncode == 1, result.stderr
    [(status, error)] = query(store, "SELECT status, error FROM runs")
    assert status == "failed" and "brain 'random'" in error and "exit code 4" in error
    assert_store_consistent(store)


PARALLEL = """\
uid: parallel
seed: 5
episodes: 1
max_steps: 10
placement: process
environments:
  - uid: a
    env: tests.fixtures.envs:TimedCartPole
    params: {{log: "{a}"}}
  - uid: b
    env: tests.fixtures.envs:TimedCartPole
    params: {{log: "{b}"}}
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
"""


def test_environments_in_processes_step_at_the_same_time(tmp_path, process_tag):
    # Each step sleeps 20 ms: stepped one after another, no two steps of the two environments
    # would overlap in time, however loaded the machine; sent together, they overlap.
    logs = {name: tmp_path / f"{name}.log" for name in ("a", "b")}
    path = write_experiment(tmp_path, PARALLEL.format(**logs))
    result = run_mosaic("experiment-start", str(path), "--store", str(tmp_path / "r.sqlite"))
    assert result.returncode == 0, result.stderr
    spans = {name: [tuple(map(float, line.split())) for line in log.read_text().splitlines()]
             for name, log in logs.items()}
    assert len(spans["a"]) == len(spans["b"]) == 10
    overlapping = sum(1 for a0, a1 in spans["a"] for b0, b1 in spans["b"] if a0 < b1 and b0 < a1)
    assert overlapping >= 5, spans


#: A module of the user's own, in the folder the command runs in: it notes every process that
#: imports it.
USER_ENV = """\
import os
from pathlib import Path

from gymnasium.envs.classic_control import CartPoleEnv

with open(Path(__file__).with_name("imported.log"), "a") as log:
    log.write(f"{os.getpid()}\\n")


class MyCartPole(CartPoleEnv):
    pass
"""


@pytest.mark.parametrize("entry", ["script", "module"])
def test_the_users_folder_does_not_shadow_mosaics_imports(tmp_path, process_tag, entry):
    """A numpy.py or sqlalchemy.py in the folder the command runs in is not what mosaic (or
    a component process) imports; the user's own module there, named in the file, is."""
    for name in ("numpy", "sqlalchemy"):
        (tmp_path / f"{name}.py").write_text(
            f"raise RuntimeError('the {name}.py of the current folder was imported')\n")
    (tmp_path / "my_env.py").write_text(USER_ENV)
    write_experiment(tmp_path, cartpole(env="my_env:MyCartPole", placement="process"))
    command = mosaic_command() if entry == "script" else [sys.executable, "-m", "mosaic"]
    done = subprocess.run([*command, "experiment-start", "experiment.yml", "--store",
                           "results.sqlite"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert done.returncode == 0, done.stderr
    assert "current folder was imported" not in done.stderr + done.stdout
    [(status, steps)] = query(tmp_path / "results.sqlite", "SELECT status, steps FROM runs")
    assert status == "finished" and steps > 0
    # The command (checking the file) and the environment's own process both imported it.
    importers = set((tmp_path / "imported.log").read_text().split())
    assert len(importers) >= 2, importers


def test_a_module_beside_the_file_is_found_from_any_folder(tmp_path, process_tag):
    """The file names a module of its own folder; the command runs in another one: the command
    (checking the file) and the component processes (forks of the zygote) find it there."""
    folder, elsewhere = tmp_path / "experiment", tmp_path / "elsewhere"
    folder.mkdir()
    elsewhere.mkdir()
    (folder / "my_env.py").write_text(USER_ENV)
    write_experiment(folder, cartpole(env="my_env:MyCartPole", placement="process"))
    done = subprocess.run([*mosaic_command(), "experiment-start", "../experiment/experiment.yml",
                           "--store", "results.sqlite", "-q"], cwd=elsewhere,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert done.returncode == 0, done.stderr
    [(status, steps)] = query(elsewhere / "results.sqlite", "SELECT status, steps FROM runs")
    assert status == "finished" and steps > 0
    assert len(set((folder / "imported.log").read_text().split())) >= 2
