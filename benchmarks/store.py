"""How fast the store writer takes CartPole-like step rows, against a loop that stores nothing.

Run: ``python benchmarks/store.py [--rows N] [--batch N] [--repeat N]``

Each scenario builds the same rows (float32 observation of shape (4,), int action) in a plain
loop; the baseline drops them, the others hand them to a :class:`StoreWriter` on a SQLite file
in a temporary directory:

- ``hot loop``: rows per second the producing loop manages while the writer thread runs beside
  it (what a simulation would feel), and the same loop handing each row over on its own;
- ``end to end``: rows per second from the first row to the flush that commits the last;
- ``writer alone``: rows enqueued up front, then the time until they are committed.

Observations are encoded with ``mosaic.messages.codec.pack`` when it is importable, otherwise
with a msgpack stand-in of the same shape (the output says which).
"""

from __future__ import annotations

import argparse
import os
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


def _open(directory: Path, name: str, encode: Callable[[Any], bytes]) -> tuple[StoreWriter, int]:
    writer = StoreWriter(directory / f"{name}.db", encode=encode)
    writer.start()
    experiment = writer.experiment_started("bench", None, {})
    run = writer.run_started(experiment, f"bench-{name}", 0, 0)
    return writer, run


def _fix_run(rows: list[tuple[Any, ...]], run: int) -> list[tuple[Any, ...]]:
    return rows if run == 1 else [(run, *row[1:]) for row in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=1000, help="rows handed over per call")
    parser.add_argument("--repeat", type=int, default=3, help="median of this many runs")
    args = parser.parse_args()
    encode, encoder_name = _encoder()
    n = args.rows
    results: dict[str, list[float]] = {}

    def note(name: str, rate: float) -> None:
        results.setdefault(name, []).append(rate)

    with tempfile.TemporaryDirectory(prefix="mosaic-store-bench-") as tmp:
        directory = Path(tmp)
        for rep in range(args.repeat):
            note("baseline", n / _produce(n, args.batch, lambda rows: None))

            writer, run = _open(directory, f"hot{rep}", encode)
            if run != 1:  # rows are built with run id 1, the first run of a fresh file
                raise SystemExit(f"expected run id 1 in a fresh store, got {run}")
            start = time.perf_counter()
            produced = _produce(n, args.batch, writer.record_steps)
            if not writer.flush(120):
                raise SystemExit("flush timed out")
            total = time.perf_counter() - start
            writer.close()
            note("hot", n / produced)
            note("e2e", n / total)
            size = (directory / f"hot{rep}.db").stat().st_size

            writer, run = _open(directory, f"single{rep}", encode)  # run id 1 again
            produced = _produce(n, 1, writer.record_steps)
            if not writer.flush(120):
                raise SystemExit("flush timed out")
            writer.close()
            note("single", n / produced)

            prebuilt: list[list[tuple[Any, ...]]] = []
            _produce(n, args.batch, prebuilt.append)
            writer, run = _open(directory, f"alone{rep}", encode)
            start = time.perf_counter()
            for rows in prebuilt:
                writer.record_steps(_fix_run(rows, run))
            if not writer.flush(120):
                raise SystemExit("flush timed out")
            note("alone", n / (time.perf_counter() - start))
            writer.close()

    med = {name: statistics.median(rates) for name, rates in results.items()}
    base = med["baseline"]
    print(
        f"store writer benchmark: {n} CartPole-like rows, handed over {args.batch} at a time,"
        f" median of {args.repeat}; SQLite; encoder: {encoder_name};"
        f" python {sys.version.split()[0]}, {os.cpu_count()} cpus"
    )
    print(f"  baseline loop (rows built, not stored) {base:12,.0f} rows/s")
    for key, label in [
        ("hot", f"hot loop, writer running ({args.batch}/call)"),
        ("single", "hot loop, writer running (1/call)"),
        ("e2e", "end to end, until committed"),
        ("alone", "writer alone, until committed"),
    ]:
        rate = med[key]
        print(
            f"  {label:38s} {rate:12,.0f} rows/s   {base / rate:5.2f}x baseline time"
            f"   ({1e6 / rate - 1e6 / base:+.2f} us/row)"
        )
    print(
        f"  database size {size / n:.0f} bytes/row; target >= 50,000 rows/s end to end: "
        f"{'met' if med['e2e'] >= 50_000 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
