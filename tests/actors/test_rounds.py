"""Learning rounds: a brain learns from its rollout workers in their order, whatever order
their experience arrives in, and a worker that leaves no longer holds the others back."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from mosaic.actors.brain import BrainActor
from mosaic.actors.rounds import Rounds
from mosaic.agents import Brain, BrainContext
from mosaic.core.errors import MosaicError
from mosaic.messages import (
    BrainSetupRequest,
    BrainShutdownRequest,
    ComponentSpec,
    MuscleUpdateRequest,
)
from mosaic.runtime.component import Later, handle_hosted


def test_a_round_is_complete_once_every_member_has_sent_in_whatever_order() -> None:
    for order in itertools.permutations(["a", "b", "c"]):
        rounds = Rounds([("a", "b", "c")])
        completed = [rounds.offer(member, f"{member}-0", member) for member in order]
        assert completed[:2] == [[], []]
        assert completed[2] == [("a", "a-0", "a"), ("b", "b-0", "b"), ("c", "c-0", "c")]


def test_a_member_that_left_is_not_waited_for() -> None:
    rounds = Rounds([("a", "b")])
    assert rounds.offer("a", 1, "k1") == []
    assert rounds.leave("b") == [("a", 1, "k1")]  # its leaving completes the round
    assert rounds.offer("a", 2, "k2") == [("a", 2, "k2")]
    assert rounds.leave("b") == []  # leaving twice changes nothing


def test_leaving_with_nobody_waiting_completes_nothing() -> None:
    rounds = Rounds([("a", "b")])
    assert rounds.leave("a") == []
    assert rounds.offer("b", 1, "k") == [("b", 1, "k")]


def test_muscles_in_no_group_are_not_held() -> None:
    rounds = Rounds([("a", "b")])
    assert rounds.grouped("a") and not rounds.grouped("c")
    assert rounds.leave("c") == []


def test_misuse_is_refused() -> None:
    with pytest.raises(MosaicError, match="two learning groups"):
        Rounds([("a", "b"), ("b", "c")])
    rounds = Rounds([("a", "b")])
    rounds.offer("a", 1, "k1")
    with pytest.raises(MosaicError, match="before its last was answered"):
        rounds.offer("a", 2, "k2")
    rounds.leave("b")
    with pytest.raises(MosaicError, match="after it left"):
        rounds.offer("b", 3, "k3")


class _Echo(Brain):
    """Learns nothing; answers each muscle with the experiences seen so far."""

    def setup(self, context: BrainContext) -> None:
        super().setup(context)
        self.seen: list[str] = []

    def learn(self, muscle: str, experience: Any) -> Any:
        self.seen.append(f"{muscle}:{experience}")
        return list(self.seen)


def _brain(groups: tuple[tuple[str, ...], ...]) -> BrainActor:
    brain = BrainActor("learner")
    handle_hosted(brain, BrainSetupRequest(
        "learner", "learner", ComponentSpec(f"{__name__}:_Echo", {}), (), (), 1, "train",
        ("a", "b"), groups=groups))
    return brain


def test_a_brain_answers_a_round_in_its_members_order_once_it_is_complete() -> None:
    brain = _brain((("a", "b"),))
    late = handle_hosted(brain, MuscleUpdateRequest("b", 1))
    assert isinstance(late, Later) and brain.take_answers() == []
    early = handle_hosted(brain, MuscleUpdateRequest("a", 1))
    assert isinstance(early, Later)
    answers = dict(brain.take_answers())
    # a learnt first, whatever came first; each answered with what learn returned for it.
    assert answers[early.key].update == ["a:1"]
    assert answers[late.key].update == ["a:1", "b:1"]


def test_a_brain_of_rollout_workers_stays_after_its_last_muscle_left() -> None:
    grouped, plain = _brain((("a", "b"),)), _brain(())
    for brain in (grouped, plain):
        for muscle in ("a", "b"):
            handle_hosted(brain, BrainShutdownRequest(muscle))
    # Its workers retire their muscles while the run goes on: its conductor stops it.
    assert not grouped.stop_requested
    assert plain.stop_requested
