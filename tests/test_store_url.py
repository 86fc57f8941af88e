"""Store URLs: which are taken, the driver they get, and a password that is never shown."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from mosaic.core.errors import StoreError
from mosaic.core.store_url import (
    POSTGRES_EXTRA,
    driver_missing,
    is_database_url,
    mask,
    parse_database_url,
    scrub,
)

pytestmark = pytest.mark.timeout(30)

URL = "postgresql://me:hunter2@db.example:5433/results"


@pytest.mark.parametrize(("text", "expected"), [
    (URL, True), ("postgresql+psycopg://h/db", True), ("sqlite:///x.db", True),
    ("results.sqlite", False), ("/abs/path.db", False), ("C:/x.db", False), ("", False),
])
def test_a_url_is_told_from_a_path(text: str, expected: bool) -> None:
    assert is_database_url(text) is expected


def test_postgresql_without_a_driver_gets_psycopg() -> None:
    url = parse_database_url(URL)
    assert url.drivername == "postgresql+psycopg"
    assert (url.username, url.password, url.host, url.port, url.database) == (
        "me", "hunter2", "db.example", 5433, "results")
    assert parse_database_url("postgresql+psycopg://h/db").drivername == "postgresql+psycopg"


def test_a_sqlite_url_is_taken_as_it_is() -> None:
    assert parse_database_url("sqlite:///x.db").drivername == "sqlite"


@pytest.mark.parametrize(("text", "message"), [
    ("mysql://me:hunter2@h/db", "mysql://me:***@h/db: mosaic stores results in a SQLite file"),
    ("postgresql+asyncpg://me:hunter2@h/db", "unsupported PostgreSQL driver 'asyncpg'"),
    ("postgresql://me:hunter2@h:port/db", "not a valid database URL: "
                                          "'postgresql://me:***@h:port/db'"),
])
def test_an_unusable_url_is_refused_without_its_password(text: str, message: str) -> None:
    with pytest.raises(StoreError) as caught:
        parse_database_url(text)
    assert message in str(caught.value)
    assert "hunter2" not in str(caught.value)


def test_a_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if it were not installed
    with pytest.raises(StoreError) as caught:
        parse_database_url(URL)
    assert str(caught.value) == ("postgresql+psycopg://me:***@db.example:5433/results: the "
                                 "PostgreSQL driver psycopg is not installed; "
                                 f"{POSTGRES_EXTRA}")


def test_another_missing_driver_names_its_module_and_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg2", None)
    with pytest.raises(StoreError) as caught:
        parse_database_url("postgresql+psycopg2://me:hunter2@h/db")
    assert "the PostgreSQL driver psycopg2 is not installed; pip install psycopg2, or use " \
           f"postgresql:// with {POSTGRES_EXTRA}" in str(caught.value)


def test_an_import_error_says_why() -> None:
    error = driver_missing(sa.make_url("postgresql+psycopg://me:hunter2@h/db"),
                           ImportError("no pq wrapper available"))
    assert "psycopg is not installed (no pq wrapper available); " in str(error)
    assert "hunter2" not in str(error)


@pytest.mark.parametrize("store", [URL, sa.make_url(URL)])
def test_mask_hides_the_password(store: str | sa.URL) -> None:
    assert mask(store) == "postgresql://me:***@db.example:5433/results"


def test_mask_leaves_paths_and_urls_without_a_password_alone() -> None:
    assert mask(Path("/a/b.sqlite")) == "/a/b.sqlite"
    assert mask("results.sqlite") == "results.sqlite"
    assert mask("postgresql://me@h/db") == "postgresql://me@h/db"


def test_mask_hides_the_password_of_a_url_sqlalchemy_cannot_parse() -> None:
    assert mask("postgresql://me:hunter2@h:port/db") == "postgresql://me:***@h:port/db"


def test_scrub_removes_the_password_written_or_decoded() -> None:
    url = "postgresql://me:s%40cret@h/db"
    text = f"connect to {url} failed: bad password s@cret (s%40cret)"
    assert scrub(text, url) == "connect to postgresql://me:***@h/db failed: bad password *** (***)"
    assert scrub(text, sa.make_url(url)) == scrub(text, url)
