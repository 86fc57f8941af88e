"""The ``params`` of :class:`~mosaic.operators.OperatorMuscle`, as pydantic models.

:mod:`mosaic.operators.muscle` says what each key means. The params are checked twice with these
models: when the experiment file is loaded (``OperatorMuscle.params_model``), so that a bad
operator is reported with the file, line and key path before anything starts, and again by
``OperatorMuscle.setup`` (:func:`check_params`), since params reach a muscle as plain data.
Problems are worded by the one config pipeline (:mod:`mosaic.core.config_problems`).

The models check the shape of the params only; what ``class`` and ``function`` name is imported
when the muscle is set up. A worker's ``settings`` are checked with the evaluation file's settings
models of its type (:mod:`mosaic.operators.api.kinds`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from mosaic.core.config_problems import (
    Problem,
    StrictModel,
    config_error,
    describe_value,
    did_you_mean,
    raise_if_any,
    raise_problems,
    validate,
)
from mosaic.core.errors import MosaicError
from mosaic.operators.api.config import OPERATOR_TYPES
from mosaic.operators.api.kinds import operator_kinds, settings_problems, type_problems
from mosaic.operators.api.llm_routing import llm_worker_problems
from mosaic.operators.api.operator import BUILTIN_OPERATORS
from mosaic.operators.llm_accounting import DEFAULT_MAX_FALLBACK_FRACTION

__all__ = [
    "DEFAULT_LLM_TIMEOUT_S",
    "DEFAULT_START_TIMEOUT_S",
    "DEFAULT_STOP_TIMEOUT_S",
    "DEFAULT_TIMEOUT_S",
    "InProcessSpec",
    "OperatorMuscleParams",
    "WorkerSpec",
    "check_params",
]

#: Seconds per operator call, unless ``params.timeout`` says otherwise (LLM workers: below).
DEFAULT_TIMEOUT_S = 10.0
#: Seconds per call of an ``llm`` worker: one chat completion per action.
DEFAULT_LLM_TIMEOUT_S = 30.0
#: Seconds to start a worker and receive its ``agent_ready``.
DEFAULT_START_TIMEOUT_S = 10.0
#: Seconds to stop a worker (stop command, EOF, SIGTERM, SIGKILL; see the handle's ``stop``).
DEFAULT_STOP_TIMEOUT_S = 3.0
_CLASS = f"{', '.join(BUILTIN_OPERATORS)} or an import path 'package.module:Factory'"
_FORMS = (
    f"class: {' | '.join(BUILTIN_OPERATORS)} | package.module:Factory (in process), or "
    f"type: {' | '.join(OPERATOR_TYPES)} (a worker subprocess)"
)
#: Settings the launcher knows that an agent's worker does not use, and why, for the hint (the
#: evaluation file's own hints speak of a worker that owns its environment).
_NOT_AGENT_SETTINGS = {
    "env_kwargs": "the worker plays the experiment's environment; its keyword arguments are "
    "the environment's params",
    "n_actions": "the muscle tells the worker the number of actions of its slot",
    "seed": "the muscle seeds the worker at every reset, from the run seed",
    "episodes": "episodes is a key of the experiment",
    "max_steps": "max_steps is a key of the experiment",
}

Seconds = Annotated[float, Field(gt=0, description="a number of seconds > 0")]


def _one_of(value: str, choices: Sequence[str], expected: str) -> None:
    if value not in choices:
        raise_problems(Problem((), f"expected {expected}, got {describe_value(value)}",
                               did_you_mean(value, choices)))


def _goes_with(key: str, given: bool, form: str, chosen: str, owner: str,
               expected: str) -> list[Problem]:
    """``key`` must be given with ``form: owner``, and only then (``form`` is ``chosen``)."""
    if given == (chosen == owner):
        return []
    if given:
        return [Problem((key,), f"{key} goes with {form} '{owner}' only, not with {chosen!r}",
                        f"remove it, or set {form}: {owner}")]
    return [Problem((key,), f"required key is missing for {form} '{owner}'; expected {expected}")]


class _OperatorSpec(StrictModel):
    """What both forms take: ``id`` (default: the agent's uid) and ``name`` (default: the id).

    Filled in by :meth:`named`: until then an ``id`` left out is ``""``.
    """

    id: str = Field(default="", min_length=1, description="a non-empty text")
    name: str = Field(default="", description="a text")

    #: The keys of the other form, which a user may have mixed in.
    other_form: ClassVar[tuple[str, str, frozenset[str]]]

    @classmethod
    def unknown_key_hint(cls, key: str) -> str:
        """A key of the other form: say which form takes it."""
        with_key, form, keys = cls.other_form
        return f"'{key}' goes with '{with_key}' ({form}), not here" if key in keys else ""

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        raise_if_any(self._problems())
        return self

    def _problems(self) -> list[Problem]:
        """What the keys say about each other, once each has a valid value."""
        return []

    def named(self, agent: str) -> Self:
        """This spec with ``id`` and ``name`` filled in for the agent ``agent``."""
        operator_id = self.id or agent
        name = self.name if "name" in self.model_fields_set else operator_id
        return self.model_copy(update={"id": operator_id, "name": name})


class InProcessSpec(_OperatorSpec):
    """``params.operator`` with ``class``: an operator built in the muscle's own thread."""

    expected: ClassVar[str] = "a mapping with 'class'"
    other_form: ClassVar[tuple[str, str, frozenset[str]]] = (
        "type", "a worker operator", frozenset({"type", "settings", "command", "task", "env_name"})
    )

    class_: str = Field(alias="class", description=_CLASS)
    params: dict[str, Any] | None = Field(
        default=None, description="a mapping of keyword arguments for the factory"
    )
    function: str | None = Field(default=None, description="an import path 'package.module:fn'")

    @field_validator("class_")
    @classmethod
    def _known(cls, target: str) -> str:
        if ":" not in target:
            _one_of(target, tuple(BUILTIN_OPERATORS), _CLASS)
        return target

    def _problems(self) -> list[Problem]:
        problems = _goes_with("function", self.function is not None, "class", self.class_,
                              "scripted", "an import path 'package.module:fn'")
        if self.class_ in BUILTIN_OPERATORS and self.params:
            problems.append(Problem(("params",), f"the built-in {self.class_!r} operator takes "
                                    "no params", "remove them, or name a factory of your own"))
        return problems

    @property
    def description(self) -> str:
        """How errors name this operator: ``in-process <class>``."""
        return f"in-process {self.class_}"


class WorkerSpec(_OperatorSpec):
    """``params.operator`` with ``type``: an operator in a worker subprocess."""

    expected: ClassVar[str] = "a mapping with 'type'"
    other_form: ClassVar[tuple[str, str, frozenset[str]]] = (
        "class", "an in-process operator", frozenset({"class", "params", "function"})
    )

    type: str = Field(description="one of " + ", ".join(OPERATOR_TYPES))
    settings: dict[str, Any] | None = Field(
        default=None, description="a mapping of the worker's settings"
    )
    command: Annotated[list[str], Field(min_length=1)] | None = Field(
        default=None, description="the worker program and its arguments, as a list"
    )
    task: str | None = Field(default=None, description="a text, e.g. FrozenLake-v1")
    env_name: str | None = Field(default=None, description="a text")

    @field_validator("type")
    @classmethod
    def _known(cls, kind: str) -> str:
        raise_if_any(type_problems(kind, ()))
        return kind

    def _problems(self) -> list[Problem]:
        problems = [*_goes_with("command", self.command is not None, "type", self.type,
                                "command", "the worker program and its arguments, as a list"),
                    *_settings_problems(self.type, self.settings or {})]
        if self.type == "llm" and not problems:
            problems += llm_worker_problems(self.settings or {}, ("settings",), self.task,
                                            self.env_name)
        return problems

    @property
    def description(self) -> str:
        """How errors name this operator: ``<type> worker``."""
        return f"{self.type} worker"


def _settings_problems(kind: str, settings: dict[str, Any]) -> list[Problem]:
    known = operator_kinds()[kind]
    model = known.settings_model() if known.builtin else None  # a plug-in's: imported below
    fields = model.model_fields if model is not None else {}
    return [
        dataclasses.replace(problem, hint=_NOT_AGENT_SETTINGS[problem.loc[1]])
        if len(problem.loc) == 2 and problem.loc[1] in _NOT_AGENT_SETTINGS
        and problem.loc[1] not in fields  # so the problem is an unknown key
        else problem
        for problem in settings_problems(kind, settings, ("settings",))
    ]


class OperatorMuscleParams(BaseModel):
    """An OperatorMuscle's ``params``; keys it does not know are left to the agent's brain."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    expected: ClassVar[str] = "a mapping with 'operator'"

    operator: InProcessSpec | WorkerSpec = Field(
        description="a mapping with 'class' (an in-process operator) or 'type' (a worker "
        "operator)"
    )
    timeout: Seconds = DEFAULT_TIMEOUT_S
    start_timeout: Seconds = DEFAULT_START_TIMEOUT_S
    stop_timeout: Seconds = DEFAULT_STOP_TIMEOUT_S
    noop_action: Any = None
    max_fallback_fraction: Annotated[
        float, Field(ge=0, le=1, description="a number from 0 to 1 (the share of actions that "
                                             "may come from an LLM worker's fallback)"),
    ] = DEFAULT_MAX_FALLBACK_FRACTION

    @model_validator(mode="before")
    @classmethod
    def _llm_timeout(cls, data: Any) -> Any:
        operator = data.get("operator") if isinstance(data, dict) else None
        if isinstance(operator, dict) and operator.get("type") == "llm" and "timeout" not in data:
            return {**data, "timeout": DEFAULT_LLM_TIMEOUT_S}
        return data

    @field_validator("operator", mode="plain")
    @classmethod
    def _one_form(cls, raw: Any) -> InProcessSpec | WorkerSpec:
        if isinstance(raw, str):
            raw = {"class": raw}
        if not isinstance(raw, dict):
            raise_problems(Problem(
                (), f"expected a mapping with 'class' or 'type', got {describe_value(raw)}",
                _FORMS))
        if ("class" in raw) == ("type" in raw):
            found = "both" if "class" in raw else "neither"
            raise_problems(Problem(
                (), f"expected exactly one of 'class' (an in-process operator) and 'type' "
                f"(a worker operator), got {found}", _FORMS))
        spec: InProcessSpec | WorkerSpec | None
        if "class" in raw:
            spec, problems = validate(InProcessSpec, raw)
        else:
            spec, problems = validate(WorkerSpec, raw)
        if spec is None:
            raise_problems(*problems)
        return spec

    @property
    def has_noop(self) -> bool:
        """Whether ``noop_action`` is given (``None`` too is an action the user may choose)."""
        return "noop_action" in self.model_fields_set


def check_params(params: Mapping[str, Any], agent: str, source: str) -> OperatorMuscleParams:
    """``params`` checked, with the operator's ``id`` and ``name`` filled in for ``agent``.

    Raises :class:`~mosaic.core.errors.MosaicError` listing every problem, one per line, worded
    as when the experiment file is loaded: ``<source>: params.operator.type: expected ...``.
    """
    checked, problems = validate(OperatorMuscleParams, dict(params), ("params",))
    if checked is None:
        raise MosaicError(str(config_error(source, problems, {})))
    return checked.model_copy(update={"operator": checked.operator.named(agent)})
