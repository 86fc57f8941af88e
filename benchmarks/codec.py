"""Codec cost of one per-step message, against plain msgpack measured in the same run.

Run: ``python benchmarks/codec.py``. Prints microseconds per encode and per decode of an
``EnvironmentUpdateResponse`` (one float64 observation of shape (4,), one reward, one acting
slot), and the same for ``msgpack.packb`` / ``msgpack.unpackb`` of an equivalent plain dict with
the observation as ``.tolist()``, which keeps no types (tuples, dtypes, arrays) and validates
nothing.

Then the four messages of a step with the environment and the muscle in processes (the
environment's update request and answer, the muscle's), against the plain msgpack maps of the
raw loop of ``benchmarks/step_cost.py`` (arrays as raw bytes, dtype and shape): what the codec
costs of a step, per message and in all.

Takes a few seconds. Times are CPU time of this process (``time.process_time``), best of
several repeats, so that other processes competing for the cores do not inflate them.
"""

from __future__ import annotations

import time
import timeit
from collections.abc import Callable
from typing import Any

import msgpack  # type: ignore[import-untyped]
import numpy as np

from mosaic.messages import (
    AgentUpdateRequest,
    AgentUpdateResponse,
    EnvironmentUpdateRequest,
    EnvironmentUpdateResponse,
    Message,
    decode_message,
    encode_message,
)

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
    step_messages()


def _raw_array(array: Any) -> dict[str, Any]:
    return {"data": array.tobytes(), "dtype": array.dtype.str, "shape": list(array.shape)}


def step_messages() -> None:
    """Encode + decode of each message of a step in processes, against the raw loop's."""
    observation = np.array([0.01, -0.2, 0.03, 0.4], dtype=np.float32)
    action = np.int64(1)
    pairs: list[tuple[Message, Any]] = [
        (EnvironmentUpdateRequest({"agent_0": action}), {"action": 1}),
        (EnvironmentUpdateResponse({"agent_0": observation}, {"agent_0": 1.0}, False, False,
                                   ("agent_0",), {}, {}),
         {"observation": _raw_array(observation), "reward": 1.0, "terminated": False,
          "truncated": False}),
        (AgentUpdateRequest(3, {"agent_0": observation}, {"agent_0": 1.0}, False, False,
                            ("agent_0",), {}, {}),
         {"observation": _raw_array(observation)}),
        (AgentUpdateResponse({"agent_0": action}), {"action": 1}),
    ]
    print("\nthe four messages of a step in processes, encode + decode")
    print(f"{'':28}{'mosaic µs':>12}{'raw loop µs':>13}")
    totals = [0.0, 0.0]
    for message, raw in pairs:
        frame, raw_frame = encode_message(message, 7), msgpack.packb(raw)
        ours = (best_microseconds(lambda m=message: encode_message(m, 7))
                + best_microseconds(lambda f=frame: decode_message(f)))
        theirs = (best_microseconds(lambda r=raw: msgpack.packb(r))
                  + best_microseconds(lambda f=raw_frame: msgpack.unpackb(f)))
        totals[0] += ours
        totals[1] += theirs
        print(f"{type(message).__name__:<28}{ours:12.2f}{theirs:13.2f}")
    print(f"{'per step':<28}{totals[0]:12.2f}{totals[1]:13.2f}")


if __name__ == "__main__":
    main()
