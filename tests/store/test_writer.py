"""StoreWriter: what is enqueued is what gets committed, flush and close keep their promises,
errors surface without hanging, and a killed writer leaves every committed batch readable."""

from __future__ import annotations

import json
import pickle
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mosaic.core.errors import StoreError
from mosaic.store import StoreWriter, open_store

pytestmark = pytest.mark.timeout(30)


def make_writer(writers: list[StoreWriter], path: Path, **kwargs: Any) -> StoreWriter:
    kwargs.setdefault("encode", pickle.dumps)
    writer = StoreWriter(path, **kwargs)
    writers.append(writer)
    writer.start()
    return writer


def new_run(writer: StoreWriter, uid: str = "run-1") -> int:
    experiment = writer.experiment_started("exp", "exp.yml", {"seed": 1})
    return writer.run_started(experiment, uid, 0, 1)


def step_rows(run_id: int, count: int, episode: int = 0, start: int = 0) -> list[tuple[Any, ...]]:
    return [
        (
            run_id,
            "CartPole-v1",
            episode,
            i,
            "agent",
            "agent_0",
            np.full(4, i, dtype=np.float32),
            i % 2,
            np.float32(1.0),
            False,
            i == count - 1,
        )
        for i in range(start, start + count)
    ]


def count(path: Path, table: str, where: str = "") -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute(f"SELECT count(*) FROM {table} {where}").fetchone()[0])
    finally:
        db.close()


def test_every_enqueued_row_is_committed_once_and_intact(tmp_path, writers):
    path = tmp_path / "nested" / "dir" / "store.db"
    writer = make_writer(writers, path, batch_rows=64)
    run = new_run(writer)
    sizes = [1, 7, 500, 64, 3, 1000, 2]
    start = 0
    for size in sizes:
        writer.record_steps(step_rows(run, size, start=start))
        start += size
    writer.record_transition(run, None, "running", "started")
    writer.record_episode(
        run, "CartPole-v1", 0, start, float(start), {"agent_0": np.float64(start)}, False, True, 11
    )
    writer.record_transition(run, "running", "finished", "done")
    writer.run_finished(run, "finished", None, 1, start, digest="d1")
    assert writer.flush(10)

    assert count(path, "steps") == sum(sizes)
    assert writer.stats.steps_written == sum(sizes)
    with closing(sqlite3.connect(path)) as db:
        steps = [r[0] for r in db.execute("SELECT step FROM steps ORDER BY id")]
        obs, action, reward, truncated = db.execute(
            "SELECT observation, action, reward, truncated FROM steps WHERE step = 570"
        ).fetchone()
        seqs = db.execute("SELECT seq, to_state FROM transitions ORDER BY seq").fetchall()
        status, ended, digest, n_steps = db.execute(
            "SELECT status, ended_at, digest, steps FROM runs WHERE id = ?", (run,)
        ).fetchone()
        returns = db.execute("SELECT returns FROM episodes").fetchone()[0]
    assert steps == list(range(sum(sizes)))
    np.testing.assert_array_equal(pickle.loads(obs), np.full(4, 570, dtype=np.float32))
    assert pickle.loads(action) == 0 and reward == 1.0 and truncated == 0
    assert seqs == [(1, "running"), (2, "finished")]
    assert (status, digest, n_steps) == ("finished", "d1", sum(sizes)) and ended is not None
    assert json.loads(returns) == {"agent_0": 1577.0}


