"""fast_init: a frozen slots dataclass built as dataclasses builds it, only faster."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import Any

import pytest

from mosaic.core.errors import MessageFieldError
from mosaic.core.frozen import fast_init
from mosaic.messages import EnvironmentResetResponse, EnvironmentUpdateResponse, Message


@dataclass(frozen=True, slots=True)
class _Plain:
    a: int
    b: str = "b"
    c: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Reference:
    a: int
    b: str = "b"
    c: list[int] = field(default_factory=list)


def test_it_builds_what_the_dataclass_init_builds() -> None:
    finished: list[Any] = []
    assert fast_init(_Plain, finished.append)
    assert str(inspect.signature(_Plain.__init__)) == str(inspect.signature(_Reference.__init__))
    cases: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((1,), {}), ((1, "x"), {}), ((1,), {"c": [2]}), ((), {"a": 3, "b": "y"})]
    for args, kwargs in cases:
        built = _Plain(*args, **kwargs)
        assert dataclasses.astuple(built) == dataclasses.astuple(_Reference(*args, **kwargs))
        assert finished[-1] is built
    assert _Plain(1).c is not _Plain(1).c  # a default factory is called for every instance
    with pytest.raises(dataclasses.FrozenInstanceError):
        _Plain(1).a = 2  # type: ignore[misc]
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'a'"):
        _Plain()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'd'"):
        _Plain(1, d=2)  # type: ignore[call-arg]


def test_a_class_whose_init_is_not_the_plain_one_keeps_its_own() -> None:
    @dataclass(frozen=True, slots=True)
    class KeywordOnly:
        a: int = field(kw_only=True)

    @dataclass(frozen=True, slots=True)
    class LeftOut:
        a: int
        b: int = field(init=False, default=0)

    for cls in (KeywordOnly, LeftOut):
        init = cls.__init__
        assert not fast_init(cls)
        assert cls.__init__ is init


def test_every_message_is_still_validated_when_built() -> None:
    built = EnvironmentResetResponse({"agent_0": 1}, ["agent_0"], {})  # type: ignore[arg-type]
    assert built.acting == ("agent_0",)  # normalised as before
    assert built.infos == {} and built.infos is not EnvironmentResetResponse({}, (), {}).infos
    with pytest.raises(MessageFieldError, match=r"EnvironmentUpdateResponse\.terminated"):
        EnvironmentUpdateResponse({}, {}, "no", False, (), {})  # type: ignore[arg-type]


_POST_INITS: list[str] = []


@dataclass(frozen=True, slots=True)
class FrozenTestCountedNotice(Message):
    name: str

    def __post_init__(self) -> None:
        _POST_INITS.append(self.name)


def test_a_message_with_a_post_init_of_its_own_runs_it() -> None:
    FrozenTestCountedNotice("x")
    assert _POST_INITS == ["x"]
