"""Problems found in a config file (an experiment or an evaluation), and the error that lists them.

A file is validated with a pydantic model; :func:`validate` turns each pydantic error into a
:class:`Problem` in plain words (never pydantic's own): the key path, what was expected and a
hint, such as the closest valid key. :func:`config_error` then puts every problem on its line in
the file and returns one :class:`~mosaic.core.errors.ConfigError` that lists them in file order.

The models steer the wording: a field's ``description`` says what is expected there, a model's
``expected`` class attribute says what the model as a whole expects, and a model may explain a
key it does not take with a class method ``unknown_key_hint(key) -> str`` (for a key that belongs
elsewhere). A validator reports problems of its own with :func:`raise_problems`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NoReturn, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from mosaic.core.errors import ConfigError

__all__ = [
    "PROBLEMS_ERROR",
    "Loc",
    "Position",
    "Problem",
    "StrictModel",
    "config_error",
    "describe_value",
    "did_you_mean",
    "format_location",
    "locate",
    "raise_if_any",
    "raise_problems",
    "text_key_problem",
    "validate",
]

Loc = tuple[str | int, ...]
"""A key path in a file: mapping keys and list indexes, from the top."""

PROBLEMS_ERROR = "mosaic_problems"
"""The pydantic error type whose context carries :class:`Problem` instances (``"problems"``)."""

_M = TypeVar("_M", bound=BaseModel)

_TYPE_NOUNS = {
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "float_type": "a number",
    "string_type": "text",
    "bool_type": "true or false",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "list_type": "a list",
}
_BOUNDS = {
    "greater_than_equal": ("ge", ">="),
    "greater_than": ("gt", ">"),
    "less_than_equal": ("le", "<="),
    "less_than": ("lt", "<"),
}
_BOOLEAN_WORDS = (
    "YAML reads yes/no/on/off/true/false as booleans; quote the value to keep it as text"
)


@dataclass(frozen=True)
class Problem:
    """One problem found in a file: where (key path), what, and what to do.

    ``line`` is set when the problem is at a line other than where ``loc`` starts (the second of
    two duplicate keys, for example).
    """

    loc: Loc
    message: str
    hint: str = ""
    line: int | None = None


@dataclass(frozen=True)
class Position:
    """Where a key path starts in a file (1-based), and whether its value is a scalar."""

    line: int
    column: int
    scalar: bool


def raise_problems(*problems: Problem) -> NoReturn:
    """Fail a pydantic validator with ``problems``, each at its key path below the validated value.

    :func:`validate` reports them as they are, in place of pydantic's wording.
    """
    summary = "; ".join(problem.message for problem in problems)
    raise PydanticCustomError(
        PROBLEMS_ERROR, "{summary}", {"summary": summary, "problems": problems}
    )


def raise_if_any(problems: Sequence[Problem]) -> None:
    """:func:`raise_problems` with ``problems``, if there are any; else nothing."""
    if problems:
        raise_problems(*problems)


class StrictModel(BaseModel):
    """The base of a config file's models: strict types, no unknown keys, frozen.

    ``expected`` says what a value of the model looks like, for error messages.
    """

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    expected: ClassVar[str] = "a mapping"


def text_key_problem(loc: Loc, key: Any) -> Problem:
    """The problem of a mapping key ``key`` at ``loc`` (its parent's path) that is not text."""
    return Problem((*loc, str(key)), f"expected a text key, got {describe_value(key)}",
                   f"quote the key: '{key}'")


def describe_value(value: Any) -> str:
    """Name a YAML value the way a user wrote it, for error messages."""
    if value is None:
        return "an empty value"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        shown = value if len(value) <= 60 else value[:57] + "..."
        return f"the text {shown!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    names = {"date": "a date", "datetime": "a date and time", "bytes": "binary data"}
    return names.get(type(value).__name__, f"a value of type {type(value).__name__}")


def did_you_mean(word: str, choices: Sequence[str], *, cutoff: float = 0.6) -> str:
    """``"did you mean 'choice'?"`` for the choice closest to ``word``; ``""`` if none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=cutoff)
    return f"did you mean '{close[0]}'?" if close else ""


def format_location(loc: Loc) -> str:
    """Format a key path as the file's reader sees it: ``agents[1].muscle.class``."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", part):
            text += f".{part}" if text else part
        else:
            text += f"[{part!r}]"
    return text


def locate(loc: Loc, positions: Mapping[Loc, Position]) -> tuple[Loc, int | None]:
    """Return the key path to show for ``loc``, and the line where it is written (if known).

    A value the user wrote in its short form (``muscle: pkg.mod:Class`` rather than a mapping with
    ``class``) is validated as the long form; the problem is shown at the key the user wrote.
    A key path the file does not hold (a missing key) is placed on the line of its nearest parent.
    """
    while loc and loc not in positions and loc[:-1] in positions and positions[loc[:-1]].scalar:
        loc = loc[:-1]
    probe = loc
    while probe and probe not in positions:
        probe = probe[:-1]
    line = positions[probe].line if probe and probe in positions else None
    return loc, line


def validate(model: type[_M], data: Any, prefix: Loc = ()) -> tuple[_M | None, list[Problem]]:
    """Validate ``data`` with ``model``: the instance and no problems, or None and every problem.

    The problems' key paths start with ``prefix``: where ``data`` sits in the file.
    """
    try:
        return model.model_validate(data), []
    except ValidationError as error:
        problems: list[Problem] = []
        for detail in error.errors(include_url=False):
            problems.extend(
                Problem((*prefix, *p.loc), p.message, p.hint, p.line)
                for p in _translate(detail, model)
            )
        return None, problems


def config_error(
    source: str, problems: Sequence[Problem], positions: Mapping[Loc, Position]
) -> ConfigError:
    """One ConfigError for ``problems`` (at least one) in the file ``source``.

    Each problem is placed on its line (``positions`` of the file's key paths; empty for data
    that came from no file), repeated problems are shown once, and the rest are sorted by line:
    ``str()`` of the error shows one problem per line, and its own fields are the first one's.
    """
    seen: set[tuple[str, str]] = set()
    placed: list[tuple[int, int, str, int | None, Problem]] = []
    for problem in problems:
        loc, line = locate(problem.loc, positions)
        line = problem.line if problem.line is not None else line
        location = format_location(loc)
        if (location, problem.message) in seen:
            continue
        seen.add((location, problem.message))
        placed.append((line if line is not None else 1 << 30, len(placed), location, line, problem))
    return ConfigError.collect([
        ConfigError(source, location, problem.message, problem.hint, line=line)
        for _, _, location, line, problem in sorted(placed)
    ])


# -- from a pydantic error to problems in plain words ------------------------------------------


def _translate(detail: Any, root: type[BaseModel]) -> list[Problem]:
    """Turn one pydantic error for ``root`` into problems in plain words."""
    kind: str = detail["type"]
    loc: Loc = tuple(detail["loc"])
    value = detail.get("input")
    ctx = detail.get("ctx") or {}
    if kind == PROBLEMS_ERROR:
        return [Problem((*loc, *p.loc), p.message, p.hint) for p in ctx["problems"]]
    if kind == "invalid_key" or loc[-1:] == ("[key]",):
        # pydantic reports a bad mapping key at the key, plus "[key]" for a typed mapping.
        loc = loc[:-1] if loc[-1:] == ("[key]",) else loc
        key = loc[-1] if loc else value
        return [text_key_problem(loc[:-1], key)]
    field, target = _resolve(root, loc)
    expected = field.description if field is not None and field.description else None
    if expected is None and _is_model(target):
        expected = getattr(target, "expected", None)

    if kind == "missing":
        return [Problem(loc, f"required key is missing; expected {expected or 'a value'}")]
    if kind == "extra_forbidden":
        return [_unknown_key(root, loc)]
    if kind in _TYPE_NOUNS:
        return [
            Problem(
                loc,
                f"expected {expected or _TYPE_NOUNS[kind]}, got {describe_value(value)}",
                _type_hint(kind, value),
            )
        ]
    if kind in _BOUNDS:
        key, sign = _BOUNDS[kind]
        wanted = expected or f"a value {sign} {ctx.get(key)}"
        return [Problem(loc, f"expected {wanted}, got {describe_value(value)}")]
    if kind == "literal_error":
        choices = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        return [
            Problem(
                loc,
                f"expected {ctx.get('expected', 'one of the allowed values')}, "
                f"got {describe_value(value)}",
                _choice_hint(value, choices),
            )
        ]
    if kind == "string_pattern_mismatch":
        return [Problem(loc, f"expected {expected or 'another text'}, got {describe_value(value)}")]
    if kind == "string_too_short":
        count = ctx.get("min_length", 1)
        wanted = expected or f"at least {count} character{'s' if count != 1 else ''}"
        return [Problem(loc, f"expected {wanted}, got {describe_value(value)}")]
    if kind == "too_short":
        noun = "entry" if isinstance(value, dict) else "item"
        return [
            Problem(
                loc,
                f"expected at least {ctx.get('min_length', 1)} {noun}, got none",
                f"expected {expected}" if expected else "",
            )
        ]
    if kind == "finite_number":
        return [Problem(loc, f"expected a finite number, got {describe_value(value)}")]
    message = str(detail.get("msg", "invalid value")).replace("Input should be", "expected")
    return [Problem(loc, f"{message}; got {describe_value(value)}")]


def _unwrap(annotation: Any) -> Any:
    """Strip ``Optional`` and ``Annotated`` from a type annotation."""
    while True:
        origin = get_origin(annotation)
        args = get_args(annotation)
        if origin is Union or type(annotation).__name__ == "UnionType":
            rest = [arg for arg in args if arg is not type(None)]
            if len(rest) != 1:
                return annotation
            annotation = rest[0]
        elif hasattr(annotation, "__metadata__"):
            annotation = args[0]
        else:
            return annotation


def _resolve(root: type[BaseModel], loc: Loc) -> tuple[FieldInfo | None, Any]:
    """Find the field at ``loc`` below ``root`` (``None`` unless it ends on a model's key) and
    its type (``None`` where the schema says nothing)."""
    target: Any = root
    field: FieldInfo | None = None
    for part in loc:
        target = _unwrap(target)
        if _is_model(target):
            field = _field(target, part)
            if field is None:
                return None, None
            target = field.annotation
        elif get_origin(target) is list and isinstance(part, int):
            field, target = None, get_args(target)[0]
        elif get_origin(target) is dict:
            field, target = None, get_args(target)[1]
        else:
            return None, None
    return field, _unwrap(target)


def _is_model(target: Any) -> bool:
    return isinstance(target, type) and get_origin(target) is None and issubclass(target, BaseModel)


def _field(model: type[BaseModel], key: str | int) -> FieldInfo | None:
    for name, field in model.model_fields.items():
        if key in (name, field.alias):
            return field
    return None


def _keys(model: type[BaseModel]) -> list[str]:
    return [field.alias or name for name, field in model.model_fields.items()]


def _unknown_key(root: type[BaseModel], loc: Loc) -> Problem:
    key = str(loc[-1])
    _, parent = _resolve(root, loc[:-1])
    known = _keys(parent) if _is_model(parent) else []
    listed = f"known keys here: {', '.join(known)}" if known else ""
    close = did_you_mean(key, known)
    if close:
        hint = f"{close} {listed}"
    else:
        # The model may know where the key belongs instead (a top-level key written too deep).
        explain = getattr(parent, "unknown_key_hint", None)
        hint = (explain(key) if callable(explain) else "") or listed
    return Problem(loc, f"unknown key '{key}'", hint.strip())


def _type_hint(kind: str, value: Any) -> str:
    if kind in ("int_type", "float_type") and isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return ""
        return f"remove the quotes: {value!r} in quotes is text, not a number"
    if kind == "int_type" and isinstance(value, float):
        return "use a whole number"
    if kind == "string_type" and isinstance(value, bool):
        return _BOOLEAN_WORDS
    if kind == "string_type" and isinstance(value, int | float):
        return f"quote the value to keep it as text: '{value}'"
    if kind == "bool_type" and isinstance(value, str):
        return "write true or false, without quotes"
    if kind == "list_type" and isinstance(value, dict):
        return "start each item of a list with '- '"
    if kind in ("dict_type", "model_type", "model_attributes_type") and isinstance(value, list):
        return "write 'key: value' lines, without a leading '- '"
    return ""


def _choice_hint(value: Any, choices: list[str]) -> str:
    if isinstance(value, bool):
        return _BOOLEAN_WORDS
    if isinstance(value, str):
        return did_you_mean(value.lower(), choices, cutoff=0.5)
    return ""
