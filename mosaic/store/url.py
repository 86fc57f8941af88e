"""Where a store lives: a SQLite file path or a SQLAlchemy URL, and how to connect to it.

A plain path (``results/mosaic.db``) means a SQLite file. Anything that looks like
``dialect[+driver]://...`` is taken as a SQLAlchemy URL (``postgresql://user@host/db``,
``sqlite:///results/mosaic.db``), checked by :func:`mosaic.core.store_url.parse_database_url`:
PostgreSQL (with psycopg unless the URL names another driver) or SQLite.

SQLite connections get a WAL journal, ``synchronous=NORMAL`` and foreign keys. Every transaction
starts with an explicit ``BEGIN`` (``BEGIN IMMEDIATE`` for the writer) instead of the driver's
implicit one, so that a transaction is really one unit and several writer processes queue on the
write lock instead of failing on a lock upgrade.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from mosaic.core.errors import StoreError
from mosaic.core.store_url import driver_missing, is_database_url, mask, parse_database_url, scrub

__all__ = ["StoreLocation", "describe_error", "locate", "open_engine"]

# How long a SQLite connection waits for another process's write lock before failing.
SQLITE_BUSY_TIMEOUT = 30.0


@dataclass(frozen=True)
class StoreLocation:
    """A resolved store location.

    ``url`` is what SQLAlchemy connects to; ``path`` is the SQLite file, or None for another
    database or an in-memory SQLite database.
    """

    url: sa.URL
    path: Path | None

    @property
    def is_sqlite(self) -> bool:
        """True for a SQLite database (file or in-memory)."""
        return self.url.get_backend_name() == "sqlite"

    def describe(self) -> str:
        """The location for messages, with any password hidden."""
        if self.path is not None:
            return str(self.path)
        return mask(self.url)


def locate(url_or_path: str | Path | sa.URL) -> StoreLocation:
    """Resolve a path or URL without touching the file system.

    Raises StoreError if a URL cannot be parsed, names a database other than PostgreSQL or
    SQLite, or needs a driver that is not installed (see
    :func:`~mosaic.core.store_url.parse_database_url`).
    """
    if isinstance(url_or_path, Path) or (
        isinstance(url_or_path, str) and not is_database_url(url_or_path)
    ):
        file = Path(url_or_path).expanduser().absolute()
        return StoreLocation(sa.URL.create("sqlite", database=str(file)), file)
    url = parse_database_url(
        url_or_path if isinstance(url_or_path, str)
        else url_or_path.render_as_string(hide_password=False)
    )
    path: Path | None = None
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        if url.database.startswith("file:"):
            raise StoreError(
                f"SQLite URI file names are not supported here: {url.database!r}; "
                "give a plain path instead"
            )
        path = Path(url.database).expanduser().absolute()
        url = url.set(database=str(path))
    return StoreLocation(url, path)


def open_engine(location: StoreLocation, *, write: bool) -> sa.Engine:
    """Create an engine for ``location``.

    With ``write=False`` a SQLite file is opened read-only and never created; StoreError if it is
    missing or is not a file. With ``write=True`` the parent directories of a SQLite file are
    created; StoreError if the path is a directory or a parent cannot be created. No connection
    is made here, so a database server that is down is reported by the first use.
    """
    if not location.is_sqlite:
        try:
            return sa.create_engine(location.url, pool_pre_ping=True)
        except ImportError as exc:  # a driver found on the path that cannot load (no libpq)
            raise driver_missing(location.url, exc) from None
        except Exception as exc:
            message = scrub(str(exc), location.url)
            raise StoreError(f"cannot open store {location.describe()}: {message}") from None
    path = location.path
    if path is not None:
        _check_sqlite_path(path, write=write)
    begin = "BEGIN IMMEDIATE" if write else "BEGIN"

    def connect() -> sqlite3.Connection:
        if path is None:
            target, uri = ":memory:", False
        elif write:
            target, uri = str(path), False
        else:
            target, uri = path.as_uri() + "?mode=ro", True
        # isolation_level=None: the driver never opens transactions by itself; ``begin`` does.
        return sqlite3.connect(
            target,
            uri=uri,
            timeout=SQLITE_BUSY_TIMEOUT,
            isolation_level=None,
            check_same_thread=False,
        )

    engine = sa.create_engine(location.url, creator=connect)

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            if write:
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
        finally:
            cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(connection: sa.Connection) -> None:
        connection.exec_driver_sql(begin)

    return engine


def describe_error(exc: BaseException, url: sa.URL) -> str:
    """``exc`` in one line, with the password of ``url`` hidden.

    A database error is shown as the driver's own message: SQLAlchemy's text repeats the SQL and
    its parameters, and adds a line of background.
    """
    if isinstance(exc, sa.exc.DBAPIError) and exc.orig is not None:
        text = f"{type(exc.orig).__name__}: {exc.orig}"
    elif isinstance(exc, StoreError):
        text = str(exc)
    else:
        text = f"{type(exc).__name__}: {exc}"
    return scrub(" ".join(text.split()), url)


def _check_sqlite_path(path: Path, *, write: bool) -> None:
    if path.is_dir():
        raise StoreError(
            f"store path {path} is a directory; give a database file inside it, "
            f"for example {path / 'mosaic.db'}"
        )
    if write:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the directory for store {path}: {exc}") from exc
    elif not path.is_file():
        raise StoreError(f"no store at {path}: the file does not exist")
