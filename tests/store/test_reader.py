"""open_store / Store: listing, run lookup by uid, prefix or id, the computed interrupted status,
decoded steps, and the plain-text formatting the CLI prints."""

from __future__ import annotations

import dataclasses
import pickle
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mosaic.core.errors import StoreError
from mosaic.store import (
    StoreWriter,
    format_run_detail,
    format_runs_table,
    open_store,
)
from mosaic.store.reader import Store

pytestmark = pytest.mark.timeout(30)


def rows(run: int, episode: int, count: int) -> list[tuple[Any, ...]]:
    return [
        (
            run,
            "CartPole-v1",
            episode,
            i,
            "agent",
            "agent_0",
            np.full(4, i, np.float32),
            i % 2,
            1.0,
            i == count - 1,
            False,
        )
        for i in range(count)
    ]


@pytest.fixture
def populated(tmp_path: Path) -> Path:
    """Two experiments: alpha with a finished run of 12 episodes and a failed run, beta with a
    run still running in this process."""
    path = tmp_path / "results" / "store.db"
    with StoreWriter(path, encode=pickle.dumps) as writer:
        alpha = writer.experiment_started("alpha", "alpha.yml", {"runs": 2})
        beta = writer.experiment_started("beta", "beta.yml", {})
        done = writer.run_started(alpha, "alpha-0-c0ffee", 0, 100)
        writer.record_transition(done, None, "setting_up", "start")
        writer.record_transition(done, "setting_up", "running", "ready")
        for episode in range(12):
            writer.record_steps(rows(done, episode, episode + 1))
            writer.record_episode(
                done,
                "CartPole-v1",
                episode,
                episode + 1,
                float(episode + 1),
                {"agent_0": episode + 1.0},
                True,
                False,
                1000 + episode,
            )
        writer.record_transition(done, "running", "finished", "all episodes done")
        writer.run_finished(done, "finished", None, 12, 78, digest="sha256:abc")
        failed = writer.run_started(alpha, "alpha-1-c0ffff", 1, 101)
        writer.record_steps(rows(failed, 0, 3))
        writer.run_finished(failed, "failed", "RuntimeError: boom\nTraceback ...", 0, 3)
        live = writer.run_started(beta, "beta-0-123456", 0, 7)
        writer.record_steps(rows(live, 0, 4))
        writer.record_episode(live, "CartPole-v1", 0, 4, 4.0, {"agent_0": 4.0}, True, False, 1)
    return path


@pytest.fixture
def store(populated: Path) -> Iterator[Store]:
    with open_store(populated, decode=pickle.loads) as opened:
        yield opened


def test_list_runs_reports_each_run(store):
    runs = store.list_runs()
    assert [r.uid for r in runs] == ["alpha-0-c0ffee", "alpha-1-c0ffff", "beta-0-123456"]
    done, failed, live = runs
    assert (done.experiment, done.run_index, done.seed, done.status) == (
        "alpha",
        0,
        100,
        "finished",
    )
    assert (done.episodes, done.steps, done.mean_return) == (12, 78, 6.5)
    assert done.duration is not None and done.duration >= 0 and done.ended_at is not None
    assert failed.status == "failed" and failed.error.startswith("RuntimeError: boom")
    assert failed.mean_return is None
    # the writer closed without finishing it, but this process is alive: still running
    assert live.status == "running" and live.ended_at is None
    assert (live.episodes, live.steps) == (1, 4)
    assert [r.uid for r in store.list_runs("beta")] == ["beta-0-123456"]
    assert store.list_runs("gamma") == []


@pytest.mark.parametrize("name", ["alpha-0-c0ffee", "alpha-0", "alpha-0-c0ffe", 1, "1"])
def test_show_run_by_uid_prefix_or_id(store, name):
    detail = store.show_run(name)
    assert detail.uid == "alpha-0-c0ffee" and detail.run.id == 1


def test_show_run_refuses_ambiguous_and_unknown_names(store):
    with pytest.raises(StoreError) as excinfo:
        store.show_run("alpha-")
    assert "alpha-0-c0ffee" in str(excinfo.value) and "alpha-1-c0ffff" in str(excinfo.value)
    with pytest.raises(StoreError, match=r"no run 'zeta'.*beta-0-123456"):
        store.show_run("zeta")
    with pytest.raises(StoreError, match="no run with id 42"):
        store.show_run(42)


