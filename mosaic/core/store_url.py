"""A database server as the results store: its URL, checked before use, and never shown whole.

A store is a SQLite file, given as a path, or a PostgreSQL database, given as a SQLAlchemy URL:
``postgresql://user:password@host:port/database`` or ``postgresql+psycopg://...``. A URL without
a driver means psycopg (version 3), which the ``postgres`` extra installs; SQLAlchemy alone would
pick psycopg2 for it. ``sqlite:///...`` URLs are parsed too, for the library's callers.

The password of a URL is never printed or logged: :func:`mask` hides it in whatever names a
store, and :func:`scrub` removes it from text that a driver wrote. SQLAlchemy is imported only
once a URL is in play, so that checking a file that names a SQLite store stays quick.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import TYPE_CHECKING

from mosaic.core.errors import StoreError

if TYPE_CHECKING:
    import sqlalchemy as sa

__all__ = [
    "POSTGRES_EXTRA",
    "driver_missing",
    "is_database_url",
    "mask",
    "parse_database_url",
    "scrub",
]

#: What installs mosaic's PostgreSQL driver.
POSTGRES_EXTRA = "pip install 'mosaic[postgres]'"

_URL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
# ``scheme://user:password@``: the password of a URL that SQLAlchemy cannot parse.
_USERINFO_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*://[^:/@]*:)[^@]*@")
# The PostgreSQL drivers SQLAlchemy offers for a synchronous engine, by the module each imports.
_POSTGRES_DRIVERS = {"psycopg": "psycopg", "psycopg2": "psycopg2", "pg8000": "pg8000"}
_DEFAULT_POSTGRES_DRIVER = "psycopg"
_HIDDEN = "***"


def is_database_url(text: str) -> bool:
    """True if ``text`` looks like ``dialect[+driver]://...`` rather than a file path."""
    return bool(_URL_RE.match(text))


def parse_database_url(text: str) -> sa.URL:
    """Parse the store URL ``text``, with the driver it will connect with.

    ``postgresql://`` gets psycopg. Raises :class:`~mosaic.core.errors.StoreError`, with the
    password hidden, for text that is not a URL, a database other than PostgreSQL or SQLite, a
    PostgreSQL driver SQLAlchemy has no synchronous dialect for, or a driver that is not
    installed (the message then names :data:`POSTGRES_EXTRA`). Nothing is connected to.
    """
    import sqlalchemy as sa

    try:
        url = sa.make_url(text)
    except Exception as exc:
        raise StoreError(f"not a valid database URL: {mask(text)!r} ({scrub(str(exc), text)})"
                         ) from None
    backend, driver = url.get_backend_name(), url.get_driver_name()
    if backend == "sqlite":
        return url
    if backend != "postgresql":
        raise StoreError(f"{mask(url)}: mosaic stores results in a SQLite file (give its path) "
                         f"or a PostgreSQL database (postgresql://...), not {backend}")
    if "+" not in url.drivername:
        url = url.set(drivername=f"postgresql+{_DEFAULT_POSTGRES_DRIVER}")
        driver = _DEFAULT_POSTGRES_DRIVER
    if driver not in _POSTGRES_DRIVERS:
        raise StoreError(f"{mask(url)}: unsupported PostgreSQL driver {driver!r}; use "
                         "postgresql:// (psycopg) or postgresql+psycopg://")
    if importlib.util.find_spec(_POSTGRES_DRIVERS[driver]) is None:
        raise driver_missing(url)
    return url


def driver_missing(url: sa.URL, error: ImportError | None = None) -> StoreError:
    """The error for a PostgreSQL URL whose driver cannot be imported (``error``, if known).

    One line, naming the store (password hidden) and what to install.
    """
    driver = url.get_driver_name()
    module = _POSTGRES_DRIVERS.get(driver, driver)
    why = f" ({error})" if error is not None and str(error) else ""
    if driver == _DEFAULT_POSTGRES_DRIVER:
        remedy = POSTGRES_EXTRA
    else:
        remedy = f"pip install {module}, or use postgresql:// with {POSTGRES_EXTRA}"
    return StoreError(f"{mask(url)}: the PostgreSQL driver {module} is not installed{why}; "
                      f"{remedy}")


def mask(store: str | Path | sa.URL) -> str:
    """``store`` as messages show it: a path as it is, a URL with its password as ``***``."""
    if isinstance(store, Path):
        return str(store)
    if isinstance(store, str) and not is_database_url(store):
        return store
    import sqlalchemy as sa

    if isinstance(store, sa.URL):
        return store.render_as_string(hide_password=True)
    try:
        return sa.make_url(store).render_as_string(hide_password=True)
    except Exception:
        return _USERINFO_RE.sub(rf"\g<1>{_HIDDEN}@", store)


def scrub(text: str, store: str | sa.URL) -> str:
    """``text`` (a driver's error, say) with the URL ``store`` in it masked, and its password
    replaced by ``***`` wherever else it appears, as written in the URL or decoded."""
    whole = store if isinstance(store, str) else store.render_as_string(hide_password=False)
    text = text.replace(whole, mask(store))
    for password in _passwords(store, whole):
        text = text.replace(password, _HIDDEN)
    return text


def _passwords(store: str | sa.URL, whole: str) -> set[str]:
    import sqlalchemy as sa

    found = set()
    written = _USERINFO_RE.match(whole)
    if written is not None:
        found.add(written.group(0)[len(written.group(1)):-1])
    url: sa.URL | None
    try:
        url = sa.make_url(store) if isinstance(store, str) else store
    except Exception:
        url = None
    if url is not None and url.password:
        found.add(str(url.password))
    return {password for password in found if password}
