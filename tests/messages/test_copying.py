"""detached(): the value the codec would deliver, without encoding it, sharing nothing mutable."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given

from mosaic.core.errors import CodecError
from mosaic.messages import (
    AgentUpdateResponse,
    EnvironmentUpdateResponse,
    Metric,
    VectorStepResponse,
    pack,
    unpack,
)
from mosaic.messages.copying import detached
from mosaic.messages.vector import BatchOutcome
from tests.messages.test_codec import FAST, assert_identical, values


def arrays_in(value: Any) -> list[np.ndarray]:
    """Every array in ``value``, however nested."""
    if isinstance(value, np.ndarray):
        nested = [arrays_in(item) for item in value.ravel()] if value.dtype.hasobject else []
        return [value, *(array for found in nested for array in found)]
    if isinstance(value, dict):
        return [array for item in value.values() for array in arrays_in(item)]
    if isinstance(value, (list, tuple)):
        return [array for item in value for array in arrays_in(item)]
    if hasattr(type(value), "__dataclass_fields__"):
        return [array for name in type(value).__dataclass_fields__
                for array in arrays_in(getattr(value, name))]
    return []


def assert_shares_no_array(original: Any, copy: Any) -> None:
    for theirs in arrays_in(original):
        for ours in arrays_in(copy):
            assert not np.shares_memory(theirs, ours) or theirs.nbytes == 0


@FAST
@given(values)
def test_a_copy_is_what_the_codec_delivers_and_shares_no_array(value: Any) -> None:
    copy = detached(value)
    assert_identical(unpack(pack(value)), copy)
    assert_shares_no_array(value, copy)


def test_messages_are_rebuilt_around_copies_of_their_contents() -> None:
    observation = np.arange(4, dtype=np.float32)
    message = EnvironmentUpdateResponse({"a": observation}, {"a": 1.0}, False, True, ("a",),
                                        {"a": np.ones(2, dtype=bool)}, {"a": {"k": [1, (2,)]}})
    copy = detached(message)
    assert_identical(unpack(pack(message)), copy)
    assert_shares_no_array(message, copy)
    observation[...] = 9
    assert (copy.observations["a"] == np.arange(4)).all()


def test_empty_dicts_of_a_message_are_new_ones() -> None:
    message = EnvironmentUpdateResponse({}, {}, False, False, (), {}, {})
    copy = detached(message)
    for name in ("observations", "rewards", "legal_actions", "infos"):
        assert getattr(copy, name) == {} and getattr(copy, name) is not getattr(message, name)


def test_an_optional_field_is_copied_when_set_and_none_when_not() -> None:
    actions = {"a": np.ones(2), 1: np.int64(3)}  # a key of another kind than str, too
    for metrics in (None, (Metric("m", "loss", 0.5, 1.0),)):
        message = AgentUpdateResponse(actions, metrics, 4 if metrics else None)
        copy = detached(message)
        assert_identical(unpack(pack(message)), copy)
        assert_shares_no_array(message, copy)
        assert copy.actions is not actions


def test_a_steps_dict_of_many_slots_keeps_every_value_as_the_codec_does() -> None:
    """One value per slot, of every kind a step carries: scalars (Python's and NumPy's) stay
    what they are, arrays are copies, in their layout; whatever the codec refuses is refused."""
    step: dict[str, Any] = {f"agent_{index}": value for index, value in enumerate([
        np.arange(4, dtype=np.float32), np.int64(1), np.float32(0.5), 1.0, True, None, "up",
        b"\x00", 7, 1 << 70, np.asfortranarray(np.ones((2, 3))), np.arange(6)[::2],
        np.array(["a", None], dtype=object), {"mask": np.ones(2, dtype=np.int8)}, (1, [2])])}
    copy = detached(step)
    assert_identical(unpack(pack(step)), copy)
    assert_shares_no_array(step, copy)
    assert copy["agent_10"].flags.f_contiguous and copy["agent_11"].flags.c_contiguous
    with pytest.raises(CodecError, match="MaskedArray"):
        detached({**step, "odd": np.ma.masked_array([1, 2])})


def test_records_inside_messages_are_copied_too() -> None:
    outcome = BatchOutcome(observations=np.zeros((2, 4)), rewards=np.ones(2),
                           terminated=np.zeros(2, bool), truncated=np.zeros(2, bool),
                           acted=np.ones(2, bool), starts=np.zeros(2, bool),
                           final_observations={1: np.ones(4)}, legal_actions=None)
    message = VectorStepResponse(outcome)
    copy = detached(message)
    assert copy.outcome is not outcome
    assert_identical(unpack(pack(message)), copy)
    assert_shares_no_array(message, copy)


@pytest.mark.parametrize(("value", "type_name"), [
    ({1, 2}, "set"),
    (object(), "object"),
    ({"nested": [{"deep": {3.0}}]}, "set"),
    (np.ma.masked_array([1, 2]), "MaskedArray"),
])
def test_what_the_codec_cannot_carry_raises_its_error(value: Any, type_name: str) -> None:
    with pytest.raises(CodecError, match=type_name):
        detached(value)