def test_show_run_details(store):
    detail = store.show_run("alpha-0")
    assert [(t.seq, t.to_state) for t in detail.transitions] == [
        (1, "setting_up"),
        (2, "running"),
        (3, "finished"),
    ]
    assert detail.episode_stats.count == 12 and detail.episode_stats.total_steps == 78
    assert (detail.episode_stats.min_return, detail.episode_stats.max_return) == (1.0, 12.0)
    assert [e.episode for e in detail.first_episodes] == [0, 1, 2, 3, 4]
    assert [e.episode for e in detail.last_episodes] == [7, 8, 9, 10, 11]
    assert detail.last_episodes[-1].returns == {"agent_0": 12.0}
    assert detail.step_rows == 78 and detail.digest == "sha256:abc"
    assert detail.mean_return == 6.5 and detail.error is None
    few = store.show_run("beta")
    assert len(few.first_episodes) == 1 and few.last_episodes == []


def test_steps_are_decoded_in_order(store):
    records = list(store.steps("alpha-0", episode=3))
    assert [r.step for r in records] == [0, 1, 2, 3]
    np.testing.assert_array_equal(records[2].observation, np.full(4, 2, np.float32))
    assert records[3].action == 1 and records[3].terminated is True
    assert len(list(store.steps(1, limit=10))) == 10
    with pytest.raises(StoreError):
        store.steps("nobody")


def set_run(path: Path, uid: str, **values: Any) -> None:
    assignments = ", ".join(f"{key} = ?" for key in values)
    with sqlite3.connect(path) as db:
        db.execute(f"UPDATE runs SET {assignments} WHERE uid = ?", (*values.values(), uid))
    db.close()


def status_of(path: Path, uid: str) -> str:
    with open_store(path) as store:
        return store.show_run(uid).status


def test_running_run_of_a_dead_process_is_interrupted(populated):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(10)
    set_run(populated, "beta-0-123456", pid=child.pid)
    assert status_of(populated, "beta-0-123456") == "interrupted"
    with closing(sqlite3.connect(populated)) as db:  # computed, never written
        assert db.execute("SELECT status FROM runs WHERE uid = 'beta-0-123456'").fetchone() == (
            "running",
        )


def test_recycled_pid_does_not_keep_a_run_alive(populated):
    # our own pid, but the run started long before this process: the pid was reused
    set_run(populated, "beta-0-123456", started_at=time.time() - 30 * 86400)
    assert status_of(populated, "beta-0-123456") == "interrupted"


def test_run_on_another_host_is_judged_by_its_heartbeat(populated):
    other = socket.gethostname() + "-elsewhere"
    set_run(populated, "beta-0-123456", hostname=other, pid=1, heartbeat_at=time.time() - 5)
    assert status_of(populated, "beta-0-123456") == "running"
    set_run(populated, "beta-0-123456", heartbeat_at=time.time() - 3600)
    assert status_of(populated, "beta-0-123456") == "interrupted"
    with open_store(populated) as store:
        assert "last seen" in format_run_detail(store.show_run("beta"))


def test_open_store_never_creates_or_changes_a_file(tmp_path, populated):
    missing = tmp_path / "missing.db"
    with pytest.raises(StoreError, match="does not exist"):
        open_store(missing)
    assert not missing.exists()
    with pytest.raises(StoreError, match="directory"):
        open_store(tmp_path)
    before = populated.read_bytes()
    with open_store(populated) as store:
        store.list_runs()
        store.show_run("alpha-0")
    assert populated.read_bytes() == before


def test_open_store_refuses_a_foreign_database(tmp_path):
    path = tmp_path / "other.db"
    with closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE t (x)")
        db.commit()
    with pytest.raises(StoreError, match="not a mosaic store"):
        open_store(path)


