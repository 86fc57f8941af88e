"""Gymnasium spaces described as plain dicts and rebuilt: equal, same dtype, same sampling."""

from __future__ import annotations

from typing import Any

import hypothesis.extra.numpy as npst
import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from mosaic.core.errors import CodecError
from mosaic.core.spaces import space_from_dict, space_problem, space_to_dict
from mosaic.messages import pack, unpack

CASES: list[spaces.Space[Any]] = [
    spaces.Box(-1.0, 1.0, (3,)),
    spaces.Box(np.array([0.0, -np.inf]), np.array([1.0, np.inf]), dtype=np.float64),
    spaces.Box(0, 255, (2, 2), dtype=np.uint8),
    spaces.Box(np.array([[-1, 0]]), np.array([[1, 5]]), dtype=np.int32),
    spaces.Box(-2.0, 3.0, shape=(), dtype=np.float64),
    spaces.Box(0, 1, (2,), dtype=np.bool_),
    spaces.Discrete(5),
    spaces.Discrete(3, start=-2),
    spaces.Discrete(4, dtype=np.int32),
    spaces.MultiDiscrete([3, 4]),
    spaces.MultiDiscrete(np.array([[2, 3], [4, 5]]), start=np.array([[1, 1], [0, -3]])),
    spaces.MultiDiscrete([2, 2], dtype=np.int8),
    spaces.MultiBinary(4),
    spaces.MultiBinary([2, 3]),
    spaces.Text(5),
    spaces.Text(8, min_length=0, charset="zyx"),
    spaces.Dict({"b": spaces.Discrete(2), "a": spaces.Box(0, 1)}),
    spaces.Dict({"b": spaces.Discrete(2), "a": spaces.Box(0, 1)}, sort_keys=False),
    spaces.Tuple((spaces.Discrete(2), spaces.Dict({"x": spaces.MultiBinary(2)}))),
    spaces.Tuple(()),
]


def _over_the_wire(space: spaces.Space[Any]) -> spaces.Space[Any]:
    return space_from_dict(unpack(pack(space_to_dict(space))))


@pytest.mark.parametrize("space", CASES, ids=repr)
def test_roundtrip_is_exact(space: spaces.Space[Any]) -> None:
    rebuilt = _over_the_wire(space)
    assert type(rebuilt) is type(space)
    assert rebuilt == space
    assert rebuilt.dtype == space.dtype
    assert rebuilt.shape == space.shape
    # Same seed, same samples: bounds, start, dtype and character order all match.
    space.seed(7)
    rebuilt.seed(7)
    for _ in range(3):
        expected, actual = space.sample(), rebuilt.sample()
        assert repr(actual) == repr(expected)


def test_box_bounds_are_exact_not_just_close() -> None:
    box = spaces.Box(np.array([0.1, -1e-12]), np.array([0.3, 1e-12]), dtype=np.float64)
    rebuilt = _over_the_wire(box)
    assert isinstance(rebuilt, spaces.Box)
    assert rebuilt.low.tobytes() == box.low.tobytes()
    assert rebuilt.high.tobytes() == box.high.tobytes()


def test_dict_keeps_key_order() -> None:
    space = spaces.Dict({"b": spaces.Discrete(2), "a": spaces.Discrete(3)}, sort_keys=False)
    rebuilt = _over_the_wire(space)
    assert isinstance(rebuilt, spaces.Dict)
    assert list(rebuilt.spaces) == ["b", "a"]


@settings(max_examples=40, deadline=None)
@given(
    npst.array_shapes(min_dims=1, max_dims=3, max_side=3),
    st.sampled_from([np.float16, np.float32, np.float64, np.int8, np.int64, np.uint16]),
    st.data(),
)
def test_random_boxes_roundtrip(shape: tuple[int, ...], dtype: Any, data: st.DataObject) -> None:
    lowest = 0 if np.issubdtype(dtype, np.unsignedinteger) else -100
    low = data.draw(npst.arrays(dtype, shape, elements={"min_value": lowest, "max_value": 100}))
    high = low + data.draw(npst.arrays(dtype, shape, elements={"min_value": 0, "max_value": 20}))
    box = spaces.Box(low, high, dtype=dtype)
    rebuilt = _over_the_wire(box)
    assert isinstance(rebuilt, spaces.Box)
    assert rebuilt == box
    assert rebuilt.low.tobytes() == box.low.tobytes()
    assert rebuilt.high.tobytes() == box.high.tobytes()


def test_description_holds_only_packable_values() -> None:
    for space in CASES:
        description = space_to_dict(space)
        assert isinstance(description, dict) and isinstance(description["type"], str)
        pack(description)  # raises CodecError otherwise


@pytest.mark.parametrize(
    "space",
    [
        spaces.Sequence(spaces.Discrete(2)),
        spaces.Graph(node_space=spaces.Discrete(2), edge_space=None),
        spaces.Tuple((spaces.Discrete(2), spaces.Sequence(spaces.Discrete(2)))),
    ],
    ids=repr,
)
def test_unsupported_space_raises_codec_error_naming_the_type(space: spaces.Space[Any]) -> None:
    with pytest.raises(CodecError, match=r"Sequence|Graph"):
        space_to_dict(space)


class _MyBox(spaces.Box):
    pass


def test_subclass_of_a_supported_space_is_refused() -> None:
    with pytest.raises(CodecError, match="_MyBox"):
        space_to_dict(_MyBox(0, 1))


@pytest.mark.parametrize(
    "description",
    [
        {},
        {"type": "Nope"},
        {"type": "Box"},
        {"type": "Box", "low": 0, "high": 1, "shape": (2,), "dtype": "nonsense"},
        {"type": "Discrete", "n": 0, "start": 0, "dtype": "<i8"},
        {"type": "Discrete", "n": "3", "start": 0, "dtype": "<i8"},
        {"type": "MultiBinary", "n": -1},
        {"type": "Text", "min_length": 1, "max_length": 3, "charset": 5},
        {"type": "Dict", "spaces": [["a"]]},
        {"type": "Tuple", "spaces": [{"type": "Nope"}]},
        ["not", "a", "dict"],
    ],
    ids=repr,
)
def test_invalid_description_raises_codec_error(description: Any) -> None:
    with pytest.raises(CodecError):
        space_from_dict(description)


class _OwnBox(spaces.Box):
    """A space class of one's own: it could not be rebuilt as itself on the other side."""


@pytest.mark.parametrize(("space", "named", "where"), [
    (spaces.Graph(spaces.Discrete(2), None), "gymnasium.spaces.graph.Graph", ""),
    (spaces.Tuple((spaces.Discrete(2), spaces.Sequence(spaces.Discrete(3)))),
     "gymnasium.spaces.sequence.Sequence", "at index 1"),
    (spaces.Dict({"a": spaces.Dict({"b": spaces.OneOf((spaces.Discrete(2),))})}),
     "gymnasium.spaces.oneof.OneOf", "at key 'b'"),
    (_OwnBox(0, 1, (2,)), "_OwnBox", ""),
])
def test_space_problem_names_the_space_the_codec_cannot_carry_and_where(
        space: spaces.Space[Any], named: str, where: str) -> None:
    problem = space_problem(space)
    assert problem is not None and named in problem and where in problem
    with pytest.raises(CodecError):
        space_to_dict(space)


@pytest.mark.parametrize("space", CASES)
def test_space_problem_passes_every_supported_space(space: spaces.Space[Any]) -> None:
    assert space_problem(space) is None
