"""A run's status and its transitions' states, given as the store's enumerations
(:mod:`mosaic.core.run_states`), are stored as their text, in SQLite and in PostgreSQL, and
read back as text; a status a run cannot end with is refused naming it as text."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from mosaic.core.errors import StoreError
from mosaic.core.run_states import RunState, RunStatus
from mosaic.store import open_store, schema
from tests.store.test_writer import make_writer, new_run

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request, tmp_path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "store.sqlite")
    server = request.getfixturevalue("server")
    return str(server.url(request.getfixturevalue("database")))


def test_members_are_stored_and_read_back_as_their_text(location, writers):
    writer = make_writer(writers, location)
    run = new_run(writer)
    writer.record_transition(run, RunState.RUNNING, RunState.STOPPING, "asked to stop")
    writer.run_finished(run, RunStatus.PRUNED, None, 2, 9)
    writer.close(timeout=10)
    with open_store(location) as store, store.reading() as conn:
        status = conn.execute(sa.select(schema.runs.c.status)).scalar_one()
        moves = conn.execute(sa.select(schema.transitions.c.from_state,
                                       schema.transitions.c.to_state)).all()
        [summary] = store.list_runs()
    assert (status, type(status)) == ("pruned", str)
    assert [tuple(move) for move in moves] == [("running", "stopping")]
    assert [type(state) for move in moves for state in move] == [str, str]
    assert (summary.status, type(summary.status)) == ("pruned", str)


def test_a_status_no_run_ends_with_is_refused_by_its_text(tmp_path, writers):
    writer = make_writer(writers, tmp_path / "store.sqlite")
    with pytest.raises(StoreError) as refused:
        writer.run_finished(new_run(writer), RunStatus.RUNNING, None, 0, 0)
    message = str(refused.value)
    assert "not 'running'" in message and "'cancelled'" in message
    assert "RunStatus" not in message
