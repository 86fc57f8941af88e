"""The snapshot pool of a self-play muscle: when snapshots are due, which it keeps, and how
its sampling rules draw, reproducibly from the seed."""

from __future__ import annotations

from collections import Counter

import pytest

from mosaic.actors.snapshots import SnapshotPool
from mosaic.messages import SelfPlayPlan


def filled(sample: str, seed: int = 0, latest_share: float = 0.5) -> SnapshotPool:
    pool = SnapshotPool(SelfPlayPlan("learner", 10, 3, sample, latest_share), seed)
    for episode in range(50):
        if pool.due(episode):
            pool.add(episode, {"weights": episode})
    return pool


def test_a_snapshot_is_due_every_n_episodes_from_the_first_and_the_pool_keeps_the_last() -> None:
    pool = SnapshotPool(SelfPlayPlan("learner", 10, 3), 0)
    taken = []
    for episode in range(45):
        if pool.due(episode):
            pool.add(episode, episode)
            taken.append(episode)
    assert taken == [0, 10, 20, 30, 40]
    assert len(pool) == 3
    assert {pool.draw()[0] for _ in range(200)} == {20, 30, 40}


def test_latest_always_plays_the_newest_snapshot() -> None:
    pool = filled("latest")
    assert [pool.draw() for _ in range(20)] == [(40, {"weights": 40})] * 20


def test_uniform_and_mix_draw_as_their_rule_says() -> None:
    pool = filled("uniform")
    uniform = Counter(pool.draw()[0] for _ in range(3000))
    assert set(uniform) == {20, 30, 40}
    assert all(900 < count < 1100 for count in uniform.values()), uniform
    pool = filled("mix", latest_share=0.7)
    mix = Counter(pool.draw()[0] for _ in range(3000))
    # The latest: 0.7 + 0.3 / 3 = 0.8 of the draws.
    assert 2300 < mix[40] < 2500 and set(mix) == {20, 30, 40}, mix


def test_draws_depend_on_the_seed_alone() -> None:
    def draws(seed: int) -> list[int]:
        pool = filled("uniform", seed)
        return [pool.draw()[0] for _ in range(30)]

    assert draws(1) == draws(1)
    assert draws(1) != draws(2)


def test_an_empty_pool_has_nothing_to_draw() -> None:
    with pytest.raises(LookupError):
        SnapshotPool(SelfPlayPlan("learner", 10, 3), 0).draw()
