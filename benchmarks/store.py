"""How fast the store writer takes CartPole-like step rows, against the plain database driver.

Run: ``python benchmarks/store.py [--rows N] [--batch N] [--repeat N] [--postgres]``

Each scenario builds the same rows (float32 observation of shape (4,), int action) in a plain
loop; the baseline loop drops them, the others hand them to a :class:`StoreWriter` on a SQLite
file in a temporary directory:

- ``hot loop``: rows per second the producing loop manages while the writer thread runs beside
  it (what a simulation would feel), and the same loop handing each row over on its own;
- ``end to end``: rows per second from the first row to the flush that commits the last;
- ``writer alone``: rows built up front, then the time from the first ``record_steps`` until
  they are committed.

The plain driver is measured in the same run with the same rows, on a store file made by the
writer (same tables, index and pragmas): observation and action encoded with the same codec,
then one ``sqlite3`` ``executemany`` in one transaction. Its ``end to end`` builds the rows in
the same loop first; its ``rows given`` starts from the built rows, as ``writer alone`` does.
The ratios printed are writer rate / plain rate (the target is at least 0.8). For reference,
``rows pre-encoded`` times the ``executemany`` alone, the rows encoded before the clock starts:
the database's own share, which no writer that encodes can reach.

With ``--postgres`` the same is measured on a PostgreSQL server the benchmark starts
(``tests/e2e/postgres_server.py``: initdb in a temporary folder, fsync off), the plain driver
being psycopg's binary ``COPY steps ... FROM STDIN`` of the same rows in one transaction, a
fresh database per scenario. Without the server's programs it says so and measures SQLite only.

Observations are encoded with ``mosaic.messages.codec.pack`` when it is importable, otherwise
with a msgpack stand-in of the same shape (the output says which).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import numpy as np

from mosaic.store import StoreWriter
from mosaic.store.schema import STEP_COLUMNS


def _stand_in_pack(obj: Any) -> bytes:
    def default(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return msgpack.ExtType(
                1, msgpack.packb([value.dtype.str, value.shape, value.tobytes()])
            )
        if isinstance(value, np.generic):
            return msgpack.ExtType(2, msgpack.packb([value.dtype.str, value.tobytes()]))
        raise TypeError(f"cannot pack {type(value).__name__}")

    packed: bytes = msgpack.packb(obj, default=default)
    return packed


def _encoder() -> tuple[Callable[[Any], bytes], str]:
    try:
        from mosaic.messages.codec import pack
    except ImportError:
        return _stand_in_pack, "msgpack stand-in (mosaic.messages.codec not importable)"
    return pack, "mosaic.messages.codec.pack"


def _produce(rows: int, batch: int, sink: Callable[[list[tuple[Any, ...]]], None]) -> float:
    """Build ``rows`` CartPole-like rows, handing them to ``sink`` every ``batch``; seconds."""
    base = np.array([0.01, -0.02, 0.03, 0.04], dtype=np.float32)
    pending: list[tuple[Any, ...]] = []
    append = pending.append
    episode = step = 0
    start = time.perf_counter()
    for i in range(rows):
        observation = base * np.float32(step)  # a new array each step, as env.step returns
        done = step == 199
        append(
            (
                1,
                "CartPole-v1",
                episode,
                step,
                "agent",
                "agent_0",
                observation,
                i & 1,
                1.0,
                done,
                False,
                0,  # the copy and the chosen info, as the step loop's rows have them
                None,
            )
        )
        step += 1
        if done:
            episode += 1
            step = 0
        if len(pending) >= batch:
            sink(pending)
            pending = []
            append = pending.append
    if pending:
        sink(pending)
    return time.perf_counter() - start


def _open(target: Path | str, encode: Callable[[Any], bytes]) -> tuple[StoreWriter, int]:
    writer = StoreWriter(target, encode=encode)
    writer.start()
    experiment = writer.experiment_started("bench", None, {})
    run = writer.run_started(experiment, "bench-run", 0, 0)
    if run != 1:  # rows are built with run id 1, the first run of a fresh store
        writer.close()
        raise SystemExit(f"expected run id 1 in a fresh store, got {run}")
    return writer, run


Batches = list[list[tuple[Any, ...]]]


def _built(rows: int, batch: int) -> Callable[[], Batches]:
    def build() -> Batches:
        batches: Batches = []
        _produce(rows, batch, batches.append)
        return batches

    return build


def _encoded(batches: Batches, encode: Callable[[Any], bytes]) -> list[tuple[Any, ...]]:
    """The rows as the plain driver stores them: observation and action encoded, copy 0."""
    return [(r[0], r[1], r[2], r[3], r[4], r[5], encode(r[6]), encode(r[7]), r[8], r[9], r[10],
             0, None) for rows in batches for r in rows]


def _writer_e2e(target: Path | str, n: int, batch: int, encode: Callable[[Any], bytes],
                ) -> tuple[float, float]:
    """Rows per second of the producing loop, and from its first row until committed."""
    writer, _ = _open(target, encode)
    try:
        start = time.perf_counter()
        produced = _produce(n, batch, writer.record_steps)
        if not writer.flush(300):
            raise SystemExit("flush timed out")
        total = time.perf_counter() - start
    finally:
        writer.close(60)
    return n / produced, n / total


def _writer_alone(target: Path | str, n: int, batches: Batches,
                  encode: Callable[[Any], bytes]) -> float:
    writer, _ = _open(target, encode)
    try:
        start = time.perf_counter()
        for rows in batches:
            writer.record_steps(rows)
        if not writer.flush(300):
            raise SystemExit("flush timed out")
        took = time.perf_counter() - start
    finally:
        writer.close(60)
    return n / took


def _plain_sqlite(path: Path, n: int, build: Callable[[], Batches],
                  encode: Callable[[Any], bytes], *, encoded: bool = False) -> float:
    """Rows per second of ``build`` + encode + one ``executemany`` in one transaction; with
    ``encoded``, of the ``executemany`` alone (the rows built and encoded before the clock)."""
    writer, _ = _open(path, encode)  # the same tables and index, and the run
    writer.close()
    columns = ", ".join(STEP_COLUMNS)
    sql = f"INSERT INTO steps ({columns}) VALUES ({', '.join('?' * len(STEP_COLUMNS))})"
    db = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON"):
            db.execute(f"PRAGMA {pragma}")
        params = _encoded(build(), encode) if encoded else []
        start = time.perf_counter()
        if not encoded:
            params = _encoded(build(), encode)
        db.execute("BEGIN IMMEDIATE")
        db.executemany(sql, params)
        db.execute("COMMIT")
        took = time.perf_counter() - start
    finally:
        db.close()
    return n / took


# The binary COPY types of the steps columns, in STEP_COLUMNS order.
_PG_TYPES = ["int4", "varchar", "int4", "int4", "varchar", "varchar", "bytea", "bytea", "float8",
             "bool", "bool", "int4", "bytea"]


def _plain_postgres(server: Any, n: int, build: Callable[[], Batches],
                    encode: Callable[[Any], bytes]) -> float:
    """Rows per second of ``build`` + encode + psycopg's binary COPY in one transaction."""
    import psycopg

    from tests.e2e.postgres_server import PASSWORD, USER

    database = server.create_database()
    writer, _ = _open(server.url(database), encode)
    writer.close()
    copy_sql = f"COPY steps ({', '.join(STEP_COLUMNS)}) FROM STDIN (FORMAT BINARY)"
    with psycopg.connect(host="127.0.0.1", port=server.port, user=USER, password=PASSWORD,
                         dbname=database) as conn:
        start = time.perf_counter()
        params = _encoded(build(), encode)
        with conn.cursor() as cursor, cursor.copy(copy_sql) as copy:
            copy.set_types(_PG_TYPES)
            for row in params:
                copy.write_row(row)
        conn.commit()
        return n / (time.perf_counter() - start)


