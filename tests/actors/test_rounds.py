"""Learning rounds: a brain learns from its rollout workers in their order, whatever order
their experience arrives in, and a worker that leaves no longer holds the others back."""

from __future__ import annotations

import itertools

import pytest

from mosaic.actors.rounds import Rounds
from mosaic.core.errors import MosaicError


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
