"""Problems found in an evaluation file, and how they become one ConfigError a user can act on.

A pydantic error becomes a :class:`Problem` with the key path, what was expected and a hint (the
closest valid key or value, where one is close); :func:`config_error` sorts the problems by line
and raises the first with the others attached as notes.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Union

from pydantic import BaseModel

from mosaic.core.errors import ConfigError
from mosaic.operators.evaluation._models import NAME_HINT, NAME_PATTERN, CommandSettings

Loc = tuple[str | int, ...]
"""A key path in the file: mapping keys and list indexes, from the top."""


#: Why some keys are not settings, for the hint.
_MISPLACED_SETTINGS = {
    "env_kwargs": "env_kwargs belongs in the operator entry itself, next to env",
    "seed": "seeds come from the top-level seeds list",
    "episodes": "episodes is a top-level key",
    "max_steps": "max_steps is a top-level key",
    "n_actions": "n_actions is for agent-mode workers; here the worker owns its environment",
}


@dataclass(frozen=True)
class Position:
    """Where a value starts in the file, and the line of its key when it has one."""

    key_line: int | None
    line: int
    column: int


class Problem(typing.NamedTuple):
    """One problem at ``loc``; ``on_key``: reported at the key's line, not the value's."""

    loc: Loc
    message: str
    hint: str
    on_key: bool = False


def _format_loc(loc: Sequence[str | int]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


# -- turning pydantic errors into ConfigErrors -----------------------------------------------


def _unwrap(annotation: Any) -> Any:
    """Strip ``Annotated`` and ``Optional`` so the container or model shows."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            options = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(options) != 1:
                return annotation
            annotation = options[0]
        else:
            return annotation


def _annotation_at(root: type[BaseModel], loc: Loc) -> Any:
    """The declared type at ``loc`` below ``root``, or ``None`` where the schema says nothing."""
    current: Any = root
    for part in loc:
        current = _unwrap(current)
        origin = typing.get_origin(current)
        if isinstance(part, int) and origin is list:
            current = typing.get_args(current)[0]
        elif isinstance(part, str) and isinstance(current, type) and issubclass(current, BaseModel):
            info = current.model_fields.get(part)
            if info is None:
                return None
            current = info.annotation
        elif isinstance(part, str) and origin is dict:
            current = typing.get_args(current)[1]
        else:
            return None
    return _unwrap(current)


def _model_at(root: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    found = _annotation_at(root, loc)
    return found if isinstance(found, type) and issubclass(found, BaseModel) else None


def _description(root: type[BaseModel], loc: Loc) -> str:
    owner = _model_at(root, loc[:-1]) if loc else None
    if owner is None or not isinstance(loc[-1], str) or loc[-1] not in owner.model_fields:
        return ""
    return owner.model_fields[loc[-1]].description or ""


def _public_fields(model: type[BaseModel]) -> list[str]:
    return list(model.model_fields)


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """A hint naming the choice closest to ``word`` (or equal but for case), else ``""``."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    if not close:
        lowered = {choice.lower(): choice for choice in choices}
        if word.lower() in lowered:
            close = [lowered[word.lower()]]
    return f"did you mean {close[0]!r}?" if close else ""


def yaml_type(value: Any) -> str:
    """What ``value`` is, in YAML's words: ``a mapping``, ``an integer``, ``null``..."""
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a mapping",
    }.get(type(value), type(value).__name__)


_EXPECTED_TYPES = {
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}

