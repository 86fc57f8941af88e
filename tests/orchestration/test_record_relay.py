"""The relay of a run's records from a Ray node to the command's store writer, without Ray: a
real RecordRelay sending over tcp with CURVE to a real server, applied to a real SQLite store."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from mosaic.conductors.run_context import RunContext
from mosaic.experiment import experiment_from_data
from mosaic.messages import RunRecordsRequest, RunRecordsResponse, codec
from mosaic.orchestration import record_relay
from mosaic.orchestration.record_relay import RecordRelay, apply
from mosaic.store import StoreWriter
from mosaic.transport import EndpointAllocator, RequestServer

EXPERIMENT = {
    "uid": "relay",
    "environments": [{"uid": "cartpole", "env": "gymnasium:CartPole-v1"}],
    "agents": [{"uid": "random", "muscle": "mosaic.agents:RandomMuscle"}],
}


def _serve(server: RequestServer, store: StoreWriter, ctx: RunContext,
           until: threading.Event | None = None, requests: int = 1,
           timeout: float = 10.0) -> int:
    """Answer relay requests (cancel: ``ctx.cancelled``) until ``until`` is set or ``requests``
    have been answered; return how many were."""
    answered = 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if until is not None and until.is_set():
            break
        if until is None and answered >= requests:
            break
        incoming = server.receive()
        if incoming is not None and isinstance(incoming.message, RunRecordsRequest):
            apply(incoming.message, store, ctx)
            server.reply(incoming, RunRecordsResponse(ctx.run_uid, ctx.cancelled.is_set()))
            answered += 1
    return answered


@contextmanager
def relayed_run(tmp_path: Path) -> Iterator[tuple[StoreWriter, RequestServer, RecordRelay,
                                                  RunContext, RunContext]]:
    """A run recorded in a store writer (``here``, the command's side) and its side on a node
    (``there``: the same run id and secrets, its own endpoints) relaying to a server of the
    command's; everything closed afterwards."""
    config = experiment_from_data(EXPERIMENT).run_config(0)
    writer = StoreWriter(tmp_path / "results.sqlite")
    writer.start()
    server: RequestServer | None = None
    relay: RecordRelay | None = None
    try:
        run_id = writer.run_started(writer.experiment_started("relay", None, None), "r0", 0, 1)
        here = RunContext.for_run("relay", "r0", run_id, 1, config, writer)
        there = RunContext("relay", "r0", run_id, 1, config, EndpointAllocator("r0"), None,
                           trust=here.trust)
        server = RequestServer("tcp://127.0.0.1:*", name="relay", idle_timeout_ms=20,
                               credentials=here.credentials)
        relay = RecordRelay(server.endpoint, there, "node test")
        there.store = relay
        relay.start()
        yield writer, server, relay, here, there
    finally:
        if relay is not None:
            relay.close()
        if server is not None:
            server.close()
        writer.close(10)


def close_answering(relay: RecordRelay, server: RequestServer, writer: StoreWriter,
                    here: RunContext) -> None:
    """Close ``relay`` while the command's side answers it: it sends what is left first."""
    closed = threading.Event()
    closer = threading.Thread(target=lambda: (relay.close(), closed.set()))
    closer.start()
    _serve(server, writer, here, until=closed)
    closer.join(5)
    assert relay.lost is None


def test_records_and_progress_reach_the_store_and_a_cancel_reaches_the_run(
        tmp_path: Path) -> None:
    with relayed_run(tmp_path) as (writer, server, relay, here, there):
        run_id = here.run_id
        relay.record_transition(run_id, None, "running", None)
        observation = np.arange(4, dtype=np.float32)
        relay.record_steps([(run_id, "cartpole", 0, step, "random", "agent_0", observation,
                             np.int64(1), 1.0, False, step == 1) for step in range(2)])
        relay.record_steps([(run_id + 1, "cartpole", 0, 9, "random", "agent_0", observation,
                             np.int64(1), 1.0, False, False)])  # another run's: dropped
        relay.record_episode(run_id, "cartpole", 0, 2, 2.0, {"agent_0": 2.0}, False, True, 7,
                             snapshots={"past": 0})
        there.progress.steps, there.progress.episodes = 2, 1
        there.progress.recent_returns.append(2.0)
        assert _serve(server, writer, here, requests=3) == 3
        assert (here.progress.steps, here.progress.episodes, here.progress.recent_mean) == (
            2, 1, 2.0)

        here.cancelled.set()
        _serve(server, writer, here, requests=1)
        assert there.cancelled.wait(5), "the cancel did not reach the run"

        close_answering(relay, server, writer, here)
        writer.flush(10)
    with sqlite3.connect(tmp_path / "results.sqlite") as db:
        assert db.execute("SELECT step FROM steps ORDER BY step").fetchall() == [(0,), (1,)]
        assert db.execute("SELECT steps, total_return, snapshots FROM episodes").fetchall() == [
            (2, 2.0, '{"past": 0}')]
        assert db.execute("SELECT to_state FROM transitions").fetchall() == [("running",)]


def test_a_command_that_is_gone_cancels_the_run_and_says_why(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(record_relay, "ANSWER_TIMEOUT_S", 0.5)
    config = experiment_from_data(EXPERIMENT).run_config(0)
    ctx = RunContext.for_run("relay", "r0", 1, 1, config, None)
    relay = RecordRelay("tcp://127.0.0.1:9", ctx, "node test")  # nobody listens there
    relay.start()
    try:
        assert ctx.cancelled.wait(10), "the run was not cancelled"
    finally:
        relay.close()
    assert relay.lost is not None and "0.5" in relay.lost


def test_a_full_relay_holds_its_callers_until_the_command_takes_the_records(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(record_relay, "MAX_QUEUED", 5)
    with relayed_run(tmp_path) as (writer, server, relay, here, _):
        run_id = here.run_id
        observation = np.zeros(4, dtype=np.float32)
        produced = threading.Event()

        def produce() -> None:
            assert relay is not None
            for step in range(40):
                relay.record_steps([(run_id, "cartpole", 0, step, "random", "agent_0",
                                     observation, 1, 1.0, False, False)])
            produced.set()

        producer = threading.Thread(target=produce)
        producer.start()
        # Nobody answers yet: the producer waits with the queue at its bound.
        assert not produced.wait(1.0), "the producer was not held"
        assert relay.queued == 5
        _serve(server, writer, here, until=produced)
        producer.join(5)
        assert produced.is_set()
        close_answering(relay, server, writer, here)
        assert writer.flush(10)
    with sqlite3.connect(tmp_path / "results.sqlite") as db:
        assert db.execute("SELECT step FROM steps ORDER BY step").fetchall() == [
            (step,) for step in range(40)]


class _BehindStore:
    """A writer that stays ``queued`` calls behind, and records nothing."""

    def __init__(self, queued: int) -> None:
        self.queued = queued

    def record_steps(self, rows: object) -> None:
        pass


def test_apply_holds_the_answer_while_the_commands_writer_is_behind(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(record_relay, "WRITER_WAIT_S", 0.3)
    config = experiment_from_data(EXPERIMENT).run_config(0)
    ctx = RunContext.for_run("relay", "r0", 1, 1, config, None)
    request = RunRecordsRequest("r0", "node test", (("steps", ([],)),),
                                record_relay.snapshot(ctx.progress))
    took = {}
    for queued in (record_relay.WRITER_BACKLOG, record_relay.WRITER_BACKLOG + 1):
        start = time.monotonic()
        apply(request, _BehindStore(queued), ctx)  # type: ignore[arg-type]
        took[queued] = time.monotonic() - start
    assert took[record_relay.WRITER_BACKLOG] < 0.2
    assert 0.3 <= took[record_relay.WRITER_BACKLOG + 1] < 2


class _ListStore:
    """A writer that keeps what it is given, with the thread that gave it."""

    queued = 0

    def __init__(self) -> None:
        self.steps: list[tuple[str, int]] = []

    def record_steps(self, rows: list[tuple[object, ...]]) -> None:
        self.steps += [(threading.current_thread().name, int(row[3])) for row in rows]


def test_a_sink_hands_the_records_in_order_off_the_callers_thread(
        caplog: pytest.LogCaptureFixture) -> None:
    config = experiment_from_data(EXPERIMENT).run_config(0)
    ctx = RunContext.for_run("relay", "r0", 1, 1, config, None)
    store = _ListStore()

    def request(steps: range, packed: bool = True) -> RunRecordsRequest:
        records = [("steps", ([(1, "cartpole", 0, step, "random", "agent_0",
                                np.zeros(2, np.float32), 1, 1.0, False, False)],))
                   for step in steps]
        ctx_progress = RunContext.for_run("relay", "r0", 1, 1, config, None).progress
        ctx_progress.steps = steps.stop
        return RunRecordsRequest("r0", "node test",
                                 (codec.pack(records),) if packed else tuple(records),
                                 record_relay.snapshot(ctx_progress))

    sink = record_relay.RecordSink(store, ctx)  # type: ignore[arg-type]
    try:
        sink.submit(request(range(0, 50)))
        assert ctx.progress.steps == 50  # at once, whatever the records' way
        sink.submit(RunRecordsRequest("r0", "node test", (b"\xc1 not msgpack",),
                                      record_relay.snapshot(ctx.progress)))
        sink.submit(request(range(50, 60), packed=False))
        sink.submit(request(range(60, 100)))
    finally:
        sink.close(10)
    assert [step for _, step in store.steps] == list(range(100))
    assert {name for name, _ in store.steps} == {"relay-sink-r0"}
    assert "a relayed batch of records was dropped" in caplog.text
    sink.submit(request(range(100, 101)))  # after close: handed on the caller's thread
    assert store.steps[-1] == (threading.current_thread().name, 100)
