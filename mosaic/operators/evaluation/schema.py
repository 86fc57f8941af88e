"""The evaluation file that Script mode and Manual mode read, and its validation.

An evaluation file is YAML::

    uid: cartpole-baselines          # names the run and its telemetry file
    operators:                       # one worker subprocess each, each with its own environment
      - id: random
        type: random                 # random, passive, scripted, rl, llm, bdi, human or command
        env: CartPole-v1             # a Gymnasium id ("package.module:Env-v0" imports first)
        env_kwargs: {}               # passed to gymnasium.make
        settings: {}                 # type-specific worker settings
        command: [...]               # optional: run this program as the worker instead
    seeds: [1, 2, 3]
    seed: 0                          # the operators' own seeds come from it (default: from seeds)
    episodes: 3                      # episodes per operator, in total
    environment_mode: procedural     # procedural: a new seed each episode; fixed: one seed always
    step_pacing: 0.0                 # seconds between steps; 0 = headless, as fast as possible
    max_steps: 0                     # per episode; 0 = the environment's own limit
    timeouts: {step: 10, reset: 30, stop: 5}
    max_fallback_fraction: 0.5       # an LLM operator with more fallback actions fails
    telemetry: runs/                 # a directory (a new file per run) or a .jsonl file

A game (a PettingZoo environment with several players) is an operator with ``players`` in
place of ``type``, ``settings`` and ``command``; the driver owns the game, and each player's
worker (operator ``<id>.<player>``, one process each) only chooses that player's actions::

      - id: duel
        env: pettingzoo:classic.chess_v6   # as an experiment names it; env_kwargs as above
        players:                           # every player of the game, none other
          player_0: {type: llm, display_name: White, settings: {...}}
          player_1: {type: random}

Each player takes what an operator takes (``type``, ``display_name``, ``settings``,
``command``). The game is built once when the file is checked: a player it does not have, or one
of its players without an entry, is an error at its key; so is ``type`` beside ``players``, and a
``pettingzoo:`` game with a ``type``. Each player's own seed is derived from its operator's
(``operator_seed``) and its position among the players. See :mod:`._game` for how a game is
played.

Seeds per episode: in ``procedural`` mode episode *k* (0-based) uses ``seeds[k]``; past the end of
the list the seed is derived deterministically from the whole list and *k* (see
:meth:`EvaluationConfig.seed_for_episode`). ``episodes`` defaults to ``len(seeds)``. In ``fixed``
mode ``seeds`` holds exactly one seed, used for every episode, and ``episodes`` defaults to 1.
Every operator plays the same seed in the same episode. Its actions, though, come from its own
seed stream: operator *i* gets the seed ``operator_seed(seed, i)`` (:mod:`mosaic.core.seeding`;
``seed`` defaults to one derived from ``seeds``), passed to its worker as ``--seed``.

``settings`` per type (every type but ``command`` also takes ``render_every``, ``render_mode``,
``send_observations`` and ``log_level``): ``passive``: ``noop_action``; ``scripted``: ``policy``
(required, ``module:function`` or ``path/file.py:function``), ``reproducible``; ``rl``:
``checkpoint`` (required); ``llm``: ``base_url`` and ``model`` (or ``model_id``) required,
``api_key_env``, ``fallback``, ``timeout``, ``max_retries``, ``retry_backoff``, ``temperature``,
``max_tokens``, ``system_prompt``, ``action_names``, ``keep_proxy_env``, ``worker`` (``auto``:
the worker of ``env``, or ``llm``, ``chess``, ``balrog``, ``vlm``; see
:mod:`mosaic.operators.api.llm_routing`), ``move_retries``, ``notation``; ``bdi``:
``plan_library`` (required, an AgentSpeak ``.asl`` file, read from the working directory else
beside the file), ``action_names``, ``max_cycles``, ``fallback``; ``human``: ``tty``,
``action_names``. A ``command`` worker
takes no settings: its options go in its ``command`` list, and the driver (not the worker)
enforces ``max_steps`` for it. A relative ``telemetry`` path (and the default
``mosaic-telemetry/``) is taken from the file's folder, as an experiment's paths are; relative
checkpoints and commands from the working directory, where the workers run.

``max_fallback_fraction`` (0 to 1, default 0.5): an operator whose replies account for LLM
calls (the ``llm`` worker) or BDI decisions (the ``bdi`` worker) fails at the end of an episode
when more than this share of its actions so far came from its fallback
(:mod:`mosaic.operators.llm_accounting`).

Every problem is reported as :class:`mosaic.core.errors.ConfigError` naming the file, the line,
the key path (``operators[1].settings.base_url``), what was expected and, for a misspelt key or
value, the closest valid one; ``str()`` of it lists every problem found, one per line. The file
is read and its problems are worded as an experiment file's are (:mod:`mosaic.core.config_yaml`,
:mod:`mosaic.core.config_problems`).

The models are in ``_models`` (each type's settings models in :mod:`mosaic.operators.api.settings`);
this module checks what needs more than one field and holds the entry points.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mosaic.core.config_problems import (
    Loc,
    Position,
    Problem,
    config_error,
    did_you_mean,
    validate,
)
from mosaic.core.config_yaml import FileKind, empty_file, read_document, require_mapping
from mosaic.core.errors import ConfigError
from mosaic.core.imports import add_user_folder
from mosaic.operators.api.config import OPERATOR_TYPES
from mosaic.operators.api.kinds import settings_problems
from mosaic.operators.api.llm_routing import llm_worker_problems
from mosaic.operators.evaluation._models import (
    EvaluationConfig,
    OperatorSpec,
    PlayerSpec,
    TimeoutsSpec,
)

__all__ = [
    "OPERATOR_TYPES",
    "EvaluationConfig",
    "OperatorSpec",
    "PlayerSpec",
    "TimeoutsSpec",
    "load_evaluation",
    "parse_evaluation",
]


# -- checks that need more than one field ----------------------------------------------------


def _env_problem(env_id: str) -> tuple[str, str] | None:
    if ":" in env_id:  # "package.module:Env-v0": gymnasium.make imports the module first
        return None
    from gymnasium.envs.registration import registry

    if env_id in registry:
        return None
    hint = did_you_mean(env_id, list(registry))
    return (
        f"{env_id!r} is not a registered Gymnasium environment",
        hint or "use a registered id, or 'package.module:EnvId' to import the package first",
    )


def _game_players(env: str, env_kwargs: Mapping[str, Any]) -> list[str] | tuple[str, str]:
    """The players of the game ``env`` (built once, then closed), or (what is wrong, hint)."""
    from mosaic.core.errors import MosaicError
    from mosaic.environments.factory import make_environment
    from mosaic.environments.gymnasium_adapter import GymnasiumAdapter

    if ":" not in env:  # the form of a Gymnasium id
        single = _env_problem(env) is None
        return ((f"{env} is a single-agent Gymnasium environment, not a game with players",
                 "remove players and give the operator a type, or name a PettingZoo game")
                if single else
                (f"{env!r} names no game: a game is 'pettingzoo:<family>.<module>' or "
                 "'package.module:Attr'", "e.g. pettingzoo:classic.chess_v6"))
    try:
        made = make_environment(env, env_kwargs)
    except MosaicError as error:
        return str(error), "name a PettingZoo game, e.g. pettingzoo:classic.chess_v6"
    except Exception as error:  # the environment's own code may raise anything
        return (f"building {env} failed: {type(error).__name__}: {error}",
                "check env_kwargs; the file's check builds each game once")
    try:
        if isinstance(made, GymnasiumAdapter):
            return (f"{env} is a single-agent Gymnasium environment, not a game with players",
                    "remove players and give the operator a type, or name a PettingZoo game")
        return list(made.slots)
    finally:
        with contextlib.suppress(Exception):  # a probe's close must not hide what it found
            made.close()


def _worker_problems(kind: str, settings: Mapping[str, Any], command: list[str] | None,
                     env: str, at: Loc) -> list[Problem]:
    """What is wrong with one worker's type, settings and command (an operator's or a
    player's)."""
    problems: list[Problem] = []
    if kind == "command" and command is None:
        problems.append(Problem(
            (*at, "command"), "required for type 'command'",
            "give the worker program and its arguments, e.g. [python, my_worker.py]"))
    problems.extend(settings_problems(kind, settings, (*at, "settings")))
    if kind == "llm":
        problems.extend(llm_worker_problems(settings, (*at, "settings"), env))
    return problems


