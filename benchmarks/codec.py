"""Codec cost of one per-step message, against plain msgpack measured in the same run.

Run: ``python benchmarks/codec.py``. Prints microseconds per encode and per decode of an
``EnvironmentUpdateResponse`` (one float64 observation of shape (4,), one reward, one acting
slot), and the same for ``msgpack.packb`` / ``msgpack.unpackb`` of an equivalent plain dict with
the observation as ``.tolist()``, which keeps no types (tuples, dtypes, arrays) and validates
nothing. Takes a few seconds. Times are CPU time of this process (``time.process_time``), best
of several repeats, so that other processes competing for the cores do not inflate them.
"""

from __future__ import annotations

import time
import timeit
from collections.abc import Callable
from typing import Any

import msgpack  # type: ignore[import-untyped]
import numpy as np

from mosaic.messages import EnvironmentUpdateResponse, decode_message, encode_message

REPEATS = 7
TARGET_SECONDS = 0.05  # CPU time per repeat


def best_microseconds(call: Callable[[], Any]) -> float:
    """Best CPU time of one call over REPEATS repeats of a batch, in microseconds."""
    timer = timeit.Timer(call, timer=time.process_time)
    calibration = 1000
    seconds = max(timer.timeit(calibration), 1e-6)
    number = max(1, int(calibration * TARGET_SECONDS / seconds))
    return min(timer.repeat(number=number, repeat=REPEATS)) / number * 1e6


def main() -> None:
    observation = np.array([0.01, -0.2, 0.03, 0.4])
    message = EnvironmentUpdateResponse(
        observations={"agent_0": observation},
        rewards={"agent_0": 1.0},
        terminated=False,
        truncated=False,
        acting=("agent_0",),
        legal_actions={},
    )
    frame = encode_message(message, 12345)
    plain = [
        1,
        12345,
        "EnvironmentUpdateResponse",
        {
            "observations": {"agent_0": observation.tolist()},
            "rewards": {"agent_0": 1.0},
            "terminated": False,
            "truncated": False,
            "acting": ["agent_0"],
            "legal_actions": {},
        },
    ]
    plain_frame = msgpack.packb(plain)

    rows = [
        (
            "encode",
            best_microseconds(lambda: encode_message(message, 12345)),
            best_microseconds(lambda: msgpack.packb(plain)),
        ),
        (
            "decode",
            best_microseconds(lambda: decode_message(frame)),
            best_microseconds(lambda: msgpack.unpackb(plain_frame)),
        ),
    ]
    total_mosaic = sum(row[1] for row in rows)
    total_plain = sum(row[2] for row in rows)
    rows.append(("total", total_mosaic, total_plain))

    print(f"EnvironmentUpdateResponse: {len(frame)} bytes (plain msgpack: {len(plain_frame)})")
    print(f"{'':8}{'mosaic µs':>12}{'msgpack µs':>12}{'ratio':>8}")
    for name, ours, baseline in rows:
        print(f"{name:8}{ours:12.2f}{baseline:12.2f}{ours / baseline:8.2f}")


if __name__ == "__main__":
    main()
