"""Gymnasium spaces as plain dicts, so that they can travel inside messages.

:func:`space_to_dict` describes a space with values the codec packs exactly (str, int, bool,
tuples, lists, dicts and NumPy arrays); :func:`space_from_dict` rebuilds an equal space.
Supported: ``Box``, ``Discrete``, ``MultiDiscrete``, ``MultiBinary``, ``Text``, and ``Dict`` and
``Tuple`` of supported spaces. A space's random generator state is not carried.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium import spaces

from mosaic.core.errors import CodecError

__all__ = ["SUPPORTED_SPACES", "space_from_dict", "space_problem", "space_to_dict"]


def space_to_dict(space: spaces.Space[Any]) -> dict[str, Any]:
    """Describe ``space`` as a dict of codec-packable values, tagged by ``"type"``.

    ``space_from_dict(space_to_dict(space)) == space`` for every supported space. Raises
    :class:`~mosaic.core.errors.CodecError` naming the type of an unsupported space (subclasses
    of the supported ones included, since they could not be rebuilt as themselves).
    """
    describe = _DESCRIBERS.get(type(space))
    if describe is None:
        raise CodecError(
            f"cannot describe a space of type {type(space).__module__}.{type(space).__qualname__}; "
            f"supported: {', '.join(sorted(_BUILDERS))}"
        )
    return describe(space)


def space_problem(space: spaces.Space[Any]) -> str | None:
    """Why :func:`space_to_dict` cannot describe ``space``, naming the space it cannot describe
    and where it sits inside ``space`` (a Dict key, a Tuple index); ``None`` when it can."""
    kind = type(space)
    # Exact types, as space_to_dict: a subclass of Dict or Tuple is a space of its own.
    if kind is spaces.Dict and isinstance(space, spaces.Dict):
        for key, sub in space.spaces.items():
            inner = space_problem(sub)
            if inner is not None:
                return f"{inner}, at key {key!r} of {space}"
        return None
    if kind is spaces.Tuple and isinstance(space, spaces.Tuple):
        for index, sub in enumerate(space.spaces):
            inner = space_problem(sub)
            if inner is not None:
                return f"{inner}, at index {index} of {space}"
        return None
    if kind not in _DESCRIBERS:
        return f"{space} is a {kind.__module__}.{kind.__qualname__}, which mosaic does not carry"
    try:
        space_to_dict(space)
    except CodecError as error:
        return f"{space}: {error}"
    return None


def space_from_dict(data: dict[str, Any]) -> spaces.Space[Any]:
    """Rebuild the space that :func:`space_to_dict` described.

    Raises :class:`~mosaic.core.errors.CodecError` if ``data`` names an unknown space type or
    does not describe a valid space (a missing key, a wrong value).
    """
    if not isinstance(data, dict):
        raise CodecError(f"a space description must be a dict, got {type(data).__name__}")
    kind = data.get("type")
    build = _BUILDERS.get(kind) if isinstance(kind, str) else None
    if build is None:
        raise CodecError(
            f"unknown space type {kind!r} in space description; "
            f"supported: {', '.join(sorted(_BUILDERS))}"
        )
    try:
        return build(data)
    except CodecError:
        raise
    # Gymnasium validates with asserts as well as exceptions; a bad description surfaces as any
    # of these, and the caller should see one error type.
    except (KeyError, TypeError, ValueError, AssertionError, IndexError) as exc:
        raise CodecError(f"invalid {kind} space description: {type(exc).__name__}: {exc}") from exc


def _box(space: spaces.Box) -> dict[str, Any]:
    return {
        "type": "Box",
        "low": space.low.copy(),
        "high": space.high.copy(),
        "shape": tuple(space.shape),
        "dtype": space.dtype.str,
    }


def _discrete(space: spaces.Discrete) -> dict[str, Any]:
    return {
        "type": "Discrete",
        "n": int(space.n),
        "start": int(space.start),
        "dtype": space.dtype.str,
    }


def _multi_discrete(space: spaces.MultiDiscrete) -> dict[str, Any]:
    return {
        "type": "MultiDiscrete",
        "nvec": space.nvec.copy(),
        "start": space.start.copy(),
        "dtype": space.dtype.str,
    }


def _multi_binary(space: spaces.MultiBinary) -> dict[str, Any]:
    n = space.n
    return {"type": "MultiBinary", "n": int(n) if isinstance(n, (int, np.integer)) else tuple(n)}


def _text(space: spaces.Text) -> dict[str, Any]:
    return {
        "type": "Text",
        "min_length": int(space.min_length),
        "max_length": int(space.max_length),
        # The character list keeps the space's own order, which sampling depends on.
        "charset": "".join(space.character_list),
    }


def _dict(space: spaces.Dict) -> dict[str, Any]:
    # Pairs rather than a dict: keeps key order exactly, and gymnasium does not re-sort a list.
    return {
        "type": "Dict",
        "spaces": [[key, space_to_dict(sub)] for key, sub in space.spaces.items()],
    }


def _tuple(space: spaces.Tuple[Any]) -> dict[str, Any]:
    return {"type": "Tuple", "spaces": [space_to_dict(sub) for sub in space.spaces]}


_DESCRIBERS: dict[type, Callable[[Any], dict[str, Any]]] = {
    spaces.Box: _box,
    spaces.Discrete: _discrete,
    spaces.MultiDiscrete: _multi_discrete,
    spaces.MultiBinary: _multi_binary,
    spaces.Text: _text,
    spaces.Dict: _dict,
    spaces.Tuple: _tuple,
}


def _build_box(data: dict[str, Any]) -> spaces.Box:
    dtype = np.dtype(data["dtype"])
    shape = tuple(data["shape"])
    low = np.asarray(data["low"], dtype=dtype)
    high = np.asarray(data["high"], dtype=dtype)
    return spaces.Box(low=low, high=high, shape=shape, dtype=dtype)


def _build_discrete(data: dict[str, Any]) -> spaces.Discrete:
    return spaces.Discrete(
        _int(data["n"]), start=_int(data["start"]), dtype=np.dtype(data["dtype"])
    )


def _build_multi_discrete(data: dict[str, Any]) -> spaces.MultiDiscrete:
    dtype = np.dtype(data["dtype"])
    return spaces.MultiDiscrete(
        np.asarray(data["nvec"], dtype=dtype),
        dtype=dtype,
        start=np.asarray(data["start"], dtype=dtype),
    )


def _build_multi_binary(data: dict[str, Any]) -> spaces.MultiBinary:
    n = data["n"]
    return spaces.MultiBinary(_int(n) if isinstance(n, int) else [_int(item) for item in n])


def _build_text(data: dict[str, Any]) -> spaces.Text:
    charset = data["charset"]
    if not isinstance(charset, str):
        raise CodecError(f"Text charset must be a str, got {type(charset).__name__}")
    return spaces.Text(
        _int(data["max_length"]), min_length=_int(data["min_length"]), charset=charset
    )


def _build_dict(data: dict[str, Any]) -> spaces.Dict:
    pairs = []
    for pair in data["spaces"]:
        key, sub = pair
        pairs.append((key, space_from_dict(sub)))
    return spaces.Dict(pairs)


def _build_tuple(data: dict[str, Any]) -> spaces.Tuple[Any]:
    return spaces.Tuple(tuple(space_from_dict(sub) for sub in data["spaces"]))


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise CodecError(f"expected an int in space description, got {type(value).__name__}")
    return int(value)


_BUILDERS: dict[str, Callable[[dict[str, Any]], spaces.Space[Any]]] = {
    "Box": _build_box,
    "Discrete": _build_discrete,
    "MultiDiscrete": _build_multi_discrete,
    "MultiBinary": _build_multi_binary,
    "Text": _build_text,
    "Dict": _build_dict,
    "Tuple": _build_tuple,
}

#: The spaces :func:`space_to_dict` describes, by name.
SUPPORTED_SPACES = tuple(sorted(_BUILDERS))
