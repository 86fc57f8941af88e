"""The evaluation file that Script mode and Manual mode read, and its validation.

An evaluation file is YAML::

    uid: cartpole-baselines          # names the run and its telemetry file
    operators:                       # one worker subprocess each, each with its own environment
      - id: random
        type: random                 # random, passive, scripted, rl, llm, human or command
        env: CartPole-v1             # a Gymnasium id ("package.module:Env-v0" imports first)
        env_kwargs: {}               # passed to gymnasium.make
        settings: {}                 # type-specific worker settings
        command: [...]               # optional: run this program as the worker instead
    seeds: [1, 2, 3]
    episodes: 3                      # episodes per operator, in total
    environment_mode: procedural     # procedural: a new seed each episode; fixed: one seed always
    step_pacing: 0.0                 # seconds between steps; 0 = headless, as fast as possible
    max_steps: 0                     # per episode; 0 = the environment's own limit
    timeouts: {step: 10, reset: 30, stop: 5}
    telemetry: runs/                 # a directory (a new file per run) or a .jsonl file

Seeds per episode: in ``procedural`` mode episode *k* (0-based) uses ``seeds[k]``; past the end of
the list the seed is derived deterministically from the whole list and *k* (see
:meth:`EvaluationConfig.seed_for_episode`). ``episodes`` defaults to ``len(seeds)``. In ``fixed``
mode ``seeds`` holds exactly one seed, used for every episode, and ``episodes`` defaults to 1.
Every operator plays the same seed in the same episode.

``settings`` per type (every type but ``command`` also takes ``render_every``, ``render_mode``,
``send_observations`` and ``log_level``): ``passive``: ``noop_action``; ``scripted``: ``policy``
(required, ``module:function`` or ``path/file.py:function``), ``reproducible``; ``rl``:
``checkpoint`` (required); ``llm``: ``base_url`` and ``model`` (or ``model_id``) required,
``api_key_env``, ``fallback``, ``timeout``, ``temperature``, ``max_tokens``, ``system_prompt``,
``action_names``, ``keep_proxy_env``; ``human``: ``tty``, ``action_names``. A ``command`` worker
takes no settings: its options go in its ``command`` list, and the driver (not the worker)
enforces ``max_steps`` for it. Relative paths (``telemetry``, checkpoints, commands) are taken
from the working directory, not from the file's directory.

Every problem is reported as :class:`mosaic.errors.ConfigError` naming the file, the key path
(``operators[1].settings.base_url``), the line, what was expected and, for a misspelt key or
value, the closest valid one. Further problems in the same file are attached as notes
(``err.__notes__``).
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import numpy as np
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)

from mosaic.errors import ConfigError
from mosaic.operators.config import OPERATOR_TYPES

__all__ = [
    "OPERATOR_TYPES",
    "EvaluationConfig",
    "OperatorSpec",
    "TimeoutsSpec",
    "load_evaluation",
    "parse_evaluation",
]


_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"
_NAME_HINT = "use letters, digits, '_', '-' and '.', starting with a letter, digit or '_'"

Loc = tuple[str | int, ...]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class TimeoutsSpec(_Strict):
    """Seconds to wait for a worker before it is declared silent (and failed)."""

    step: Annotated[float, Field(gt=0, description="seconds to wait for each step reply")] = 10.0
    reset: Annotated[float, Field(gt=0, description="seconds to wait for a reset reply")] = 30.0
    stop: Annotated[float, Field(gt=0, description="seconds a worker gets to stop")] = 5.0


class OperatorSpec(_Strict):
    """One operator of an evaluation: a worker subprocess with its own environment instance."""

    id: Annotated[
        str, Field(pattern=_NAME_PATTERN, description="a unique name for this operator")
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
        dict[str, Any], Field(description="keyword arguments for gymnasium.make")
    ] = {}
    settings: Annotated[dict[str, Any], Field(description="type-specific worker settings")] = {}
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
        str, Field(pattern=_NAME_PATTERN, description="a name for the run, e.g. cartpole-eval")
    ]
    operators: Annotated[
        list[OperatorSpec], Field(min_length=1, description="a list of operator entries")
    ]
    seeds: Annotated[
        list[Annotated[int, Field(ge=0)]],
        Field(min_length=1, description="a list of non-negative integer seeds"),
    ]
    episodes: Annotated[
        int | None, Field(ge=1, description="episodes per operator, in total")
    ] = None
    environment_mode: Annotated[
        Literal["procedural", "fixed"],
        Field(description="procedural (a new seed each episode) or fixed (one seed always)"),
    ] = "procedural"
    step_pacing: Annotated[
        float, Field(ge=0, description="seconds between steps; 0 = as fast as possible")
    ] = 0.0
    max_steps: Annotated[int, Field(ge=0, description="steps per episode; 0 = no limit")] = 0
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

# These mirror the keys the launcher turns into worker flags (mosaic.operators.launcher), so a
# misspelt key is an error here instead of a warning in a log nobody reads.


class _CommonSettings(_Strict):
    render_every: Annotated[
        int, Field(ge=0, description="send a render frame every N steps (0 = never)")
    ] = 0
    render_mode: Annotated[
        Literal["auto", "rgb_array", "ansi"], Field(description="auto, rgb_array or ansi")
    ] = "auto"
    send_observations: bool = False
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"


class RandomSettings(_CommonSettings):
    """Settings of a ``random`` operator (actions are seeded by the episode seed)."""


class PassiveSettings(_CommonSettings):
    """Settings of a ``passive`` operator."""

    noop_action: Annotated[
        int | None, Field(ge=0, description="the action index that means 'do nothing'")
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

    checkpoint: Annotated[str, Field(min_length=1, description="path of the .npz checkpoint")]


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
    timeout: Annotated[float | None, Field(gt=0, description="seconds per request")] = None
    temperature: Annotated[float | None, Field(ge=0)] = None
    max_tokens: Annotated[int | None, Field(gt=0)] = None
    system_prompt: str | None = None
    action_names: list[str] | None = None
    keep_proxy_env: bool = False

    @model_validator(mode="after")
    def _needs_a_model(self) -> LlmSettings:
        if self.model is None and self.model_id is None:
            raise ValueError("an llm operator needs settings.model (or model_id)")
        return self


class HumanSettings(_CommonSettings):
    """Settings of a ``human`` operator."""

    tty: Annotated[str | None, Field(min_length=1, description="the terminal device")] = None
    action_names: list[str] | None = None


class CommandSettings(_Strict):
    """A ``command`` worker gets no settings: its options belong in its command list."""


#: Settings models by operator type.
_SETTINGS_MODELS: dict[str, type[BaseModel]] = {
    "random": RandomSettings,
    "passive": PassiveSettings,
    "scripted": ScriptedSettings,
    "rl": RlSettings,
    "llm": LlmSettings,
    "human": HumanSettings,
    "command": CommandSettings,
}

#: Why some keys are not settings, for the hint.
_MISPLACED_SETTINGS = {
    "env_kwargs": "env_kwargs belongs in the operator entry itself, next to env",
    "seed": "seeds come from the top-level seeds list",
    "episodes": "episodes is a top-level key",
    "max_steps": "max_steps is a top-level key",
    "n_actions": "n_actions is for agent-mode workers; here the worker owns its environment",
}


# -- YAML loading with positions and duplicate keys ------------------------------------------


@dataclass(frozen=True)
class _Position:
    key_line: int | None
    line: int
    column: int


class _Problem(typing.NamedTuple):
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


def _walk_nodes(
    node: yaml.Node,
    loc: Loc,
    positions: dict[Loc, _Position],
    problems: list[_Problem],
    key_line: int | None,
    stack: set[int],
) -> None:
    positions[loc] = _Position(key_line, node.start_mark.line + 1, node.start_mark.column + 1)
    if id(node) in stack:  # a recursive alias: stop here
        return
    stack.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.value == "<<":
                continue
            key = key_node.value
            line = key_node.start_mark.line + 1
            if key in seen:
                problems.append(
                    _Problem(
                        loc + (key,),
                        f"duplicate key {key!r} (line {line}; first at line {seen[key]})",
                        "remove one of them: YAML keeps only the last, silently",
                        on_key=True,
                    )
                )
                continue
            seen[key] = line
            _walk_nodes(value_node, loc + (key,), positions, problems, line, stack)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk_nodes(item, loc + (index,), positions, problems, None, stack)
    stack.discard(id(node))


def _load_yaml(text: str, source: str) -> tuple[Any, dict[Loc, _Position], list[_Problem]]:
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        positions: dict[Loc, _Position] = {}
        problems: list[_Problem] = []
        if node is None:
            return None, positions, problems
        _walk_nodes(node, (), positions, problems, None, set())
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        what = exc.problem or str(exc)
        if exc.context:
            what += f" ({exc.context})"
        raise ConfigError(
            source, "", f"YAML syntax error at {where}{what}",
            "check the indentation and quoting there",
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(source, "", f"YAML error: {exc}") from None
    finally:
        loader.dispose()
    return data, positions, problems


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


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    if not close:
        lowered = {choice.lower(): choice for choice in choices}
        if word.lower() in lowered:
            close = [lowered[word.lower()]]
    return f"did you mean {close[0]!r}?" if close else ""


def _yaml_type(value: Any) -> str:
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


def _problem_from_pydantic(
    error: Mapping[str, Any], root: type[BaseModel], prefix: Loc
) -> _Problem:
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
            hint = _did_you_mean(str(key), allowed) or _MISPLACED_SETTINGS.get(str(key), "") or (
                "allowed keys: " + ", ".join(allowed) if allowed else ""
            )
        return _Problem(full, f"unknown key {key!r}", hint, on_key=True)
    if kind == "missing":
        hint = f"add {key}: {described}" if described else f"add {key}"
        return _Problem(full, "required key is missing", hint)
    if kind == "literal_error":
        expected = error.get("ctx", {}).get("expected", "")
        choices = [c.strip().strip("'") for c in expected.replace(" or ", ", ").split(",")]
        hint = ""
        if isinstance(value, str):
            hint = _did_you_mean(value, [c for c in choices if c])
        return _Problem(full, f"expected one of {expected}, got {_shown(value)}", hint)
    if kind == "string_pattern_mismatch":
        if error.get("ctx", {}).get("pattern") == _NAME_PATTERN:
            return _Problem(full, f"{_shown(value)} is not a valid name", _NAME_HINT)
        return _Problem(full, f"expected {described or 'another format'}, got {_shown(value)}", "")
    if kind in _EXPECTED_TYPES:
        expected = _EXPECTED_TYPES[kind]
        return _Problem(full, f"expected {expected}, got {_yaml_type(value)} {_shown(value)}", "")
    ctx = error.get("ctx", {})
    if kind in _BOUNDS:
        bound = ctx.get(_BOUNDS[kind][1])
        about = f" ({described})" if described else ""
        expected = f"a value {_BOUNDS[kind][0]} {bound}{about}"
        return _Problem(full, f"expected {expected}, got {_shown(value)}", "")
    if kind in ("too_short", "string_too_short"):
        what = "character" if kind == "string_too_short" else "item"
        count = ctx.get("min_length", 1)
        plural = "s" if count != 1 else ""
        about = f" ({described})" if described else ""
        return _Problem(full, f"expected at least {count} {what}{plural}{about}", "")
    if kind == "value_error":
        message = str(error.get("msg", "")).removeprefix("Value error, ")
        return _Problem(full, message, "")
    message = str(error.get("msg", kind))
    message = message[:1].lower() + message[1:]
    if described:
        message = f"{message} ({described})"
    return _Problem(full, f"{message}, got {_shown(value)}", "")


def _config_error(
    source: str, problems: list[_Problem], positions: dict[Loc, _Position]
) -> ConfigError:
    def one(problem: _Problem) -> ConfigError:
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

    def line_of(problem: _Problem) -> int:
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


# -- checks that need more than one field ----------------------------------------------------


def _env_problem(env_id: str) -> tuple[str, str] | None:
    if ":" in env_id:  # "package.module:Env-v0": gymnasium.make imports the module first
        return None
    from gymnasium.envs.registration import registry

    if env_id in registry:
        return None
    hint = _did_you_mean(env_id, list(registry))
    return (
        f"{env_id!r} is not a registered Gymnasium environment",
        hint or "use a registered id, or 'package.module:EnvId' to import the package first",
    )


def _semantic_problems(config: EvaluationConfig) -> list[_Problem]:
    problems: list[_Problem] = []
    first_index: dict[str, int] = {}
    for index, operator in enumerate(config.operators):
        at: Loc = ("operators", index)
        if operator.id in first_index:
            problems.append(
                _Problem(
                    at + ("id",),
                    f"duplicate operator id {operator.id!r} "
                    f"(also operators[{first_index[operator.id]}])",
                    "give every operator its own id",
                )
            )
        first_index.setdefault(operator.id, index)
        if operator.type == "command" and operator.command is None:
            problems.append(
                _Problem(
                    at + ("command",),
                    "required for type 'command'",
                    "give the worker program and its arguments, e.g. [python, my_worker.py]",
                )
            )
        env = _env_problem(operator.env)
        if env is not None:
            problems.append(_Problem(at + ("env",), env[0], env[1]))
        settings_model = _SETTINGS_MODELS.get(operator.type)
        if settings_model is not None:
            try:
                settings_model.model_validate(operator.settings)
            except ValidationError as exc:
                for error in exc.errors():
                    problems.append(
                        _problem_from_pydantic(error, settings_model, at + ("settings",))
                    )
    if config.environment_mode == "fixed" and len(config.seeds) != 1:
        problems.append(
            _Problem(
                ("seeds",),
                f"fixed mode plays one seed in every episode, but {len(config.seeds)} are given",
                "give one seed, or use environment_mode: procedural",
            )
        )
    return problems


# -- public entry points ---------------------------------------------------------------------


def parse_evaluation(
    data: Any, source: str = "<memory>", *, _positions: dict[Loc, _Position] | None = None
) -> EvaluationConfig:
    """Validate already-parsed data; ``ConfigError`` (naming ``source``) on the first problem.

    Every further problem is attached as a note on that error.
    """
    positions = _positions or {}
    if data is None:
        raise ConfigError(source, "", "the file is empty", "start with uid:, operators: and seeds:")
    if not isinstance(data, dict):
        raise ConfigError(
            source, "", f"expected a mapping at the top level, got {_yaml_type(data)}",
            "start with uid:, operators: and seeds:",
        )
    if "operators" not in data and ("agents" in data or "environments" in data):
        raise ConfigError(
            source,
            "",
            "this is not an evaluation file: it has agents/environments but no operators",
            "an experiment file runs with 'mosaic experiment-start'; an evaluation file has "
            "uid, operators and seeds",
        )
    try:
        config = EvaluationConfig.model_validate(data)
    except ValidationError as exc:
        problems = [_problem_from_pydantic(e, EvaluationConfig, ()) for e in exc.errors()]
        raise _config_error(source, problems, positions) from None
    problems = _semantic_problems(config)
    if problems:
        raise _config_error(source, problems, positions)
    config._source = source
    return config


def load_evaluation(path: str | Path) -> EvaluationConfig:
    """Read and validate the evaluation file at ``path``.

    Raises ``ConfigError`` when the file cannot be read, is not valid YAML (with line and
    column), repeats a key, or does not match the schema.
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(source, "", f"cannot read the file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(source, "", f"the file is not UTF-8 text: {exc.reason}") from None
    data, positions, problems = _load_yaml(text, source)
    if problems:
        raise _config_error(source, problems, positions)
    return parse_evaluation(data, source, _positions=positions)