def _game_problems(operator: OperatorSpec, at: Loc) -> list[Problem]:
    """A game operator's problems: keys that belong to its players, each player's worker, and
    its players against the game's own."""
    problems: list[Problem] = []
    players = operator.players or {}
    for key, given in (("type", operator.type is not None), ("settings", bool(operator.settings)),
                       ("command", operator.command is not None)):
        if given:
            problems.append(Problem(
                (*at, key), f"a game's workers are its players': {key} goes under each player",
                f"move {key} under players.<player>, or remove players for a one-worker "
                "operator"))
    for player, spec in players.items():
        problems.extend(_worker_problems(spec.type, spec.settings, spec.command, operator.env,
                                         (*at, "players", player)))
    found = _game_players(operator.env, operator.env_kwargs)
    if isinstance(found, tuple):
        return [*problems, Problem((*at, "env"), found[0], found[1])]
    missing = [player for player in found if player not in players]
    for player in players:
        if player not in found:  # most likely meant: a player that has no entry yet
            problems.append(Problem(
                (*at, "players", player),
                f"{operator.env} has no player {player!r} (its players: {', '.join(found)})",
                did_you_mean(player, missing) or did_you_mean(player, found)
                or "name the game's own players"))
    if missing:
        names = ", ".join(repr(m) for m in missing)
        problems.append(Problem(
            (*at, "players"),
            f"{'player' if len(missing) == 1 else 'players'} {names} of {operator.env} "
            f"{'has' if len(missing) == 1 else 'have'} no operator",
            f"give every player of the game an entry: {', '.join(found)}"))
    return problems


