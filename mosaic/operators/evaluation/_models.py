"""The pydantic models of an evaluation file: strict, frozen, and one per operator type's settings.

:mod:`mosaic.operators.evaluation.schema` describes the file and validates it with these models.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    model_validator,
)

from mosaic.core.config_problems import Problem, raise_problems
from mosaic.operators.api.config import OPERATOR_TYPES

NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"
_NAME = "made of letters, digits, '_', '-' and '.', starting with a letter, digit or '_'"


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class TimeoutsSpec(_Strict):
    """Seconds to wait for a worker before it is declared silent (and failed)."""

    step: Annotated[float, Field(gt=0, description="a number > 0 (seconds per step reply)")] = 10.0
    reset: Annotated[float, Field(gt=0, description="a number > 0 (seconds per reset)")] = 30.0
    stop: Annotated[float, Field(gt=0, description="a number > 0 (seconds to stop)")] = 5.0


class OperatorSpec(_Strict):
    """One operator of an evaluation: a worker subprocess with its own environment instance."""

    id: Annotated[
        str, Field(pattern=NAME_PATTERN, description=f"a unique operator id {_NAME}")
    ]
    type: Annotated[
        Literal["random", "passive", "scripted", "rl", "llm", "human", "command"],
        Field(description="one of " + ", ".join(OPERATOR_TYPES)),
    ]
    env: Annotated[
        str, Field(min_length=1, description="a Gymnasium environment id, e.g. CartPole-v1")
    ]
    display_name: str | None = None
    env_kwargs: Annotated[
        dict[str, Any], Field(description="a mapping of keyword arguments for gymnasium.make")
    ] = {}
    settings: Annotated[
        dict[str, Any], Field(description="a mapping of type-specific worker settings")
    ] = {}
    command: Annotated[
        list[str] | None,
        Field(min_length=1, description="the worker program and its arguments, as a list"),
    ] = None

    @property
    def label(self) -> str:
        """``display_name``, or the id when there is none."""
        return self.display_name or self.id


class EvaluationConfig(_Strict):
    """A validated evaluation file. Build it with :func:`load_evaluation`."""

    uid: Annotated[
        str, Field(pattern=NAME_PATTERN, description=f"a run name {_NAME}, e.g. cartpole-eval")
    ]
    operators: Annotated[
        list[OperatorSpec], Field(min_length=1, description="a list of operator entries")
    ]
    seeds: Annotated[
        list[Annotated[int, Field(ge=0)]],
        Field(min_length=1, description="a list of seeds, each a whole number >= 0"),
    ]
    episodes: Annotated[
        int | None, Field(ge=1, description="a whole number >= 1 (episodes per operator)")
    ] = None
    environment_mode: Annotated[
        Literal["procedural", "fixed"],
        Field(description="procedural (a new seed each episode) or fixed (one seed always)"),
    ] = "procedural"
    step_pacing: Annotated[
        float, Field(ge=0, description="a number >= 0 (seconds between steps; 0: no pause)")
    ] = 0.0
    max_steps: Annotated[
        int, Field(ge=0, description="a whole number >= 0 (steps per episode; 0: no limit)")
    ] = 0
    timeouts: TimeoutsSpec = TimeoutsSpec()
    telemetry: Annotated[
        str | None, Field(min_length=1, description="a directory or a .jsonl file path")
    ] = None
    _source: str = PrivateAttr(default="<memory>")

    @property
    def source(self) -> str:
        """The file this configuration was read from (``<memory>`` when built from data)."""
        return self._source

    @property
    def episode_count(self) -> int:
        """Episodes per operator: ``episodes``, or its default for the mode."""
        if self.episodes is not None:
            return self.episodes
        return len(self.seeds) if self.environment_mode == "procedural" else 1

    def seed_for_episode(self, episode_index: int) -> int:
        """The reset seed of episode ``episode_index`` (0-based), the same for every operator.

        ``fixed``: always ``seeds[0]``. ``procedural``: ``seeds[k]`` while the list lasts, then a
        seed derived from the whole list and ``k`` with NumPy's ``SeedSequence`` (stable across
        platforms and NumPy versions), so longer runs stay reproducible.
        """
        if episode_index < 0:
            raise ValueError(f"episode_index must be >= 0, got {episode_index}")
        if self.environment_mode == "fixed":
            return self.seeds[0]
        if episode_index < len(self.seeds):
            return self.seeds[episode_index]
        sequence = np.random.SeedSequence(entropy=list(self.seeds), spawn_key=(episode_index,))
        return int(sequence.generate_state(1, dtype=np.uint32)[0])

    def episode_seeds(self) -> list[int]:
        """The seed of every episode, in order."""
        return [self.seed_for_episode(k) for k in range(self.episode_count)]


# -- type-specific settings ------------------------------------------------------------------

# These mirror the keys the launcher turns into worker flags (mosaic.operators.driver.launcher), so
# a misspelt key is an error here instead of a warning in a log nobody reads.

#: Why some keys are not settings, for the hint.
_MISPLACED_SETTINGS = {
    "env_kwargs": "env_kwargs belongs in the operator entry itself, next to env",
    "seed": "seeds come from the top-level seeds list",
    "episodes": "episodes is a top-level key",
    "max_steps": "max_steps is a top-level key",
    "n_actions": "n_actions is for agent-mode workers; here the worker owns its environment",
}


class _CommonSettings(_Strict):
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
    """Settings of a ``random`` operator (actions are seeded by the episode seed)."""


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
    """Settings of an ``llm`` operator (an OpenAI-compatible endpoint)."""

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
        float | None, Field(gt=0, description="a number > 0 (seconds per request)")
    ] = None
    temperature: Annotated[float | None, Field(ge=0)] = None
    max_tokens: Annotated[int | None, Field(gt=0)] = None
    system_prompt: str | None = None
    action_names: list[str] | None = None
    keep_proxy_env: bool = False

    @model_validator(mode="after")
    def _needs_a_model(self) -> LlmSettings:
        if self.model is None and self.model_id is None:
            raise_problems(Problem((), "an llm operator needs settings.model (or model_id)"))
        return self


class HumanSettings(_CommonSettings):
    """Settings of a ``human`` operator."""

    tty: Annotated[str | None, Field(min_length=1, description="the terminal device")] = None
    action_names: list[str] | None = None


class CommandSettings(_Strict):
    """A ``command`` worker gets no settings: its options belong in its command list."""

    @classmethod
    def unknown_key_hint(cls, key: str) -> str:
        """Every key: a command worker takes its options on its command line."""
        return "a command worker gets no settings: put its options in the command list"


#: Settings models by operator type.
SETTINGS_MODELS: dict[str, type[BaseModel]] = {
    "random": RandomSettings,
    "passive": PassiveSettings,
    "scripted": ScriptedSettings,
    "rl": RlSettings,
    "llm": LlmSettings,
    "human": HumanSettings,
    "command": CommandSettings,
}