_BOUNDS = {
    "greater_than": (">", "gt"),
    "greater_than_equal": (">=", "ge"),
    "less_than": ("<", "lt"),
    "less_than_equal": ("<=", "le"),
}


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def problem_from_pydantic(
    error: Mapping[str, Any], root: type[BaseModel], prefix: Loc
) -> Problem:
    """The problem a pydantic ``error`` for model ``root`` describes, at ``prefix`` + its loc."""
    loc: Loc = tuple(error["loc"])
    kind = error["type"]
    value = error.get("input")
    key = loc[-1] if loc else ""
    described = _description(root, loc)
    full = prefix + loc
    if kind == "extra_forbidden":
        parent = _model_at(root, loc[:-1])
        allowed = _public_fields(parent) if parent else []
        if parent is CommandSettings:
            hint = "a command worker gets no settings: put its options in the command list"
        else:
            hint = did_you_mean(str(key), allowed) or _MISPLACED_SETTINGS.get(str(key), "") or (
                "allowed keys: " + ", ".join(allowed) if allowed else ""
            )
        return Problem(full, f"unknown key {key!r}", hint, on_key=True)
    if kind == "missing":
        hint = f"add {key}: {described}" if described else f"add {key}"
        return Problem(full, "required key is missing", hint)
    if kind == "literal_error":
        expected = error.get("ctx", {}).get("expected", "")
        choices = [c.strip().strip("'") for c in expected.replace(" or ", ", ").split(",")]
        hint = ""
        if isinstance(value, str):
            hint = did_you_mean(value, [c for c in choices if c])
        return Problem(full, f"expected one of {expected}, got {_shown(value)}", hint)
    if kind == "string_pattern_mismatch":
        if error.get("ctx", {}).get("pattern") == NAME_PATTERN:
            return Problem(full, f"{_shown(value)} is not a valid name", NAME_HINT)
        return Problem(full, f"expected {described or 'another format'}, got {_shown(value)}", "")
    if kind in _EXPECTED_TYPES:
        expected = _EXPECTED_TYPES[kind]
        return Problem(full, f"expected {expected}, got {yaml_type(value)} {_shown(value)}", "")
    ctx = error.get("ctx", {})
    if kind in _BOUNDS:
        bound = ctx.get(_BOUNDS[kind][1])
        about = f" ({described})" if described else ""
        expected = f"a value {_BOUNDS[kind][0]} {bound}{about}"
        return Problem(full, f"expected {expected}, got {_shown(value)}", "")
    if kind in ("too_short", "string_too_short"):
        what = "character" if kind == "string_too_short" else "item"
        count = ctx.get("min_length", 1)
        plural = "s" if count != 1 else ""
        about = f" ({described})" if described else ""
        return Problem(full, f"expected at least {count} {what}{plural}{about}", "")
    if kind == "value_error":
        message = str(error.get("msg", "")).removeprefix("Value error, ")
        return Problem(full, message, "")
    message = str(error.get("msg", kind))
    message = message[:1].lower() + message[1:]
    if described:
        message = f"{message} ({described})"
    return Problem(full, f"{message}, got {_shown(value)}", "")


def config_error(
    source: str, problems: list[Problem], positions: dict[Loc, Position]
) -> ConfigError:
    """One ConfigError for ``problems``: the first by line, the others attached as notes."""

    def one(problem: Problem) -> ConfigError:
        line = ""
        for cut in range(len(problem.loc), 0, -1):
            position = positions.get(problem.loc[:cut])
            if position is None:
                continue
            if problem.on_key and position.key_line is not None and cut == len(problem.loc):
                line = f" (line {position.key_line})"
            elif cut == len(problem.loc):
                line = f" (line {position.line}, column {position.column})"
            else:
                line = f" (near line {position.key_line or position.line})"
            break
        if problem.on_key and "(line" in problem.message:
            line = ""
        return ConfigError(source, _format_loc(problem.loc), problem.message + line, problem.hint)

    def line_of(problem: Problem) -> int:
        for cut in range(len(problem.loc), 0, -1):
            position = positions.get(problem.loc[:cut])
            if position is not None:
                return position.key_line or position.line
        return 1 << 30

    errors = [one(problem) for problem in sorted(problems, key=line_of)]
    first = errors[0]
    for other in errors[1:]:
        first.add_note(f"also: {other}")
    return first
