"""``--resume`` after the command and every process of its session were SIGKILLed, and
``executor.max_failures``: the runs end with the digests of an uninterrupted invocation, the
store holds each step once, and finished runs are not run again.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.cli import (
    REPO,
    cartpole,
    mosaic_command,
    query,
    run_mosaic,
    staged_experiment,
    write_experiment,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

RUNS = 3
EPISODES = 400


def experiment(placement: str) -> str:
    return cartpole(uid="resumed", runs=RUNS, episodes=EPISODES, placement=placement)


def killed_when(path: Path, store: Path, reached: Callable[[], bool], what: str) -> None:
    """Run experiment-start of ``path`` into ``store`` in a session of its own, as a terminal
    starts it, and SIGKILL the whole session once ``reached()`` (``what``, within 120 s)."""
    proc = subprocess.Popen([*mosaic_command(), "experiment-start", str(path), "--store",
                             str(store), "-q"], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + 120
        while not reached():
            assert proc.poll() is None, f"it ended before {what}: {proc.communicate()[1]}"
            assert time.monotonic() < deadline, f"no {what} within 120 s"
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def count(store: Path, sql: str) -> int:
    try:
        return int(query(store, sql)[0][0])
    except (sqlite3.Error, IndexError):  # not there yet
        return 0


#: When the command and its session are SIGKILLed: once a condition on the store holds.
MOMENTS: dict[str, Callable[[Path], bool]] = {
    # The first run recorded, its components still setting up (no step yet).
    "set-up": lambda store: count(store, "SELECT count(*) FROM runs") >= 1,
    "mid-episode": lambda store: count(store, "SELECT count(*) FROM steps") >= 300,
    # The first run finished: the next one starts.
    "between runs": lambda store: count(
        store, "SELECT count(*) FROM runs WHERE status = 'finished'") >= 1,
}


def uninterrupted_digests(folder: Path, text: str) -> list[tuple[int, str, int, str]]:
    """The runs of an uninterrupted invocation of the experiment ``text`` (in ``folder``/whole)."""
    (folder / "whole").mkdir()
    whole = write_experiment(folder / "whole", text)
    store = folder / "whole.sqlite"
    done = run_mosaic("experiment-start", str(whole), "--store", str(store), "-q", timeout=180)
    assert done.returncode == 0, done.stderr
    return digests(store)


def digests(store: Path) -> list[tuple[int, str, int, str]]:
    return query(store, "SELECT run_index, status, steps, digest FROM runs ORDER BY run_index")


@pytest.fixture(scope="module", params=["thread", "process"])
def uninterrupted(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                  ) -> tuple[str, list[tuple[int, str, int, str]]]:
    """The placement, and the runs of an uninterrupted invocation of its experiment."""
    folder = tmp_path_factory.mktemp(f"uninterrupted-{request.param}")
    return request.param, uninterrupted_digests(folder, experiment(request.param))


@pytest.mark.parametrize("moment", list(MOMENTS))
def test_resume_after_a_sigkill_ends_as_an_uninterrupted_invocation(
        uninterrupted: tuple[str, list[tuple[int, str, int, str]]], moment: str,
        tmp_path: Path, process_tag: str) -> None:
    placement, expected = uninterrupted
    path = write_experiment(tmp_path, experiment(placement))
    store = tmp_path / "results.sqlite"
    killed_when(path, store, lambda: MOMENTS[moment](store), moment)
    finished_before = query(store, "SELECT uid, started_at FROM runs WHERE status = 'finished'")
    unfinished = {uid for (uid,) in query(store, "SELECT uid FROM runs WHERE status != 'finished'")}

    resumed = run_mosaic("experiment-start", str(path), "--store", str(store), "--resume",
                         timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    assert digests(store) == expected
    assert query(store, "SELECT count(*) FROM experiments") == [(1,)]
    per_run = dict(query(store, "SELECT run_id, count(*) FROM steps GROUP BY run_id"))
    for run_id, steps in query(store, "SELECT id, steps FROM runs"):
        assert per_run.get(run_id, 0) == steps
    assert query(store, "SELECT count(*) FROM (SELECT 1 FROM steps GROUP BY run_id, episode, "
                        "step, copy HAVING count(*) > 1)") == [(0,)]
    for uid, started_at in finished_before:  # not run again
        assert query(store, "SELECT started_at FROM runs WHERE uid = ?", uid) == [(started_at,)]
    assert resumed.stderr.count("finished before") == len(finished_before)
    continued = query(store, "SELECT r.uid, t.reason FROM transitions t JOIN runs r "
                             "ON r.id = t.run_id WHERE t.to_state = 'resumed'")
    # Each run that had started and not finished continues in its own row, once; the others
    # start as they would have.
    assert sorted(uid for uid, _ in continued) == sorted(unfinished)
    assert all(reason == "resumed (it was running) from episode 0"
               for _, reason in continued)


def test_resume_refuses_a_changed_file_and_says_when_there_is_nothing_to_resume(
        tmp_path: Path) -> None:
    path = write_experiment(tmp_path, cartpole(uid="changed", episodes=3))
    store = tmp_path / "results.sqlite"
    nothing = run_mosaic("experiment-start", str(path), "--store", str(store), "--resume")
    assert nothing.returncode == 0, nothing.stderr
    assert "nothing to resume" in nothing.stderr and "holds no experiment" in nothing.stderr

    done = run_mosaic("experiment-start", str(path), "--store", str(store), "-q")
    assert done.returncode == 0, done.stderr
    again = run_mosaic("experiment-start", str(path), "--store", str(store), "--resume")
    assert again.returncode == 0, again.stderr
    assert "every run of experiment 'changed'" in again.stderr

    path.write_text(path.read_text().replace("episodes: 3", "episodes: 4"))
    changed = run_mosaic("experiment-start", str(path), "--store", str(store), "--resume")
    assert changed.returncode == 2, changed.stderr
    assert "is not the file experiment 'changed' was started with: episodes: 3 -> 4" in (
        changed.stderr)
    assert "Traceback" not in changed.stderr


def test_a_run_whose_part_crashed_is_run_again_under_max_failures(tmp_path: Path,
                                                                  process_tag: str) -> None:
    marker = tmp_path / "crashed-once"
    crashing = cartpole(uid="retried", episodes=20, placement="process",
                        env="tests.fixtures.envs:CrashingOnceCartPole",
                        params=f"{{marker: {marker}, crash_at: 100}}",
                        executor="{max_failures: 1}")
    path = write_experiment(tmp_path, crashing)
    store = tmp_path / "results.sqlite"
    done = run_mosaic("experiment-start", str(path), "--store", str(store), "-q", timeout=120)
    assert done.returncode == 0, done.stderr
    assert marker.exists()
    [(status, steps)] = query(store, "SELECT status, steps FROM runs")
    assert status == "finished"
    assert query(store, "SELECT count(*) FROM steps") == [(steps,)]
    [(reason,)] = query(store, "SELECT reason FROM transitions WHERE to_state = 'resumed'")
    assert reason.startswith("attempt 2 of 2 after: ") and "died" in reason
    assert reason.endswith("from episode 0")

    marker.unlink()
    once = write_experiment(tmp_path, crashing.replace("{max_failures: 1}", "{max_failures: 0}"),
                            name="once.yml")
    failed = run_mosaic("experiment-start", str(once), "--store", str(tmp_path / "once.sqlite"),
                        "-q", timeout=120)
    assert failed.returncode == 1, failed.stderr


def test_resume_after_a_sigkill_during_shutdown(tmp_path: Path, process_tag: str) -> None:
    """The session SIGKILLed while the first run's environment closes (it holds there): the
    run is continued and ends with the digest of an uninterrupted invocation."""
    marker = tmp_path / "closing"
    text = staged_experiment(runs=2, episodes=5, stall=("environment", "close", marker),
                             hold=1.0)
    expected = uninterrupted_digests(tmp_path, text)
    marker.unlink()

    path = write_experiment(tmp_path, text)
    store = tmp_path / "results.sqlite"
    killed_when(path, store, marker.exists, "shutdown")
    assert query(store, "SELECT status FROM runs") == [("running",)]

    resumed = run_mosaic("experiment-start", str(path), "--store", str(store), "--resume",
                         "-q", timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    assert digests(store) == expected
    assert query(store, "SELECT count(*) FROM steps") == query(
        store, "SELECT sum(steps) FROM runs")


LEARNER = """\
    uid: periodic
    seed: 5
    episodes: 300
    placement: {placement}
    environments:
      - uid: cartpole
        env: gymnasium:CartPole-v1
    agents:
      - uid: learner
        brain: mosaic.agents.learners:PolicyGradientBrain
        muscle: mosaic.agents.learners:PolicyGradientMuscle
        params: {{hidden_sizes: [16], learning_rate: 0.01, batch_episodes: 4}}
        checkpoint_every: 25
