"""Gymnasium environments made by id in one place: an experiment's, a worker's, a replay's."""

from __future__ import annotations

import gymnasium
import pytest

from mosaic.core.errors import MosaicError
from mosaic.environments.factory import make_environment
from mosaic.environments.gymnasium_make import declared_render_modes, make_gymnasium
from mosaic.operators.worker.runtime import make_env

pytestmark = pytest.mark.timeout(30)


def test_params_and_the_render_mode_reach_the_environment() -> None:
    env = make_gymnasium("FrozenLake-v1", {"is_slippery": False}, "ansi")
    try:
        assert env.render_mode == "ansi"
        assert env.spec is not None and env.spec.kwargs["is_slippery"] is False
    finally:
        env.close()


def test_params_that_ask_for_another_render_mode_are_refused() -> None:
    with pytest.raises(MosaicError, match=r"'FrozenLake-v1' must render in 'ansi' here, and its "
                                          r"keyword arguments set render_mode='rgb_array'"):
        make_gymnasium("FrozenLake-v1", {"render_mode": "rgb_array"}, "ansi")
    make_gymnasium("FrozenLake-v1", {"render_mode": "ansi"}, "ansi").close()  # the same: fine


def test_an_unknown_id_and_a_bad_keyword_keep_gymnasium_s_own_errors() -> None:
    with pytest.raises(gymnasium.error.NameNotFound, match="Did you mean: `CartPole`"):
        make_gymnasium("CartPoel-v1")
    with pytest.raises(TypeError, match="unexpected keyword argument 'is_slipery'"):
        make_gymnasium("FrozenLake-v1", {"is_slipery": False})


def test_the_declared_render_modes_are_the_environment_s_metadata() -> None:
    assert declared_render_modes("FrozenLake-v1") == ["human", "ansi", "rgb_array"]
    with pytest.raises(gymnasium.error.NameNotFound):
        declared_render_modes("CartPoel-v1")


def test_an_experiment_and_a_worker_make_the_same_environment() -> None:
    adapter = make_environment("gymnasium:FrozenLake-v1", {"is_slippery": False})
    worker_env = make_env("FrozenLake-v1", {"is_slippery": False}, render_every=1)
    try:
        made = adapter.env  # type: ignore[attr-defined]
        assert made.spec.id == worker_env.spec.id == "FrozenLake-v1"
        assert made.spec.kwargs == {"is_slippery": False, "map_name": "4x4"}
        assert worker_env.spec.kwargs == {**made.spec.kwargs, "render_mode": "rgb_array"}
    finally:
        adapter.close()
        worker_env.close()


def test_a_worker_that_makes_its_environment_loads_no_pettingzoo() -> None:
    """An operator worker makes its environment here; the environments package's other names
    (PettingZoo's adapters, the vector environments) load only when used."""
    from tests.test_facade import heavy_modules_after

    made = ("from mosaic.operators.worker.runtime import make_env\n"
            "make_env('CartPole-v1').close()")
    assert heavy_modules_after(made, ("gymnasium", "pettingzoo")) == ["gymnasium"]
