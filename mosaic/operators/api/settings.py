"""The ``settings`` of a worker operator, one strict pydantic model per operator type.

A worker's settings are written in an evaluation file (``operators[i].settings``) or in an
experiment's :class:`~mosaic.operators.OperatorMuscle` params (``operator.settings``); both are
checked with :data:`SETTINGS_MODELS`. The models mirror the keys the launcher turns into worker
flags (:mod:`mosaic.operators.driver.launcher`), so a misspelt key is an error when the file is
checked instead of a warning in a log nobody reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, model_validator

from mosaic.core.config_problems import Problem, StrictModel, raise_problems
from mosaic.operators.api.llm_routing import LLM_WORKERS

__all__ = [
    "SETTINGS_MODELS",
    "BdiSettings",
    "CommandSettings",
    "HumanSettings",
    "LlmSettings",
    "PassiveSettings",
    "RandomSettings",
    "RlSettings",
    "ScriptedSettings",
]

#: Why some keys of an evaluation file's operator entry are not settings, for the hint.
_MISPLACED_SETTINGS = {
    "env_kwargs": "env_kwargs belongs in the operator entry itself, next to env",
    "seed": "episode seeds come from the top-level seeds list, and each operator's own seed "
            "from the top-level seed and its position",
    "episodes": "episodes is a top-level key",
    "max_steps": "max_steps is a top-level key",
    "n_actions": "n_actions is for agent-mode workers; here the worker owns its environment",
}


if TYPE_CHECKING:
    LlmWorkerChoice = str
else:  # the choices of an llm operator's settings.worker: auto, or a worker of llm_routing
    LlmWorkerChoice = Literal[("auto", *LLM_WORKERS)]


def _or_list(names: Iterable[str]) -> str:
    """``"a, b or c"``."""
    *rest, last = names
    return f"{', '.join(rest)} or {last}" if rest else last


class _CommonSettings(StrictModel):
    render_every: Annotated[
        int, Field(ge=0, description="a whole number >= 0 (a render frame every N steps; 0: none)")
    ] = 0
    render_mode: Annotated[
        Literal["auto", "rgb_array", "ansi"], Field(description="auto, rgb_array or ansi")
    ] = "auto"
    send_observations: bool = False
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"

    @classmethod
    def unknown_key_hint(cls, key: str) -> str:
        """Where ``key``, not a setting, belongs instead (``""`` when nothing is known)."""
        return _MISPLACED_SETTINGS.get(key, "")


class RandomSettings(_CommonSettings):
    """Settings of a ``random`` operator (actions come from the operator's own seed stream)."""


class PassiveSettings(_CommonSettings):
    """Settings of a ``passive`` operator."""

    noop_action: Annotated[
        int | None, Field(ge=0, description="a whole number >= 0 (the no-op action's index)")
    ] = None


class ScriptedSettings(_CommonSettings):
    """Settings of a ``scripted`` operator."""

    policy: Annotated[
        str,
        Field(
            pattern=r"^[^:]+:[A-Za-z_][A-Za-z0-9_]*$",
            description="package.module:function or path/to/file.py:function",
        ),
    ]
    reproducible: bool = False


class RlSettings(_CommonSettings):
    """Settings of an ``rl`` operator."""

    checkpoint: Annotated[str, Field(min_length=1, description="the path of a .npz checkpoint")]


class LlmSettings(_CommonSettings):
    """Settings of an ``llm`` operator (an OpenAI-compatible endpoint); ``worker`` chooses its
    worker (:mod:`mosaic.operators.api.llm_routing`), ``move_retries`` and ``notation`` are the
    chess worker's."""

    base_url: Annotated[
        str,
        Field(pattern=r"^https?://\S+$", description="the endpoint, e.g. http://127.0.0.1:8000/v1"),
    ]
    model: Annotated[str | None, Field(min_length=1, description="the model name")] = None
    model_id: Annotated[str | None, Field(min_length=1, description="the model name")] = None
    api_key_env: Annotated[
        str | None, Field(min_length=1, description="the environment variable holding the key")
    ] = None
    fallback: Literal["random", "first-legal", "noop"] | None = None
    timeout: Annotated[
        float | None, Field(gt=0, description="a number > 0 (seconds per action, retries included)")
    ] = None
    max_retries: Annotated[
        int | None, Field(ge=0, description="a whole number >= 0 (retries after HTTP 429, 5xx or "
                                            "a failed connection)")
    ] = None
    retry_backoff: Annotated[
        float | None, Field(ge=0, description="a number >= 0 (seconds before the first retry)")
    ] = None
    temperature: Annotated[float | None, Field(ge=0)] = None
    max_tokens: Annotated[int | None, Field(gt=0)] = None
    system_prompt: str | None = None
    action_names: list[str] | None = None
    keep_proxy_env: bool = False
    worker: Annotated[
        LlmWorkerChoice,
        Field(description="auto (chosen from the game), " + _or_list(LLM_WORKERS)),
    ] = "auto"
    move_retries: Annotated[
        int | None, Field(ge=0, description="a whole number >= 0 (chess: illegal or unreadable "
                                            "moves asked again before the fallback)")
    ] = None
    notation: Literal["san", "uci"] | None = None

    @model_validator(mode="after")
    def _needs_a_model(self) -> LlmSettings:
        if self.model is None and self.model_id is None:
            raise_problems(Problem((), "an llm operator needs settings.model (or model_id)"))
        return self


class BdiSettings(_CommonSettings):
    """Settings of a ``bdi`` operator (:mod:`mosaic.operators.bdi`); the plan library is read
    and checked here, so that an error in it is reported with its file and line when the
    file that names it is checked."""

    plan_library: Annotated[
        str, Field(min_length=1, description="the path of an AgentSpeak .asl file")
    ]
    action_names: list[str] | None = None
    max_cycles: Annotated[
        int | None, Field(ge=1, description="a whole number >= 1 (reasoning cycles per step "
                                            "before the fallback)")
    ] = None
    fallback: Literal["noop", "first-legal", "random"] = "noop"

    @model_validator(mode="after")
    def _readable_plan_library(self) -> BdiSettings:
        try:
            from mosaic.operators.bdi import load_plan_library
        except ImportError as error:  # MissingExtra names the extra
            raise_problems(Problem(("plan_library",), str(error)))
        try:
            load_plan_library(self.plan_library)
        except ValueError as error:  # PlanLibraryError: the file, line and message
            in_file = getattr(error, "line", None) is not None
            raise_problems(Problem(("plan_library",), str(error),
                                   "fix the plan library (AgentSpeak, as the agentspeak package "
                                   "reads it)" if in_file else "check the path"))
        return self


class HumanSettings(_CommonSettings):
    """Settings of a ``human`` operator."""

    tty: Annotated[str | None, Field(min_length=1, description="the terminal device")] = None
    action_names: list[str] | None = None


class CommandSettings(StrictModel):
    """A ``command`` worker gets no settings: its options belong in its command list."""

    @classmethod
    def unknown_key_hint(cls, key: str) -> str:
        """Every key: a command worker takes its options on its command line."""
        return "a command worker gets no settings: put its options in the command list"


#: Settings models by operator type.
SETTINGS_MODELS: dict[str, type[StrictModel]] = {
    "random": RandomSettings,
    "passive": PassiveSettings,
    "scripted": ScriptedSettings,
    "rl": RlSettings,
    "llm": LlmSettings,
    "bdi": BdiSettings,
    "human": HumanSettings,
    "command": CommandSettings,
}
