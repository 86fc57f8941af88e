"""The episodes of runs as a pandas DataFrame, read from the store's ``episodes`` table.

pandas is an optional extra (``pip install 'mosaic[pandas]'``); without it, :func:`episodes_frame`
raises an ImportError that names the extra. The store is opened read-only with
:mod:`mosaic.store`'s own engine and schema check, so a store of another schema version is the
same :class:`~mosaic.core.errors.StoreError` as for ``mosaic runs list``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from mosaic.core.errors import StoreError
from mosaic.store import schema
from mosaic.store.url import locate, open_engine

if TYPE_CHECKING:
    import pandas

__all__ = ["PANDAS_EXTRA", "episodes_frame", "require_pandas"]

#: How to install pandas for mosaic.
PANDAS_EXTRA = "pip install 'mosaic[pandas]'"
# Run ids per query: SQLite limits the number of bound parameters.
_CHUNK = 500
#: The columns of :func:`episodes_frame`, before one column per sweep key path.
COLUMNS = ("run", "run_index", "seed", "environment", "copy", "episode", "steps",
           "total_return", "returns", "terminated", "truncated", "episode_seed")


def require_pandas() -> Any:
    """The pandas module; raises ImportError naming the extra that installs it."""
    try:
        import pandas
    except ImportError as error:
        raise ImportError(f"a DataFrame of results needs pandas: {PANDAS_EXTRA}") from error
    return pandas


def episodes_frame(store: Path, runs: Sequence[tuple[str, int, int, dict[str, Any]]]
                   ) -> pandas.DataFrame:
    """One row per recorded episode of ``runs`` (uid, run index, seed, sweep values each), in
    run order, then by environment, copy and episode.

    Columns: ``run`` (uid), ``run_index``, ``seed`` (the run's), one column per key path of the
    sweep, then ``environment``, ``copy``, ``episode``, ``steps``, ``total_return``,
    ``returns`` (a mapping of env agent ids to returns), ``terminated``, ``truncated`` and
    ``episode_seed``. Raises ImportError without pandas and StoreError if the store cannot be
    read.
    """
    pandas = require_pandas()
    paths = list(dict.fromkeys(path for *_, params in runs for path in params))
    by_uid = {uid: (index, seed, params) for uid, index, seed, params in runs}
    location = locate(store)
    engine = open_engine(location, write=False)
    r, e = schema.runs, schema.episodes
    rows: list[dict[str, Any]] = []
    try:
        with engine.connect() as conn:
            schema.check_schema(conn, location.describe())
            uids = list(by_uid)
            for start in range(0, len(uids), _CHUNK):
                query = (sa.select(r.c.uid, e.c.environment, e.c.copy, e.c.episode, e.c.steps,
                                   e.c.total_return, e.c.returns, e.c.terminated,
                                   e.c.truncated, e.c.seed)
                         .join(r, r.c.id == e.c.run_id)
                         .where(r.c.uid.in_(uids[start:start + _CHUNK]))
                         .order_by(r.c.id, e.c.environment, e.c.copy, e.c.episode))
                for row in conn.execute(query):
                    index, seed, params = by_uid[row.uid]
                    rows.append({
                        "run": row.uid, "run_index": index, "seed": seed,
                        **{path: params.get(path) for path in paths},
                        "environment": row.environment, "copy": row.copy,
                        "episode": row.episode, "steps": row.steps,
                        "total_return": row.total_return, "returns": dict(row.returns or {}),
                        "terminated": bool(row.terminated), "truncated": bool(row.truncated),
                        "episode_seed": row.seed,
                    })
    except sa.exc.SQLAlchemyError as error:
        raise StoreError(f"reading store {location.describe()} failed: {error}") from error
    finally:
        engine.dispose()
    columns = [*COLUMNS[:3], *paths, *COLUMNS[3:]]
    return pandas.DataFrame(rows, columns=columns)