"""


@pytest.mark.parametrize("placement", ["thread", "process"])
def test_a_learner_resumes_from_its_last_periodic_checkpoint_with_the_same_digest(
        placement: str, tmp_path: Path, process_tag: str) -> None:
    """Killed past its checkpoints at episodes 100 and 125, a policy-gradient run continues
    from the latest one the store has every record before, not from its start, and ends as an
    uninterrupted run: the same digest, every step once."""
    text = LEARNER.format(placement=placement)
    expected = uninterrupted_digests(tmp_path, text)

    path = write_experiment(tmp_path, text)
    store = tmp_path / "results.sqlite"
    killed_when(path, store, lambda: count(store, "SELECT count(*) FROM episodes") >= 130,
                "130 episodes")

    resumed = run_mosaic("experiment-start", str(path), "--store", str(store), "--resume",
                         "-q", timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    [(reason,)] = query(store, "SELECT reason FROM transitions WHERE to_state = 'resumed'")
    continued = int(reason.rsplit("from episode ", 1)[1].split()[0])
    assert continued in (100, 125, 150, 175), reason  # a checkpoint, not the start
    assert reason.endswith("(its checkpoint)")
    assert digests(store) == expected
    assert query(store, "SELECT count(*) FROM steps") == query(store, "SELECT steps FROM runs")
    assert query(store, "SELECT count(*) FROM episodes") == [(300,)]
    assert query(store, "SELECT count(*) FROM (SELECT 1 FROM steps GROUP BY episode, step "
                        "HAVING count(*) > 1)") == [(0,)]


PHASED = """\
    uid: phased
    seed: 5
    placement: process
    environments:
      - uid: cartpole
        env: gymnasium:CartPole-v1
    agents:
      - uid: learner
        brain: mosaic.agents.learners:PolicyGradientBrain
        muscle: mosaic.agents.learners:PolicyGradientMuscle
        params: {hidden_sizes: [16], learning_rate: 0.01, batch_episodes: 4}
        checkpoint_every: 25
    phases:
      - {name: train, mode: train, episodes: 150}
      - {name: test, mode: test, episodes: 30}
