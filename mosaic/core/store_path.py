"""Where a file's results store goes, checked before anything starts.

``mosaic experiment-start`` and ``mosaic evaluate`` both record their runs in a SQLite file or
a PostgreSQL database: ``--store`` when given, else the file's own setting (``store.url`` or
``store.path``), else ``<file stem>.sqlite`` next to the file. A path that cannot hold a SQLite
database, or a URL that cannot be used, is the file's error, named with the key that set it, so
that the command exits before it opens or starts anything.
"""

from __future__ import annotations

import os
from pathlib import Path

from mosaic.core.config_problems import describe_value
from mosaic.core.errors import ConfigError, StoreError
from mosaic.core.store_url import is_database_url, mask, parse_database_url

__all__ = ["resolve_store", "resolve_store_path"]

_SQLITE_HEADER = b"SQLite format 3\x00"
_HINT = "name a new file, e.g. results.sqlite, or the SQLite file of earlier runs"
_URL_HINT = "give postgresql://user:password@host:port/database, or a SQLite file's path"


def resolve_store(
    shown: str,
    source: Path,
    override: str | None,
    configured: str | None = None,
    configured_url: str | None = None,
    *,
    key: str = "store.path",
    line: int | None = None,
    url_line: int | None = None,
) -> Path | str:
    """The results store of the file ``source``: a SQLite file (an absolute ``Path``) or the
    URL of a database (a ``str``, as written, password included).

    ``override`` (``--store``) is a URL or a path, and wins; else ``configured_url`` (the
    file's ``store.url``, at ``url_line``); else the path ``configured`` (the key ``key``, at
    ``line``) or the default, as :func:`resolve_store_path` resolves them. A URL must name
    PostgreSQL with a driver that is installed (see
    :func:`~mosaic.core.store_url.parse_database_url`); nothing is connected to here. Raises
    :class:`~mosaic.core.errors.ConfigError` naming ``shown`` and ``--store`` or the key, with any
    password hidden.
    """
    if override is not None and is_database_url(override):
        return _checked_url(shown, override, "--store", None)
    if override is None and configured_url is not None:
        return _checked_url(shown, configured_url, "store.url", url_line)
    return resolve_store_path(shown, source, override, configured, key=key, line=line)


def _checked_url(shown: str, url: str, key: str, line: int | None) -> str:
    try:
        parsed = parse_database_url(url)
    except StoreError as error:
        raise ConfigError(shown, key, str(error), line=line) from None
    if parsed.get_backend_name() != "postgresql":
        raise ConfigError(shown, key, f"expected a PostgreSQL URL, got {mask(url)!r}", _URL_HINT,
                          line=line)
    return url


def resolve_store_path(
    shown: str,
    source: Path,
    override: str | None,
    configured: str | None = None,
    *,
    key: str = "store.path",
    line: int | None = None,
) -> Path:
    """The absolute results store of the file ``source`` (``shown`` as the user named it).

    ``override`` (``--store``) resolves against the current folder, as a command-line path
    does; ``configured`` (the file's own setting, written at ``line``) against the file's
    folder; without either, the store is ``<file stem>.sqlite`` next to the file. Raises
    :class:`~mosaic.core.errors.ConfigError` naming ``shown`` and ``--store`` for an override
    that is a URL or empty, and naming ``--store`` or ``key`` (the key that sets the store in the
    file) for a path that cannot be a SQLite file (a directory, a file of another kind, or a path
    under a file).
    """
    if override is not None:
        if "://" in override or not override.strip():
            raise ConfigError(shown, "--store",
                              f"expected a file path, got {describe_value(mask(override))}")
        store = Path(override).expanduser()
        store = store if store.is_absolute() else Path.cwd() / store
        key, line = "--store", None
    elif configured is not None:
        store = Path(configured).expanduser()
        store = store if store.is_absolute() else source.parent / store
    else:
        store = source.parent / f"{source.stem}.sqlite"
        line = None
    store = store.resolve()
    problem = _store_file_problem(store)
    if problem is not None:
        raise ConfigError(shown, key, f"the results store {store} {problem}", _HINT, line=line)
    return store


def _store_file_problem(store: Path) -> str | None:
    """Why the file path ``store`` cannot hold a SQLite database, or None if it can.

    A missing file (created later) or an empty one is fine; so is a SQLite file of earlier runs.
    """
    if os.path.isdir(store):
        return "is a directory, expected a file path"
    if os.path.exists(store):
        if not os.path.isfile(store):
            return "is not a regular file, expected a SQLite file"
        try:
            with open(store, "rb") as file:
                header = file.read(len(_SQLITE_HEADER))
        except OSError as error:
            return f"cannot be read: {error.strerror or error}"
        if header and header != _SQLITE_HEADER:
            return "exists and is not a SQLite database"
        return None
    parent = next(p for p in store.parents if os.path.exists(p))
    if not os.path.isdir(parent):
        return f"lies under {parent}, which is a file, not a folder"
    return None
