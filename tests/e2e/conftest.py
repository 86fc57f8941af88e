"""Fixtures of the end-to-end tests: a PostgreSQL server of their own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e import postgres_server
from tests.e2e.postgres_server import Server, ServerError


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """A PostgreSQL server for the module's tests (see :mod:`tests.e2e.postgres_server`); one
    that cannot be started fails them with the reason, it never skips them."""
    try:
        started = postgres_server.start()
    except ServerError as error:
        pytest.fail(f"cannot start a PostgreSQL server for the tests: {error}", pytrace=False)
    try:
        yield started
    finally:
        postgres_server.stop(started)


@pytest.fixture
def database(server: Server) -> str:
    """A new, empty database on the test server."""
    return server.create_database()
