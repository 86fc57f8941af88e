"""Derived seeds: within 31 bits, apart from each other, and the same every time."""

from __future__ import annotations

import numpy as np

from mosaic.core.seeding import (
    DERIVED_SEED_LIMIT,
    brain_seed,
    copy_seed,
    environment_seed,
    episode_seed,
    evaluation_episode_seed,
    evaluation_seed,
    muscle_seed,
    phase_seed,
)


def _all_kinds(run_seed: int) -> list[int]:
    return [
        *(episode_seed(run_seed, 0, episode) for episode in range(200)),
        *(episode_seed(run_seed, 1, episode, copy) for episode in range(20) for copy in range(8)),
        *(environment_seed(run_seed, index) for index in range(8)),
        *(brain_seed(run_seed, index) for index in range(8)),
        *(muscle_seed(run_seed, agent, env) for agent in range(4) for env in range(4)),
        *(copy_seed(run_seed, copy) for copy in range(16)),
        *(evaluation_episode_seed(run_seed, 0, round_, ep) for round_ in range(4)
          for ep in range(5)),
        evaluation_seed(run_seed),
        phase_seed(run_seed, 1),
    ]


def test_every_derived_seed_fits_in_31_bits() -> None:
    # OpenSpiel's games (PettingZoo's hanabi) take a signed 32-bit seed, nothing larger.
    for run_seed in (0, 1, 42, 2**32 - 1, 2**63 - 1):
        seeds = _all_kinds(run_seed)
        assert all(0 <= seed < DERIVED_SEED_LIMIT == 2**31 for seed in seeds), run_seed
        assert len(set(seeds)) == len(seeds)


def test_the_31_bits_are_the_low_bits_of_numpy_seed_sequence() -> None:
    # Half of the 32-bit words have the high bit set; masking it is what keeps them in range.
    raw = [int(np.random.SeedSequence(42, spawn_key=(1, 0, episode)).generate_state(
        1, np.uint32)[0]) for episode in range(64)]
    assert any(word >= 2**31 for word in raw)
    assert [episode_seed(42, 0, episode) for episode in range(64)] == [
        word & (2**31 - 1) for word in raw]