def test_reader_sees_a_live_writer(tmp_path):
    path = tmp_path / "live.db"
    with StoreWriter(path, encode=pickle.dumps) as writer:
        run = writer.run_started(writer.experiment_started("x", None, None), "live", 0, None)
        writer.record_steps(rows(run, 0, 5))
        assert writer.flush(5)
        with open_store(path) as store:
            assert store.show_run("live").step_rows == 5
            writer.record_steps(rows(run, 1, 5))
            assert writer.flush(5)
            assert store.show_run("live").step_rows == 10


def test_a_run_lists_its_mean_return_of_the_last_100_episodes_and_of_all(tmp_path: Path) -> None:
    path = tmp_path / "long.db"
    with StoreWriter(path, encode=pickle.dumps) as writer:
        experiment = writer.experiment_started("long", "long.yml", {})
        run = writer.run_started(experiment, "long-0", 0, 1)
        for episode in range(150):  # returns 0 .. 149: the last 100 are 50 .. 149
            writer.record_episode(run, "cartpole", episode, 1, float(episode),
                                  {"agent_0": float(episode)}, True, False, None)
        # An evaluation episode counts in neither.
        writer.record_episode(run, "cartpole", 0, 1, 1000.0, {"agent_0": 1000.0}, True, False,
                              None, evaluation=True)
    with open_store(path, decode=pickle.loads) as store:
        [summary] = store.list_runs()
        assert (summary.recent_mean_return, summary.mean_return) == (99.5, 74.5)
        table = format_runs_table([summary]).splitlines()
        assert "MEAN RETURN (LAST 100)" in table[0] and "(ALL)" in table[0]
        assert table[1].split()[-2:] == ["99.5", "74.5"]