def test_rows_from_many_threads_all_arrive(tmp_path, writers):
    path = tmp_path / "store.db"
    writer = make_writer(writers, path, batch_rows=100)
    run = new_run(writer)

    def produce(episode: int) -> None:
        for chunk in range(20):
            writer.record_steps(step_rows(run, 50, episode=episode, start=chunk * 50))

    threads = [threading.Thread(target=produce, args=(e,)) for e in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert writer.flush(10)
    assert count(path, "steps") == 4 * 20 * 50
    assert count(path, "steps", "WHERE episode = 3") == 1000


def test_commits_within_flush_interval_without_flush(tmp_path, writers):
    path = tmp_path / "store.db"
    writer = make_writer(writers, path, batch_rows=10_000, flush_interval=0.05)
    run = new_run(writer)
    writer.record_steps(step_rows(run, 10))  # far below batch_rows: only the interval commits
    deadline = time.monotonic() + 5
    while count(path, "steps") < 10:
        assert time.monotonic() < deadline, "rows were not committed by the interval"
        time.sleep(0.02)


def heartbeat_of(path: Path, run: int) -> float:
    with closing(sqlite3.connect(path)) as db:
        [(heartbeat,)] = db.execute("SELECT heartbeat_at FROM runs WHERE id = ?", (run,))
    return float(heartbeat)


def test_each_commit_of_steps_or_transitions_refreshes_the_run_heartbeat(tmp_path, writers):
    """Steps carry no time: the heartbeat dates a run's last commit, so that a run killed
    between two 30 s heartbeats still has a duration up to its last stored step."""
    path = tmp_path / "store.db"
    writer = make_writer(writers, path)
    run = new_run(writer)
    other = new_run(writer, "run-2")
    assert writer.flush()
    at_start = heartbeat_of(path, run)
    time.sleep(0.05)
    writer.record_steps(step_rows(run, 3))
    assert writer.flush()
    after_steps = heartbeat_of(path, run)
    assert after_steps > at_start
    assert heartbeat_of(path, other) < after_steps  # only the runs in the commit
    time.sleep(0.05)
    writer.record_transition(run, "running", "stopping", "done")
    assert writer.flush()
    assert heartbeat_of(path, run) > after_steps
    writer.run_finished(run, "finished", None, episodes=0, steps=3)
    assert writer.flush()
    finished = heartbeat_of(path, run)
    writer.record_steps(step_rows(run, 1, start=3))  # late rows do not move a finished run
    assert writer.flush()
    assert heartbeat_of(path, run) == finished


def test_flush_waits_for_earlier_records_and_times_out_honestly(tmp_path, writers):
    gate = threading.Event()

    def slow_encode(value: Any) -> bytes:
        gate.wait(10)
        return pickle.dumps(value)

    path = tmp_path / "store.db"
    writer = make_writer(writers, path, encode=slow_encode, flush_interval=60)
    run = new_run(writer)
    writer.record_steps(step_rows(run, 3))
    began = time.monotonic()
    try:
        assert writer.flush(timeout=0.2) is False
        assert time.monotonic() - began < 2
        assert count(path, "steps") == 0
    finally:
        gate.set()  # lets the writer go on, so that it can be closed even if this test fails
    # flush wakes the writer at once although flush_interval is a minute
    assert writer.flush(timeout=5) is True
    assert count(path, "steps") == 3


def test_close_is_idempotent_and_final(tmp_path, writers):
    path = tmp_path / "store.db"
    unstarted = StoreWriter(tmp_path / "never.db", encode=pickle.dumps)
    unstarted.record_steps(step_rows(1, 2))
    assert unstarted.queued == 1
    unstarted.close()
    unstarted.close()
    assert not (tmp_path / "never.db").exists()

    writer = make_writer(writers, path, flush_interval=60)
    run = new_run(writer)
    writer.record_steps(step_rows(run, 25))
    writer.close(timeout=5)  # writes what is queued although the interval has not passed
    writer.close(timeout=5)
    assert count(path, "steps") == 25
    assert writer.flush(1) is True
    with pytest.raises(StoreError, match="closed"):
        writer.record_steps(step_rows(run, 1))
    with pytest.raises(StoreError, match="closed"):
        writer.run_started(1, "another", 1, 1)
    with pytest.raises(StoreError):
        writer.start()


def test_context_manager_starts_and_closes(tmp_path):
    path = tmp_path / "store.db"
    with StoreWriter(path, encode=pickle.dumps) as writer:
        run = new_run(writer)
        writer.record_steps(step_rows(run, 5))
    assert count(path, "steps") == 5


def test_constraint_violation_surfaces_once_and_keeps_good_records(tmp_path, writers):
    path = tmp_path / "store.db"
    writer = make_writer(writers, path, flush_interval=60)
    run = new_run(writer)
    writer.record_steps(step_rows(run, 10))
    writer.record_steps(step_rows(999, 5))  # no such run: foreign key violation
    writer.record_steps(step_rows(run, 10, start=10))
    with pytest.raises(StoreError, match="FOREIGN KEY"):
        writer.flush(5)
    assert count(path, "steps") == 20  # only the offending call's rows are lost
    assert writer.stats.rows_dropped == 5
    assert writer.flush(5) is True  # reported once
    writer.record_steps(step_rows(run, 1, start=20))
    assert writer.flush(5) and count(path, "steps") == 21


def test_pending_error_is_raised_by_next_synchronous_call(tmp_path, writers):
    path = tmp_path / "store.db"
    writer = make_writer(writers, path, flush_interval=0.02)
    run = new_run(writer)
    writer.run_finished(run + 1, "finished", None, 0, 0)  # unknown run
    deadline = time.monotonic() + 5
    while writer.stats.errors == 0:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with pytest.raises(StoreError, match="no such run"):
        writer.run_started(1, "run-2", 1, 2)
    assert writer.run_started(1, "run-2", 1, 2) == run + 1


def test_pending_error_is_raised_by_close(tmp_path, writers):
    writer = make_writer(writers, tmp_path / "store.db", flush_interval=60)
    writer.record_steps(step_rows(12345, 2))
    with pytest.raises(StoreError, match="constraint"):
        writer.close(timeout=5)
    writer.close(timeout=5)


def test_synchronous_call_errors_go_to_their_caller(tmp_path, writers):
    writer = make_writer(writers, tmp_path / "store.db")
    run = new_run(writer, "dup")
    with pytest.raises(StoreError, match="UNIQUE"):
        writer.run_started(1, "dup", 1, 1)
    with pytest.raises(StoreError, match="FOREIGN KEY"):
        writer.run_started(77, "orphan", 0, 1)
    writer.record_steps(step_rows(run, 3))
    assert writer.flush(5) is True  # the writer carries on


def test_bad_rows_are_dropped_alone(tmp_path, writers):
    def picky(value: Any) -> bytes:
        if isinstance(value, set):
            raise TypeError("sets are not supported")
        return pickle.dumps(value)

    path = tmp_path / "store.db"
    writer = make_writer(writers, path, encode=picky)
    run = new_run(writer)
    rows = step_rows(run, 4)
    rows[1] = (*rows[1][:6], {1, 2}, *rows[1][7:])
    rows[2] = rows[2][:5]  # too short
    writer.record_steps(rows)
    with pytest.raises(StoreError, match="2 of 4 step rows"):
        writer.flush(5)
    assert count(path, "steps") == 2


def test_metric_rows_are_committed_and_a_bad_one_is_dropped_alone(tmp_path, writers):
    path = tmp_path / "store.db"
    writer = make_writer(writers, path)
    run = new_run(writer)
    writer.record_metrics([
        (run, "learner", "learner", "loss", np.float64(0.5), 8, 171, 1.5),
        (run, "learner", "learner@env", "epsilon", 1, 9, np.int64(200), 2.5),
        (run, "learner", "learner", "loss"),  # too short
    ])
    with pytest.raises(StoreError, match="1 of 3 metric rows"):
        writer.flush(5)
    with closing(sqlite3.connect(path)) as db:
        rows = db.execute("SELECT run_id, agent, source, name, value, episode, step, at "
                          "FROM metrics ORDER BY id").fetchall()
    assert rows == [(run, "learner", "learner", "loss", 0.5, 8, 171, 1.5),
                    (run, "learner", "learner@env", "epsilon", 1.0, 9, 200, 2.5)]
    assert writer.stats.metrics_written == 2
    writer.close()
    with pytest.raises(StoreError, match="closed"):
        writer.record_metrics([])


def test_invalid_final_status_is_refused_at_once(tmp_path, writers):
    writer = make_writer(writers, tmp_path / "store.db")
    with pytest.raises(StoreError, match="finished"):
        writer.run_finished(1, "running", None, 0, 0)


def test_directory_path_is_refused_clearly(tmp_path):
    with pytest.raises(StoreError, match="is a directory"):
        StoreWriter(tmp_path, encode=pickle.dumps)


def test_unusable_location_fails_start_without_hanging(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    writer = StoreWriter(blocker / "store.db", encode=pickle.dumps)
    began = time.monotonic()
    with pytest.raises(StoreError, match="cannot create the directory"):
        writer.start(timeout=5)
    assert time.monotonic() - began < 5
    writer.close()


def test_foreign_database_fails_start(tmp_path):
    path = tmp_path / "other.db"
    with closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("INSERT INTO meta VALUES ('schema_version', '999')")
        db.commit()
    writer = StoreWriter(path, encode=pickle.dumps)
    with pytest.raises(StoreError, match="schema version 999"):
        writer.start(timeout=5)


def test_round_trip_with_the_message_codec(tmp_path, writers):
    codec = pytest.importorskip("mosaic.messages.codec")
    path = tmp_path / "store.db"
    writer = make_writer(writers, path, encode=None)
    run = new_run(writer)
    observation = {"pos": np.arange(6, dtype=np.float64).reshape(2, 3), "flag": np.bool_(True)}
    action = (np.int64(3), 2**100, [1.5, "x"])
    writer.record_steps([(run, "env", 0, 0, "agent", "p0", observation, action, 0.5, True, False)])
    writer.close(timeout=5)
    with open_store(path) as store:
        (record,) = list(store.steps("run-1"))
    np.testing.assert_array_equal(record.observation["pos"], observation["pos"])
    assert type(record.observation["flag"]) is np.bool_ and bool(record.observation["flag"])
    assert record.action == action and type(record.action[0]) is np.int64
    assert codec.unpack(codec.pack(action)) == action


KILLED_WRITER = textwrap.dedent(
    """
    import pickle, sys
    import numpy as np
    from mosaic.store import StoreWriter

    writer = StoreWriter(sys.argv[1], encode=pickle.dumps, flush_interval=0.05)
    writer.start()
    experiment = writer.experiment_started("exp", None, {})
    run = writer.run_started(experiment, "killed-run", 0, 0)
    step = 0
    while True:
        rows = [(run, "env", 0, step + i, "a", "s", np.zeros(4, np.float32), 1, 1.0, False,
                 False) for i in range(100)]
        step += 100
        writer.record_steps(rows)
        if step % 500 == 0:
            if not writer.flush(10):
                raise SystemExit("flush timed out")
            print(step, flush=True)
    """
)


def test_sigkill_after_flushes_keeps_every_committed_batch(tmp_path):
    path = tmp_path / "killed.db"
    script = tmp_path / "writer.py"
    script.write_text(KILLED_WRITER)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(path)], stdout=subprocess.PIPE, text=True
    )
    committed = 0
    try:
        deadline = time.monotonic() + 15
        while committed < 3000:
            assert time.monotonic() < deadline, "the writer process made no progress"
            line = proc.stdout.readline()
            assert line, f"the writer process exited with {proc.wait(5)}"
            committed = int(line)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(5) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        proc.stdout.close()

    with closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = db.execute("SELECT count(*), max(step) FROM steps").fetchone()
    assert stored[0] >= committed
    assert stored == (stored[1] + 1, stored[1])  # a prefix of the steps, without holes
    with open_store(path, decode=pickle.loads) as store:
        (run,) = store.list_runs()
    assert run.uid == "killed-run" and run.status == "interrupted"