"""


@pytest.mark.parametrize("moment", ["mid-train", "between phases"])
def test_checkpoints_come_back_from_the_store_when_their_folder_is_gone(
        moment: str, tmp_path: Path, process_tag: str) -> None:
    """The session SIGKILLed and the checkpoints folder lost with the disk it was on (as on a
    Ray node without a shared file system): --resume writes them back from the store, so the
    training run continues from its periodic checkpoint and the test phase loads what
    training saved: the digests of an uninterrupted invocation."""
    expected = uninterrupted_digests(tmp_path, PHASED)

    path = write_experiment(tmp_path, PHASED)
    store = tmp_path / "results.sqlite"
    # Mid-training, once a periodic checkpoint has reached the store (about a second after
    # the brain saved it).
    condition = (
        (lambda: count(store, "SELECT count(*) FROM checkpoints WHERE episodes >= 50") >= 1)
        if moment == "mid-train"
        else (lambda: count(store, "SELECT count(*) FROM runs WHERE status = 'finished'") >= 1))
    killed_when(path, store, condition, moment)
    shutil.rmtree(tmp_path / "results-checkpoints")

    resumed = run_mosaic("experiment-start", str(path), "--store", str(store), "--resume",
                         "-q", timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    assert digests(store) == expected
    if moment == "mid-train":
        [(reason,)] = query(store, "SELECT reason FROM transitions WHERE to_state = 'resumed'")
        assert reason.endswith("(its checkpoint)"), reason
    assert query(store, "SELECT count(*) FROM steps") == query(store, "SELECT sum(steps) FROM runs")