def _line(label: str, rate: float, base: float, plain: float | None = None,
          plain_name: str = "") -> str:
    text = f"  {label:40s} {rate:12,.0f} rows/s"
    if plain is not None:
        text += f"   {rate / plain:5.2f}x {plain_name}"
    else:
        text += f"   {base / rate:5.2f}x baseline time   ({1e6 / rate - 1e6 / base:+.2f} us/row)"
    return text


def _sqlite(args: argparse.Namespace, encode: Callable[[Any], bytes]) -> tuple[dict[str, float],
                                                                              float]:
    n = args.rows
    results: dict[str, list[float]] = {}

    def note(name: str, rate: float) -> None:
        results.setdefault(name, []).append(rate)

    size = 0.0
    with tempfile.TemporaryDirectory(prefix="mosaic-store-bench-") as tmp:
        directory = Path(tmp)
        for rep in range(args.repeat):
            note("baseline", n / _produce(n, args.batch, lambda rows: None))

            hot, e2e = _writer_e2e(directory / f"hot{rep}.db", n, args.batch, encode)
            note("hot", hot)
            note("e2e", e2e)
            size = (directory / f"hot{rep}.db").stat().st_size / n

            writer, _ = _open(directory / f"single{rep}.db", encode)
            try:
                note("single", n / _produce(n, 1, writer.record_steps))
                if not writer.flush(300):
                    raise SystemExit("flush timed out")
            finally:
                writer.close(60)

            prebuilt = _built(n, args.batch)()
            note("alone", _writer_alone(directory / f"alone{rep}.db", n, prebuilt, encode))
            note("plain_e2e", _plain_sqlite(directory / f"plain{rep}.db", n,
                                            _built(n, args.batch), encode))
            note("plain_given", _plain_sqlite(directory / f"given{rep}.db", n,
                                              lambda given=prebuilt: given, encode))
            note("plain_encoded", _plain_sqlite(directory / f"encoded{rep}.db", n,
                                                lambda given=prebuilt: given, encode,
                                                encoded=True))
    return {name: statistics.median(rates) for name, rates in results.items()}, size


