"""Large observations are stored zstd-compressed and read back exactly; older uncompressed rows
and small values read as they always did."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mosaic.core.errors import StoreError
from mosaic.messages.codec import pack
from mosaic.store import StoreWriter, open_store
from mosaic.store._values import COMPRESS_ABOVE, MARKER

pytestmark = pytest.mark.timeout(30)


def _image(seed: int = 0) -> np.ndarray:
    # A frame like a rendered game's: flat background, a few shapes, some noise in one corner.
    rng = np.random.default_rng(seed)
    frame = np.full((280, 480, 3), 40, dtype=np.uint8)
    frame[100:140, 20:30] = 255
    frame[:20, :20] = rng.integers(0, 256, (20, 20, 3), dtype=np.uint8)
    return frame


def _write(path: Path, writers: list[StoreWriter], observation: Any, action: Any,
           **kwargs: Any) -> None:
    writer = StoreWriter(path, **kwargs)
    writers.append(writer)
    writer.start()
    experiment = writer.experiment_started("exp", None, None)
    run = writer.run_started(experiment, "run-1", 0, 1)
    writer.record_steps([(run, "env", 0, 0, "agent", "p0", observation, action, 1.0, False,
                          False)])
    writer.close(timeout=5)


def _stored(path: Path) -> tuple[bytes, bytes]:
    with closing(sqlite3.connect(path)) as db:
        observation, action = db.execute("SELECT observation, action FROM steps").fetchone()
    return bytes(observation), bytes(action)


def test_an_image_observation_is_stored_compressed_and_reads_back_exactly(tmp_path, writers):
    path = tmp_path / "store.db"
    observation = {"paddle_0": _image(0), "paddle_1": _image(1)}
    action = np.int64(2)
    _write(path, writers, observation, action)

    stored_observation, stored_action = _stored(path)
    assert stored_observation.startswith(MARKER)
    assert len(stored_observation) < len(pack(observation)) / 10
    assert stored_action == pack(action)  # small: stored as the codec's bytes

    with open_store(path) as store:
        (record,) = list(store.steps("run-1"))
    assert record.observation.keys() == observation.keys()
    for key, frame in observation.items():
        got = record.observation[key]
        assert got.dtype == frame.dtype and got.shape == frame.shape
        np.testing.assert_array_equal(got, frame)
    assert record.action == action and type(record.action) is np.int64


def test_without_compression_the_codec_bytes_are_stored(tmp_path, writers):
    path = tmp_path / "store.db"
    observation = _image()
    _write(path, writers, observation, 0, compress_above=None)
    assert _stored(path)[0] == pack(observation)
    with open_store(path) as store:
        (record,) = list(store.steps("run-1"))
    np.testing.assert_array_equal(record.observation, observation)


def test_a_row_written_before_compression_still_reads(tmp_path, writers):
    # A store as mosaic wrote it before compression: the same tables, the codec's bytes as is.
    path = tmp_path / "store.db"
    _write(path, writers, 0, 0)
    old = np.arange(COMPRESS_ABOVE, dtype=np.float64).reshape(-1, 8)  # 32 KiB of codec bytes
    with closing(sqlite3.connect(path)) as db:
        db.execute("UPDATE steps SET observation = ?, action = ?", (pack(old), pack((1, "a"))))
        db.commit()
    with open_store(path) as store:
        (record,) = list(store.steps("run-1"))
    np.testing.assert_array_equal(record.observation, old)
    assert record.observation.dtype == np.float64
    assert record.action == (1, "a")


def test_a_value_that_does_not_shrink_is_stored_as_is(tmp_path, writers):
    path = tmp_path / "store.db"
    noise = np.random.default_rng(3).integers(0, 256, 64 * 1024, dtype=np.uint8)
    _write(path, writers, noise, 0)
    assert _stored(path)[0] == pack(noise)


def test_a_damaged_compressed_row_is_a_store_error(tmp_path, writers):
    path = tmp_path / "store.db"
    _write(path, writers, _image(), 0)
    with closing(sqlite3.connect(path)) as db:
        db.execute("UPDATE steps SET observation = ?", (MARKER + b"not a zstd frame",))
        db.commit()
    with open_store(path) as store, pytest.raises(StoreError, match="cannot decode step 0"):
        list(store.steps("run-1"))


def test_compress_above_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="compress_above"):
        StoreWriter(tmp_path / "store.db", compress_above=0)
