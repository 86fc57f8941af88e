"""trusted_constructor(): a message built from validated values, without validating them again,
and only where the values are of that kind."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import mosaic
from mosaic.core.errors import MessageFieldError
from mosaic.messages import (
    AgentUpdateRequest,
    AgentUpdateResponse,
    EnvironmentUpdateRequest,
    Metric,
    pack,
)
from mosaic.messages.trusted import trusted_constructor

#: The modules that build messages with a trusted constructor, each from the fields of messages
#: validated when they were made. A new use belongs here only once its arguments are checked to
#: be of that kind: a value from user code must go through the class itself.
TRUSTED_USERS = {
    "stepping/player_episodes.py",
    "orchestration/simulation_controller.py",
}


def test_it_builds_the_message_the_class_builds_from_the_same_valid_values() -> None:
    observation = np.arange(4, dtype=np.float32)
    values = (3, {"a": observation}, {"a": 1.0}, False, True, ("a",), {}, {"a": {"k": 1}})
    made = trusted_constructor(AgentUpdateRequest)(*values)
    assert type(made) is AgentUpdateRequest
    assert made == AgentUpdateRequest(*values)
    assert pack(made) == pack(AgentUpdateRequest(*values))
    assert made.observations["a"] is observation  # the values themselves: no copy
    with pytest.raises(AttributeError):
        made.step = 4  # type: ignore[misc]  # frozen as the class's own


def test_defaults_and_default_factories_are_the_classes() -> None:
    make = trusted_constructor(AgentUpdateRequest)
    first, second = (make(0, {}, {}, False, False, (), {}) for _ in range(2))
    assert first.infos == {} and first.infos is not second.infos  # a new dict each time
    answer = trusted_constructor(AgentUpdateResponse)({"a": 1})
    assert answer == AgentUpdateResponse({"a": 1}) and answer.metrics is None
    assert trusted_constructor(AgentUpdateResponse) is trusted_constructor(AgentUpdateResponse)


def test_it_checks_nothing_so_what_user_code_returns_goes_through_the_class() -> None:
    """What the trusted constructor is given, it keeps (a list for a tuple field stays a list);
    the class refuses garbage, naming the field: a muscle's answer is built by the class."""
    unchecked = trusted_constructor(EnvironmentUpdateRequest)("not actions")  # type: ignore[arg-type]
    assert unchecked.actions == "not actions"
    with pytest.raises(MessageFieldError, match=r"AgentUpdateResponse\.actions: expected"):
        AgentUpdateResponse("garbage")  # type: ignore[arg-type]
    with pytest.raises(MessageFieldError, match=r"AgentUpdateResponse\.metrics"):
        AgentUpdateResponse({}, (Metric("m", "x", 1.0, 0.0), "garbage"))  # type: ignore[arg-type]


def test_a_class_that_is_no_message_is_refused() -> None:
    with pytest.raises(TypeError, match="not a mosaic message"):
        trusted_constructor(dict)


def test_only_the_step_loop_builds_messages_without_validation() -> None:
    package = Path(mosaic.__file__).parent
    users = {path.relative_to(package).as_posix() for path in package.rglob("*.py")
             if re.search(r"\btrusted_constructor\(", path.read_text(encoding="utf-8"))}
    assert users - {"messages/trusted.py"} == TRUSTED_USERS
