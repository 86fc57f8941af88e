"""Building the ``init_agent`` and ``select_action`` commands, which both handles send."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mosaic.operators import protocol as p

#: Keys of a player's settings that are passed on in ``init_agent``.
INIT_AGENT_KEYS = ("n_actions", "seed")


def init_agent_command(
    player_id: str, env_name: str | None, task: str | None, settings: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The ``init_agent`` command for ``player_id``; None arguments are left out.

    ``game_name``, the name MOSAIC's workers read, is ``task`` or else ``env_name``.
    """
    command: dict[str, Any] = {"cmd": p.CMD_INIT_AGENT, "player_id": player_id}
    if env_name is not None:
        command["env_name"] = env_name
    if task is not None:
        command["task"] = task
    if task or env_name:
        command["game_name"] = task or env_name
    if settings is not None:
        command["settings"] = dict(settings)
    return command


def select_action_command(
    observation: Any,
    legal_actions: list[int] | None,
    action_mask: list[int] | None,
    player_id: str | None,
    info: dict[str, Any] | None,
) -> dict[str, Any]:
    """The ``select_action`` command; legal actions and mask as ints, None arguments left out."""
    command: dict[str, Any] = {"cmd": p.CMD_SELECT_ACTION, "observation": observation}
    if legal_actions is not None:
        command["legal_actions"] = [int(a) for a in legal_actions]
    if action_mask is not None:
        command["action_mask"] = [int(bool(m)) for m in action_mask]
    if player_id is not None:
        command["player_id"] = player_id
    if info is not None:
        command["info"] = info
    return command
