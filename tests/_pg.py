"""The PostgreSQL server the Postgres tests use, and a table of their own in it.

``AGTOOL_TEST_POSTGRES`` names the server (``.ci/run`` starts one and sets
it). Without it the Postgres cases skip, saying how to enable them; in CI
(``CI=true``) they fail instead, so a CI run never passes without them.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

ENV = "AGTOOL_TEST_POSTGRES"
HOW = (f"set {ENV}=postgresql://user@127.0.0.1:PORT/db, or install Debian's postgresql "
       "and the test session starts one")

#: How a skip for want of a server begins (conftest folds those skips into one line).
NO_SERVER = "no PostgreSQL server for the tests"


def postgres_url() -> str:
    """The test server's url; skips the test (fails it in CI) when there is none."""
    url = os.environ.get(ENV, "")
    problem = "" if url else f"{NO_SERVER}: {HOW}"
    if not problem:
        try:
            import psycopg  # noqa: F401  # the store imports it lazily; say so here first
        except ImportError:
            problem = "psycopg is not installed: pip install -e '.[postgres]'"
    if problem:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"{problem} (CI must run the Postgres tests)")
        pytest.skip(problem)
    return url


def new_table() -> str:
    """A table name no other test (or xdist worker) uses."""
    return f"t_{uuid.uuid4().hex[:20]}"


def drop_table(url: str, table: str) -> None:
    """Drop a store's tables (the writes, the used tokens and the marks)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as db:
        db.execute(sql.SQL("DROP TABLE IF EXISTS {}, {}, {}").format(
            sql.Identifier(table), sql.Identifier(f"{table}_tokens"),
            sql.Identifier(f"{table}_marks")))


@contextlib.contextmanager
def own_table(url: str) -> Iterator[str]:
    """A fresh table name, dropped afterwards."""
    table = new_table()
    try:
        yield table
    finally:
        drop_table(url, table)


@contextlib.contextmanager
def postgres_store(url: str, **options: Any) -> Iterator[Any]:
    """A ``PostgresStore`` on a table of its own, closed and dropped afterwards."""
    from agtool._store.postgres import PostgresStore

    with own_table(url) as table:
        store = PostgresStore(url, table=table, **options)
        try:
            yield store
        finally:
            store.close()