def _semantic_problems(config: EvaluationConfig) -> list[Problem]:
    problems: list[Problem] = []
    first_index: dict[str, int] = {}
    for index, operator in enumerate(config.operators):
        at: Loc = ("operators", index)
        ids = [operator.id]
        if operator.players is not None:  # each player's worker is an operator of its own
            ids += [f"{operator.id}.{player}" for player in operator.players]
        for operator_id in ids:
            if operator_id in first_index:
                problems.append(
                    Problem(
                        (*at, "id"),
                        f"duplicate operator id {operator_id!r} "
                        f"(also operators[{first_index[operator_id]}])",
                        "give every operator its own id",
                    )
                )
            first_index.setdefault(operator_id, index)
        if operator.players is not None:
            problems.extend(_game_problems(operator, at))
            continue
        if operator.type is None:
            problems.append(Problem(
                (*at, "type"),
                "required: a type (one worker that owns a Gymnasium environment), or players "
                "(one worker per player of a PettingZoo game)",
                "e.g. type: random, or players: {player_0: {type: llm, ...}, ...}"))
            continue
        if operator.env.startswith("pettingzoo:"):
            problems.append(Problem(
                (*at, "env"),
                f"{operator.env} is a game with players; a one-worker operator owns a "
                "Gymnasium environment",
                "give the game's players under players: {player_0: {type: ...}, ...} instead "
                "of type"))
            continue
        if operator.type == "command" and operator.command is None:
            problems.append(
                Problem(
                    (*at, "command"),
                    "required for type 'command'",
                    "give the worker program and its arguments, e.g. [python, my_worker.py]",
                )
            )
        env = _env_problem(operator.env)
        if env is not None:
            problems.append(Problem((*at, "env"), env[0], env[1]))
        problems.extend(settings_problems(operator.type, operator.settings, (*at, "settings")))
        if operator.type == "llm":
            problems.extend(llm_worker_problems(operator.settings, (*at, "settings"),
                                                operator.env))
    if config.environment_mode == "fixed" and len(config.seeds) != 1:
        problems.append(
            Problem(
                ("seeds",),
                f"fixed mode plays one seed in every episode, but {len(config.seeds)} are given",
                "give one seed, or use environment_mode: procedural",
            )
        )
    return problems


# -- public entry points ---------------------------------------------------------------------

_EVALUATION = FileKind("evaluation", empty_hint="start with uid:, operators: and seeds:")


def parse_evaluation(data: Any, source: str = "<memory>") -> EvaluationConfig:
    """Validate already-parsed data, as from the evaluation file ``source``.

    Raises ``ConfigError`` (naming ``source``) listing every problem found, the first one's
    fields being the error's own.
    """
    return _validated(data, source, {}, [])


def load_evaluation(path: str | os.PathLike[str]) -> EvaluationConfig:
    """Read and validate the evaluation file at ``path``.

    Raises ``ConfigError`` when the file cannot be read, is too large or not text, is not valid
    YAML (with line and column), repeats a key, or does not match the schema; the error lists
    every problem found, each with its line.
    """
    source = os.fspath(path)
    document = read_document(source, _EVALUATION)
    # What the file names beside it (a BDI operator's plan library) is found wherever the
    # command runs, as an experiment file's modules are.
    add_user_folder(Path(source).expanduser().resolve().parent)
    if document.data is None:  # a recursive alias kept the document from being built
        raise config_error(source, document.problems, document.positions)
    return _validated(document.data, source, document.positions, document.problems)


def _validated(
    data: Any, source: str, positions: Mapping[Loc, Position], problems: list[Problem]
) -> EvaluationConfig:
    """The configuration in ``data``; ``problems`` were found in the file before validation."""
    if data is None:
        raise empty_file(source, _EVALUATION)
    data = require_mapping(data, source, _EVALUATION)
    if "operators" not in data and ("agents" in data or "environments" in data):
        raise ConfigError(
            source,
            "",
            "this is not an evaluation file: it has agents/environments but no operators",
            "an experiment file runs with 'mosaic experiment-start'; an evaluation file has "
            "uid, operators and seeds",
        )
    config, found = validate(EvaluationConfig, data)
    problems = [*problems, *found, *(_semantic_problems(config) if config is not None else [])]
    if problems or config is None:
        raise config_error(source, problems, positions)
    config._source = source
    return config
