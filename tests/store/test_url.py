"""locate / open_engine: a PostgreSQL URL gets psycopg, a driver that cannot load is one clear
StoreError naming the extra, and no message holds the URL's password."""

from __future__ import annotations

import sys

import pytest
import sqlalchemy as sa

from mosaic.core.errors import StoreError
from mosaic.store import StoreWriter, open_store
from mosaic.store.url import describe_error, locate, open_engine

pytestmark = pytest.mark.timeout(30)

URL = "postgresql://me:hunter2@127.0.0.1:1/results"


def test_a_postgresql_url_is_located_with_psycopg_and_described_masked() -> None:
    location = locate(URL)
    assert (location.path, location.is_sqlite) == (None, False)
    assert location.url.drivername == "postgresql+psycopg"
    assert location.url.password == "hunter2"
    assert location.describe() == "postgresql+psycopg://me:***@127.0.0.1:1/results"
    assert locate(sa.make_url(URL)).url.drivername == "postgresql+psycopg"


def test_a_driver_that_cannot_load_is_a_store_error_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    location = locate(URL)

    def no_driver(*args: object, **kwargs: object) -> sa.Engine:
        raise ImportError("no pq wrapper available")

    monkeypatch.setattr(sa, "create_engine", no_driver)
    with pytest.raises(StoreError) as caught:
        open_engine(location, write=True)
    assert str(caught.value) == (
        "postgresql+psycopg://me:***@127.0.0.1:1/results: the PostgreSQL driver psycopg is not "
        "installed (no pq wrapper available); pip install 'mosaic[postgres]'"
    )


def test_without_the_driver_writer_and_reader_refuse_the_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if it were not installed
    for open_it in (StoreWriter, open_store):
        with pytest.raises(StoreError, match=r"mosaic\[postgres\]") as caught:
            open_it(URL)
        assert "hunter2" not in str(caught.value)


def test_describe_error_is_one_line_without_the_password() -> None:
    url = sa.make_url(URL)
    error = sa.exc.OperationalError("SELECT 1", {}, Exception(
        'connection to server failed: FATAL:  password "hunter2" was refused\nDETAIL: none'))
    text = describe_error(error, url)
    assert text == ('Exception: connection to server failed: FATAL: password "***" was refused '
                    "DETAIL: none")
    assert describe_error(RuntimeError(f"cannot reach {URL}"), url) == (
        "RuntimeError: cannot reach postgresql://me:***@127.0.0.1:1/results")


def test_an_unreachable_server_fails_the_reader_and_the_writer_without_the_password() -> None:
    # Port 1 on loopback refuses at once: nothing listens there.
    with pytest.raises(StoreError) as caught:
        open_store(URL)
    assert str(caught.value).startswith(
        "cannot read store postgresql+psycopg://me:***@127.0.0.1:1/results: OperationalError: ")
    assert "hunter2" not in str(caught.value) and "\n" not in str(caught.value)
    writer = StoreWriter(URL)
    with pytest.raises(StoreError) as caught:
        writer.start(timeout=20)
    assert str(caught.value).startswith(
        "cannot open store postgresql+psycopg://me:***@127.0.0.1:1/results: OperationalError: ")
    assert "hunter2" not in str(caught.value)