def test_a_run_of_several_agents_reads_each_agents_means(tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    # Two games: "a" plays both seats of the first (its return, the sum of both), and one seat
    # of the second, against "b"; "c" plays the first's third seat only in its last episodes.
    agents = {"duel": {"p0": "a", "p1": "b"}, "solo": {"x": "a", "y": "a", "z": "c"}}
    with StoreWriter(path, encode=pickle.dumps) as writer:
        experiment = writer.experiment_started("agents", "agents.yml", {})
        run = writer.run_started(experiment, "agents-0", 0, 1, agents=agents)
        for episode in range(120):
            writer.record_episode(run, "duel", episode, 1, 0.0,
                                  {"p0": float(episode), "p1": -float(episode)}, True, False, None)
            solo = {"x": 1.0, "y": 2.0, **({"z": 5.0} if episode >= 110 else {})}
            writer.record_episode(run, "solo", episode, 1, sum(solo.values()), solo, True, False,
                                  None)
        writer.record_episode(run, "duel", 0, 1, 0.0, {"p0": 1e6, "p1": -1e6}, True, False, None,
                              evaluation=True)  # counts in none of them
        single = writer.run_started(experiment, "agents-1", 1, 2, agents={"duel": {"p0": "a"}})
        writer.record_episode(single, "duel", 0, 1, 4.0, {"p0": 4.0}, True, False, None)
    with open_store(path, decode=pickle.loads) as store:
        several, alone = store.list_runs()
        detail = store.show_run("agents-0", recent=10)
        frame = store.runs_frame("agents-0", "agents-1")
    # "a"'s last 100 of its 240 episodes: 50 duels (episodes 70..119) and 50 solos (3 each).
    assert several.agent_recent_means == {"a": (sum(range(70, 120)) + 150) / 100,
                                          "b": -sum(range(20, 120)) / 100, "c": 5.0}
    assert several.agent_means == {"a": (sum(range(120)) + 360) / 240,
                                   "b": -sum(range(120)) / 120, "c": 5.0}
    assert detail.episode_stats.agent_recent_means == {
        "a": (sum(range(115, 120)) + 15) / 10, "b": -sum(range(110, 120)) / 10, "c": 5.0}
    assert detail.run.agent_means == several.agent_means
    assert alone.agent_means == alone.agent_recent_means == {} and alone.mean_return == 4.0
    assert list(frame.columns[-6:]) == [
        "recent_mean_return_a", "recent_mean_return_b", "recent_mean_return_c",
        "mean_return_a", "mean_return_b", "mean_return_c"]
    assert frame["mean_return_b"][0] == several.agent_means["b"]

    text = format_runs_table([several, alone]).splitlines()
    assert "a 48.75, b -69.5, c 5  a 31.25, b -59.5, c 5" in text[1]
    assert text[2].split()[-2:] == ["4", "4"]
    lines = format_run_detail(detail).splitlines()
    assert "mean return  (last 10) a 60, b -114.5, c 5 (total 4)" in lines

    # Two seeds of one sweep point: each agent's mean and range over them.
    swept = [dataclasses.replace(several, uid=f"agents-{seed}", params={"lr": 0.1},
                                 agent_recent_means={"a": value, "b": -value})
             for seed, value in enumerate((1.0, 3.0))]
    (line,) = [line for line in format_runs_table(swept).splitlines() if line.startswith("0.1 ")]
    assert line.split(None, 3)[3] == "a 2, b -2  a 1 .. 3, b -3 .. -1"


def test_runs_table_is_aligned(store):
    lines = format_runs_table(store.list_runs()).splitlines()
    header, body = lines[0], lines[1:]
    assert len(body) == 3
    status_at = header.index("STATUS")
    assert [line[status_at:].split()[0] for line in body] == ["finished", "failed", "running"]
    episodes_end = header.index("EPISODES") + len("EPISODES")  # numbers are right-aligned
    assert [line[:episodes_end].split()[-1] for line in body] == ["12", "0", "1"]
    assert "RuntimeError: boom" in body[1] and "Traceback" not in body[1]
    assert format_runs_table([]) == "no runs"


def test_run_detail_text(store):
    text = format_run_detail(store.show_run("alpha-0"))
    assert "alpha-0-c0ffee (id 1)" in text
    assert "sha256:abc" in text and "all episodes done" in text
    assert "first 5 and last 5 of 12" in text
    assert "78 (78 step rows stored)" in text
    assert "COPY" not in text  # a run without copies has no copy column


def test_run_detail_tells_the_episodes_of_copies_apart(tmp_path: Path) -> None:
    path = tmp_path / "copies.db"
    with StoreWriter(path, encode=pickle.dumps) as writer:
        experiment = writer.experiment_started("copies", "copies.yml", {})
        run = writer.run_started(experiment, "copies-0", 0, 1)
        for copy in range(3):
            writer.record_episode(run, "cartpole", 0, 10 + copy, 1.0, {"agent_0": 1.0}, True,
                                  False, 7 + copy, copy)
    with open_store(path, decode=pickle.loads) as store:
        lines = format_run_detail(store.show_run("copies-0")).splitlines()
    header = next(line for line in lines if "EPISODE" in line)
    assert header.split()[:3] == ["ENVIRONMENT", "COPY", "EPISODE"]
    rows = [line.split() for line in lines[lines.index(header) + 1:]]
    assert [(row[1], row[2], row[3]) for row in rows] == [("0", "0", "10"), ("1", "0", "11"),
                                                          ("2", "0", "12")]


def test_an_interrupted_run_lasts_until_the_last_thing_it_stored(populated):
    """A SIGKILLed run has no end time: its duration runs to its heartbeat, which every commit
    of its steps or transitions refreshes, and is shown as a lower bound."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(10)
    started = time.time() - 3600
    set_run(populated, "beta-0-123456", pid=child.pid, started_at=started,
            heartbeat_at=started + 7.0)
    with open_store(populated) as store:
        detail = store.show_run("beta")
        assert detail.run.status == "interrupted"
        assert detail.run.duration == pytest.approx(7.0)
        assert "duration     >=7.0s" in format_run_detail(detail)
        table = format_runs_table(store.list_runs()).splitlines()
        [line] = [line for line in table if "beta" in line]
        assert " >=7.0s " in line

    set_run(populated, "beta-0-123456", heartbeat_at=None)  # none stored: no time known
    with open_store(populated) as store:
        assert store.show_run("beta").run.duration is None


def test_a_finished_run_shows_its_duration_as_it_is(store):
    assert ">=" not in format_run_detail(store.show_run("alpha-0"))
    assert ">=" not in format_runs_table(store.list_runs())
