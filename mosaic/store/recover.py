"""Writing a spill file into its store: what ``mosaic store recover SPILL --store S`` does.

A spill file (:mod:`mosaic.store._spill`) holds the records a run's store did not take before it
was given up on. Once the store is back, :func:`recover_spill` writes them in, in the order they
were recorded, in one transaction: all of them or, on any error, none. It first checks that the
store is the one the runs were recorded in (each run the file names is there under the same
uid), skips what the store holds already (a recovery that was interrupted, or a commit whose
answer was lost before the store was given up on), and removes the file once it is in.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from mosaic.core.errors import StoreError
from mosaic.store import schema
from mosaic.store._batch import (
    CHECKPOINT,
    EPISODE,
    FINISH,
    METRICS,
    STEPS,
    TRANSITION,
    VIDEO,
    Batch,
    delete_meta,
    get_meta,
    set_meta,
    steps_insert,
    write_batch,
)
from mosaic.store._spill import CHECK, RUN, meta_key, read_spill
from mosaic.store.resume import RESUMED
from mosaic.store.url import describe_error, locate, open_engine

__all__ = ["Recovery", "recover_spill"]

#: Records per statement batch while writing a spill file in.
_CHUNK_ROWS = 20_000


@dataclass(frozen=True)
class Recovery:
    """What :func:`recover_spill` did: records written now, records the store held already,
    the runs they belong to, and the bytes at the end of the file that were a record cut off
    when the command that wrote it was killed (lost: they were never a whole record)."""

    spill: Path
    store: str
    written: int
    already: int
    runs: tuple[str, ...]
    cut_off: int
    #: Runs resumed (``--resume``) after the file was written: their records in it are not
    #: the run's any more, and are left out.
    superseded: tuple[str, ...] = ()


def recover_spill(spill: str | Path, store: str | Path) -> Recovery:
    """Write the records of the spill file ``spill`` into ``store`` (a SQLite path or a
    database URL) and remove the file.

    Raises StoreError, with nothing written, if the file is not a spill file, the store cannot
    be opened or is not the one the runs were recorded in, or a write fails.
    """
    path = Path(spill)
    contents = read_spill(path)
    location = locate(store)
    engine = open_engine(location, write=True)
    key = meta_key(contents.header.id)
    try:
        with engine.begin() as conn:
            schema.check_schema(conn, location.describe())
            runs = _check_runs(conn, contents.items, location.describe())
            superseded = _resumed_since(conn, contents.items, contents.header.created)
            done = int(get_meta(conn, key) or contents.start)
            items = [item for item in contents.items
                     if item[0] in (RUN, CHECK) or _run_of(item[0], item[1]) not in superseded]
            written, already = _write(conn, items, done, steps_insert(engine))
            end = contents.items[-1][2] if contents.items else contents.start
            set_meta(conn, key, str(end))
        path.unlink()
        with contextlib.suppress(sa.exc.SQLAlchemyError), engine.begin() as conn:
            delete_meta(conn, key)  # only a key left behind if this fails
    except sa.exc.SQLAlchemyError as exc:
        raise StoreError(f"recovering {path} into {location.describe()} failed, nothing was "
                         f"written: {describe_error(exc, location.url)}") from None
    except OSError as exc:
        raise StoreError(f"the records of {path} are in {location.describe()}, but the file "
                         f"could not be removed: {exc.strerror or exc}") from None
    finally:
        engine.dispose()
    return Recovery(path, location.describe(), written, already, runs, contents.cut_off,
                    tuple(superseded.values()))


def _check_runs(conn: sa.Connection, items: list[tuple[int, Any, int]],
                where: str) -> tuple[str, ...]:
    """The uids of the runs the items name, each checked to be in the store as that uid; and
    every run a record belongs to named."""
    named = {int(params[0]): str(params[1]) for kind, params, _ in items if kind == RUN}
    referenced = {_run_of(kind, params) for kind, params, _ in items
                  if kind not in (RUN, CHECK)}
    unnamed = sorted(referenced - set(named))
    if unnamed:
        raise StoreError(f"the spill file has records of runs {unnamed} it does not name")
    held = {int(run): str(uid) for run, uid in conn.execute(
        sa.select(schema.runs.c.id, schema.runs.c.uid).where(schema.runs.c.id.in_(sorted(named))))}
    for run, uid in sorted(named.items()):
        if held.get(run) != uid:
            there = f"run {run} is {held[run]!r}" if run in held else f"there is no run {run}"
            raise StoreError(f"the spill file's run {run} is {uid!r}, but in {where} {there}: "
                             "give --store the store those runs were recorded in")
    return tuple(named[run] for run in sorted(referenced))


def _resumed_since(conn: sa.Connection, items: list[tuple[int, Any, int]],
                   since: float) -> dict[int, str]:
    """The runs named in ``items`` that were resumed after ``since`` (id -> uid)."""
    named = {int(params[0]): str(params[1]) for kind, params, _ in items if kind == RUN}
    t = schema.transitions
    resumed = conn.execute(sa.select(t.c.run_id).distinct().where(
        t.c.run_id.in_(sorted(named)), t.c.to_state == RESUMED, t.c.at > since)).scalars()
    return {int(run): named[int(run)] for run in resumed}


def _run_of(kind: int, params: Any) -> int:
    if kind == STEPS:
        return int(params[0][0])
    if kind == TRANSITION:
        return int(params["p_run"])
    if kind == FINISH:
        return int(params["p_id"])
    if kind in (EPISODE, METRICS, CHECKPOINT, VIDEO):
        row = params[0] if kind == METRICS else params
        return int(row["run_id"])
    raise StoreError(f"the spill file holds a record of an unknown kind {kind}")


def _write(conn: sa.Connection, items: list[tuple[int, Any, int]], done: int,
           steps_sql: str | None) -> tuple[int, int]:
    """Write the items after offset ``done``; return how many records were written and how
    many were in the store already."""
    written = already = skip = 0
    batch = Batch()
    for kind, params, end in items:
        if kind == RUN:
            continue
        if kind == CHECK:  # a commit whose answer was lost: skip its records if it happened
            writer_key, seq, count = params
            found = get_meta(conn, str(writer_key))
            skip = int(count) if found is not None and int(found) >= int(seq) else 0
            continue
        rows = len(params) if kind in (STEPS, METRICS) else 1
        if end <= done or skip:
            skip = max(0, skip - 1)
            already += rows
            continue
        batch.add(kind, params)
        written += rows
        if batch.rows() >= _CHUNK_ROWS:
            _write_chunk(conn, batch, steps_sql)
            batch = Batch()
    _write_chunk(conn, batch, steps_sql)
    return written, already


def _write_chunk(conn: sa.Connection, batch: Batch, steps_sql: str | None) -> None:
    missing = write_batch(conn, batch, steps_sql)
    if missing:  # pragma: no cover - the runs were checked first
        raise StoreError(f"no such run among ids {missing}")
