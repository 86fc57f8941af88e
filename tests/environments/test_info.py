"""What mosaic keeps of an environment's info, for one environment and for copies; and wrappers
built from the file's names, in order."""

from __future__ import annotations

import enum
import functools
import logging

import gymnasium
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from mosaic.core.vector_info import info_row, stack_infos
from mosaic.environments.factory import WrapperError, make_any, make_environment
from mosaic.environments.info import MAX_ELEMENTS, MAX_TEXT, InfoFilter
from mosaic.environments.vector import VectorAdapter
from mosaic.messages import WrapperPlan, pack, unpack


class Colour(enum.IntEnum):
    RED = 1


def test_what_the_codec_carries_is_kept_exactly_and_the_rest_dropped_with_one_warning(caplog):
    info = {
        "is_success": True, "count": 3, "prob": 0.25, "name": "lake", "raw": b"\x00",
        "none": None, "scalar": np.float32(0.5), "flag": np.bool_(False),
        "small": np.arange(6).reshape(2, 3), "nested": {"a": [1, (2.0, "x")]},
        "colour": Colour.RED, "text": np.str_("t"),
        # Dropped: an object, an image over the size limit, a huge int, text too long, an
        # object array, a dict with a non-str key, a non-str key itself.
        "object": object(), "frame": np.zeros(MAX_ELEMENTS + 1), "huge": 2**70,
        "long": "x" * (MAX_TEXT + 1), "objects": np.array([object()]), "odd": {1: 2}, 5: "five",
    }
    caplog.set_level(logging.WARNING, "mosaic.environments.info")
    filtered = InfoFilter("lake")
    kept = filtered.single(info)
    assert set(kept) == {"is_success", "count", "prob", "name", "raw", "none", "scalar", "flag",
                         "small", "nested", "colour", "text"}
    assert type(kept["colour"]) is int and type(kept["text"]) is str
    again = unpack(pack(kept))
    assert type(again["scalar"]) is np.float32 and again["nested"] == {"a": [1, (2.0, "x")]}
    np.testing.assert_array_equal(again["small"], info["small"])
    dropped = [r.getMessage() for r in caplog.records]
    assert len(dropped) == 7 and all("environment 'lake'" in line for line in dropped)
    assert any("'frame' dropped: an array of 1025 elements" in line for line in dropped)
    filtered.single(info)
    assert len(caplog.records) == 7  # once per key and environment


def test_empty_and_odd_infos():
    filtered = InfoFilter("env")
    assert filtered.single({}) == {} and filtered.single(None) == {}
    assert filtered.single(["not", "a", "dict"]) == {}
    deep: dict = {}
    inner = deep
    for _ in range(12):
        inner["d"] = {}
        inner = inner["d"]
    assert filtered.single({"deep": deep, "ok": 1}) == {"ok": 1}


def test_vector_infos_keep_gymnasium_layout_and_read_back_per_copy():
    filtered = InfoFilter("env")
    rows = [{"prob": 1, "name": "a", "sub": {"x": 1.5}}, {"prob": 0.5}, {}]
    info = stack_infos(rows)
    assert info["prob"].dtype == np.float64  # 1 and 0.5 share float64, not int
    kept = filtered.vector({**info, "bad": np.array([object(), None, None])}, 3)
    assert "bad" not in kept and "_bad" not in kept
    assert [info_row(kept, copy) for copy in range(3)] == [
        {"prob": 1.0, "name": "a", "sub": {"x": 1.5}}, {"prob": 0.5}, {}]


def test_copies_get_the_info_of_their_reset_and_of_their_last_step():
    env = SyncVectorEnv([functools.partial(gymnasium.make, "FrozenLake-v1")] * 3,
                        autoreset_mode=AutoresetMode.DISABLED)
    adapter = VectorAdapter(env)
    try:
        first = adapter.reset(np.arange(3, dtype=np.uint64))
        assert [info_row(first.info, c) for c in range(3)] == [{"prob": 1}] * 3
        seeds = np.arange(10, 13, dtype=np.uint64)
        for _ in range(200):
            outcome = adapter.step(np.zeros(3, dtype=np.int64), seeds)
            if outcome.starts.any():
                break
        ended = outcome.starts.nonzero()[0].tolist()
        assert ended and set(outcome.final_info) == set(ended)
        for copy in range(3):
            now = info_row(outcome.info, copy)["prob"]
            assert now == pytest.approx(1.0 if copy in ended else 1 / 3)
        assert all(final == {"prob": pytest.approx(1 / 3)}
                   for final in outcome.final_info.values())
    finally:
        adapter.close()


def test_wrappers_wrap_in_order_the_first_innermost():
    wrappers = (WrapperPlan("gymnasium.wrappers:TimeLimit", {"max_episode_steps": 3}),
                WrapperPlan("gymnasium.wrappers:ClipReward", {"min_reward": 0.0,
                                                              "max_reward": 0.5}))
    adapter = make_environment("gymnasium:CartPole-v1", {}, wrappers)
    try:
        outer = adapter.env
        assert isinstance(outer, gymnasium.wrappers.ClipReward)
        assert isinstance(outer.env, gymnasium.wrappers.TimeLimit)
        adapter.reset(1)
        outcomes = [adapter.step({"agent_0": 0}) for _ in range(3)]
        assert [o.rewards["agent_0"] for o in outcomes] == [0.5] * 3
        assert outcomes[-1].truncated
    finally:
        adapter.close()


def test_a_wrapper_that_fails_is_named_by_its_index():
    wrappers = (WrapperPlan("gymnasium.wrappers:TimeLimit", {"max_episode_steps": "ten"}),)
    with pytest.raises(WrapperError, match=r"wrappers\[0\] \(gymnasium.wrappers:TimeLimit\)"):
        make_any("gymnasium:CartPole-v1", {}, copies=2, wrappers=wrappers)
