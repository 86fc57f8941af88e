"""The action space of a game named in ``init_agent``: :func:`game_action_space`.

MOSAIC's selector mode tells a worker only the game's name (``game_name``), not its action
count, so a worker that is to act without a legal-action list must find the space itself.
"""

from __future__ import annotations

import importlib.util
import logging
import re
import warnings
from pathlib import Path
from typing import Any

log = logging.getLogger("mosaic.worker")

#: PettingZoo families searched for a bare game name (atari is left out: it needs ROMs).
PETTINGZOO_FAMILIES = ("classic", "butterfly", "mpe", "sisl")
_VERSIONED = re.compile(r"_v\d+$")


def game_action_space(name: str, player_id: str) -> Any:
    """The action space of ``player_id`` in the game ``name``, or None (logged) when unknown.

    ``name`` may be a Gymnasium id (``CartPole-v1``, also ``gymnasium:CartPole-v1``), a
    PettingZoo module (``classic.tictactoe_v3``, ``pettingzoo:classic.tictactoe_v3``,
    ``tictactoe_v3``) or a PettingZoo game without its version (``tictactoe``: the newest
    version installed). A player the game does not have gets the space all its players share.
    Never raises: a game that cannot be made is a warning, and the worker then needs legal
    actions with each ``select_action``.
    """
    try:
        space = _gymnasium_space(name.removeprefix("gymnasium:"))
        if space is None:
            space = _pettingzoo_space(name.removeprefix("pettingzoo:"), player_id)
    except Exception as exc:  # a game's own constructor may raise anything
        log.warning("init_agent: cannot make the game %r to find its action space: %s: %s",
                    name, type(exc).__name__, exc)
        return None
    if space is None:
        log.warning("init_agent: %r is neither a Gymnasium id nor a PettingZoo game; send "
                    "settings.n_actions or legal actions with each select_action", name)
    return space


def _gymnasium_space(name: str) -> Any:
    import gymnasium as gym

    from mosaic.environments.gymnasium_make import make_gymnasium

    try:
        gym.spec(name)
    except gym.error.Error:
        return None
    env = make_gymnasium(name)
    try:
        return env.action_space
    finally:
        env.close()


def _pettingzoo_space(name: str, player_id: str) -> Any:
    module_name = _pettingzoo_module(name)
    if module_name is None:
        return None
    # Made as an experiment makes it (imported here: a worker of a Gymnasium game needs none
    # of the PettingZoo side of the factory).
    from mosaic.environments.factory import make_environment

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the module-level env() API
        game = make_environment(f"pettingzoo:{module_name.removeprefix('pettingzoo.')}", {})
    try:
        slots = game.slots
        if player_id in slots:
            return slots[player_id][1]
        spaces = [action for _, action in slots.values()]
        if spaces and all(space == spaces[0] for space in spaces):
            return spaces[0]
        raise ValueError(f"the game has no player {player_id!r} (players: {list(slots)})")
    finally:
        game.close()


def _pettingzoo_module(name: str) -> str | None:
    if importlib.util.find_spec("pettingzoo") is None:
        return None
    if "." in name:
        family, _, game = name.partition(".")
        candidates = [(family, game)]
    else:
        candidates = [(family, name) for family in PETTINGZOO_FAMILIES]
    for family, game in candidates:
        spec = importlib.util.find_spec(f"pettingzoo.{family}")
        if spec is None or not spec.submodule_search_locations:
            continue
        folder = Path(next(iter(spec.submodule_search_locations)))
        if _VERSIONED.search(game):
            if (folder / f"{game}.py").is_file():
                return f"pettingzoo.{family}.{game}"
            continue
        versions = sorted(folder.glob(f"{game}_v*.py"),
                          key=lambda path: int(path.stem.rpartition("_v")[2]))
        if versions:
            return f"pettingzoo.{family}.{versions[-1].stem}"
    return None