def _postgres(args: argparse.Namespace, encode: Callable[[Any], bytes]) -> dict[str, float] | str:
    """The PostgreSQL figures, or why there are none."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's tests/
    try:
        from tests.e2e import postgres_server
    except ImportError as error:
        return f"tests/e2e/postgres_server.py not importable ({error})"
    try:
        server = postgres_server.start()
    except postgres_server.ServerError as error:
        return f"no PostgreSQL server could be started: {error}"
    n = args.rows
    results: dict[str, list[float]] = {}
    try:
        for _ in range(args.repeat):
            _, e2e = _writer_e2e(server.url(server.create_database()), n, args.batch, encode)
            results.setdefault("e2e", []).append(e2e)
            prebuilt = _built(n, args.batch)()
            results.setdefault("alone", []).append(
                _writer_alone(server.url(server.create_database()), n, prebuilt, encode))
            results.setdefault("plain_e2e", []).append(
                _plain_postgres(server, n, _built(n, args.batch), encode))
            results.setdefault("plain_given", []).append(
                _plain_postgres(server, n, lambda given=prebuilt: given, encode))
    finally:
        postgres_server.stop(server)
    return {name: statistics.median(rates) for name, rates in results.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=1000, help="rows handed over per call")
    parser.add_argument("--repeat", type=int, default=3, help="median of this many runs")
    parser.add_argument("--postgres", action="store_true",
                        help="also measure PostgreSQL (starts a server of its own)")
    args = parser.parse_args()
    encode, encoder_name = _encoder()
    n = args.rows

    med, size = _sqlite(args, encode)
    base = med["baseline"]
    print(
        f"store writer benchmark: {n} CartPole-like rows, handed over {args.batch} at a time,"
        f" median of {args.repeat}; encoder: {encoder_name};"
        f" python {sys.version.split()[0]}, {os.cpu_count()} cpus"
    )
    print("SQLite (WAL, synchronous=NORMAL)")
    print(_line("baseline loop (rows built, not stored)", base, base))
    print(_line(f"hot loop, writer running ({args.batch}/call)", med["hot"], base))
    print(_line("hot loop, writer running (1/call)", med["single"], base))
    print(_line("plain executemany, end to end", med["plain_e2e"], base))
    print(_line("writer, end to end, until committed", med["e2e"], base, med["plain_e2e"],
                "plain"))
    print(_line("plain executemany, rows given", med["plain_given"], base))
    print(_line("writer alone, rows given", med["alone"], base, med["plain_given"], "plain"))
    print(_line("(plain executemany, rows pre-encoded)", med["plain_encoded"], base))
    print(f"  database size {size:.0f} bytes/row")
    ratios = {"SQLite": (med["e2e"] / med["plain_e2e"], med["alone"] / med["plain_given"])}

    if args.postgres:
        pg = _postgres(args, encode)
        if isinstance(pg, str):
            print(f"PostgreSQL: not measured: {pg}")
        else:
            print("PostgreSQL (the benchmark's own server, fsync off)")
            print(_line("plain COPY, end to end", pg["plain_e2e"], base))
            print(_line("writer, end to end, until committed", pg["e2e"], base,
                        pg["plain_e2e"], "plain"))
            print(_line("plain COPY, rows given", pg["plain_given"], base))
            print(_line("writer alone, rows given", pg["alone"], base, pg["plain_given"],
                        "plain"))
            ratios["PostgreSQL"] = (pg["e2e"] / pg["plain_e2e"],
                                    pg["alone"] / pg["plain_given"])
    else:
        print("PostgreSQL: not measured (pass --postgres)")
    for name, (e2e, alone) in ratios.items():
        verdict = "met" if min(e2e, alone) >= 0.8 else "NOT met"
        print(f"ratio {name}: writer/plain {e2e:.2f} end to end, {alone:.2f} rows given;"
              f" target >= 0.8: {verdict}")


if __name__ == "__main__":
    main()
