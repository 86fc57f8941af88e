"""The ``wrappers:`` key of an environment: Gymnasium wrappers by name, with parameters, in order.

Each item is a wrapper's name, or a mapping of one name to its parameters::

    wrappers:
      - TimeLimit: {max_episode_steps: 50}
      - NormalizeObservation
      - my_package.wrappers:Clip      # or my_package.wrappers.Clip

A bare name is looked up in ``gymnasium.wrappers``; anything else is an import path. It must be
a ``gymnasium.Wrapper`` subclass, and its parameters must fit its signature (after the
environment it wraps). Values are checked by the wrapper itself when it is built: by
``mosaic experiment-check``, which builds every environment, and at run time.
"""

from __future__ import annotations

import inspect
from typing import Any

import gymnasium

from mosaic.core.config_problems import Problem, StrictModel, describe_value, did_you_mean
from mosaic.core.imports import ImportPathError, resolve_class

__all__ = ["GYMNASIUM_WRAPPERS", "WrapperSpec", "parse_wrappers"]

#: Where a bare wrapper name is looked up.
GYMNASIUM_WRAPPERS = "gymnasium.wrappers"
_EXPECTED = ("a wrapper's name (TimeLimit, or package.module:Class), or a mapping of one name "
             "to its parameters, e.g. {TimeLimit: {max_episode_steps: 50}}")


class WrapperSpec(StrictModel):
    """One wrapper, resolved: ``name`` as written, its class's import path and its parameters."""

    name: str
    class_path: str
    params: dict[str, Any]


def parse_wrappers(value: Any) -> tuple[list[WrapperSpec], list[Problem]]:
    """The wrappers of a ``wrappers:`` value, and its problems, each at its item's key path."""
    if not isinstance(value, list):
        return [], [Problem((), f"expected a list of wrappers, got {describe_value(value)}",
                            f"each item is {_EXPECTED}")]
    specs: list[WrapperSpec] = []
    problems: list[Problem] = []
    for index, item in enumerate(value):
        name, params, problem = _item(item)
        if problem is not None:
            problems.append(Problem((index, *problem.loc), problem.message, problem.hint))
            continue
        found = _resolve(name, params)
        if isinstance(found, Problem):
            problems.append(Problem((index, *found.loc), found.message, found.hint))
        else:
            specs.append(found)
    return specs, problems


def _item(item: Any) -> tuple[str, dict[str, Any], Problem | None]:
    if isinstance(item, str):
        return item, {}, None
    if isinstance(item, dict) and len(item) == 1:
        ((name, params),) = item.items()
        if not isinstance(name, str):
            return "", {}, Problem((), f"expected a wrapper's name, got {describe_value(name)}")
        if params is None:
            return name, {}, None
        if not isinstance(params, dict) or not all(isinstance(key, str) for key in params):
            return name, {}, Problem((name,), f"expected a mapping of parameters, got "
                                     f"{describe_value(params)}",
                                     f"write {{{name}: {{parameter: value}}}}")
        return name, params, None
    return "", {}, Problem((), f"expected {_EXPECTED}, got {describe_value(item)}")


def _resolve(name: str, params: dict[str, Any]) -> WrapperSpec | Problem:
    bare = ":" not in name and "." not in name
    if bare:
        path = f"{GYMNASIUM_WRAPPERS}:{name}"
    elif ":" in name:
        path = name
    else:
        module, _, attr = name.rpartition(".")
        path = f"{module}:{attr}"
    try:
        cls = resolve_class(path, gymnasium.Wrapper)
    except ImportPathError as error:
        if bare and error.reason == "attribute":
            known = [n for n in _gymnasium_wrapper_names() if n != "vector"]
            hint = did_you_mean(name, known) or (
                f"a name from {GYMNASIUM_WRAPPERS} ({', '.join(known[:6])}, ...), or an import "
                "path package.module:Class")
            return Problem((), f"no wrapper named '{name}' in {GYMNASIUM_WRAPPERS}", hint)
        return Problem((), error.message, error.hint)
    problem = _signature_problem(name, cls, params)
    if problem is not None:
        return problem
    return WrapperSpec(name=name, class_path=path, params=params)


def _signature_problem(name: str, cls: type, params: dict[str, Any]) -> Problem | None:
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):
        return None  # a signature Python cannot read: the wrapper checks its parameters itself
    accepted = [p.name for p in list(signature.parameters.values())[1:]
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    try:
        signature.bind(None, **params)
    except TypeError as error:
        unknown = [key for key in params if key not in signature.parameters]
        hint = f"{name} takes {', '.join(accepted) or 'no parameters'}"
        if unknown and not any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values()):
            close = did_you_mean(unknown[0], accepted)
            return Problem((name, unknown[0]), f"{name} has no parameter '{unknown[0]}'",
                           f"{close} {hint}".lstrip())
        return Problem((name,), f"{name}: {error}", hint)
    return None


def _gymnasium_wrapper_names() -> list[str]:
    import gymnasium.wrappers

    return list(getattr(gymnasium.wrappers, "__all__", []))
