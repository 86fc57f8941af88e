"""Which worker an ``llm`` operator runs: :func:`llm_worker_for`.

An ``llm`` operator is one of several workers, chosen from the game it plays unless its
``settings.worker`` names one:

=================================  ===========  ============================================
game (``env``, ``task``)           worker       prompt
=================================  ===========  ============================================
PettingZoo chess (``chess_v6``)    ``chess``    the position as FEN and the legal moves (UCI
                                                and SAN, python-chess), one conversation per
                                                game; an illegal reply is asked again
BabyAI / MiniGrid                  ``balrog``   the view as text, the mission and the action
                                                words (BALROG-style)
any other                          ``llm``      the observation as JSON and the action numbers
images (``settings.worker: vlm``)  ``vlm``      the observation sent as an image to a vision
                                                endpoint, with the legal actions
=================================  ===========  ============================================

``settings.worker: auto`` (the default) routes by the game; ``llm``, ``chess``, ``balrog`` or
``vlm`` chooses the worker whatever the game. A game's name does not say whether its
observations are images, so the VLM worker is chosen by name only. A worker whose package is
missing is reported where the file is checked, naming the mosaic extra that installs it
(:func:`llm_worker_problems`).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mosaic.core.config_problems import Loc, Problem

__all__ = ["LLM_WORKERS", "WORKER_EXTRAS", "is_chess", "llm_worker_for", "llm_worker_problems"]

#: The worker module of each ``settings.worker`` of an ``llm`` operator.
LLM_WORKERS: Mapping[str, str] = {
    "llm": "workers.llm_worker",
    "chess": "workers.chess_worker",
    "balrog": "workers.balrog_worker",
    "vlm": "workers.vlm_worker",
}

#: The package each worker needs beyond mosaic's own, and the extra that installs it.
WORKER_EXTRAS: Mapping[str, tuple[str, str]] = {
    "chess": ("chess", "chess"),
    "balrog": ("minigrid", "minigrid"),
    "vlm": ("PIL", "images"),
}

_CHESS = re.compile(r"(^|[.:])chess(_v\d+)?$", re.IGNORECASE)
_MINIGRID = re.compile(r"(^|[.:])(babyai|minigrid)-", re.IGNORECASE)


def llm_worker_for(requested: str | None, *games: str | None) -> str:
    """The worker (a key of :data:`LLM_WORKERS`) for an ``llm`` operator whose
    ``settings.worker`` is ``requested`` and that plays the first of ``games`` given (an
    environment id, a PettingZoo game, a task name).

    ``requested`` other than None or ``auto`` wins; ``ValueError`` for an unknown one.
    """
    if requested not in (None, "auto"):
        if requested not in LLM_WORKERS:
            raise ValueError(f"unknown LLM worker {requested!r}; expected auto or one of "
                             f"{', '.join(LLM_WORKERS)}")
        return str(requested)
    game = _first(games)
    if _CHESS.search(game):
        return "chess"
    if _MINIGRID.search(game):
        return "balrog"
    return "llm"


def is_chess(*games: str | None) -> bool:
    """True when the first of ``games`` given names PettingZoo's chess (``chess_v6``)."""
    return bool(_CHESS.search(_first(games)))


def _first(games: tuple[str | None, ...]) -> str:
    return next((g.strip() for g in games if g and g.strip()), "")


def llm_worker_problems(settings: Mapping[str, Any], at: Loc, *games: str | None
                        ) -> list[Problem]:
    """A problem at ``at`` + ``worker`` when the worker an ``llm`` operator routes to needs a
    package that is not installed (naming the extra), else none."""
    from mosaic.core.config_problems import Problem
    from mosaic.core.errors import MissingExtra

    try:
        worker = llm_worker_for(settings.get("worker"), *games)
    except ValueError:
        return []  # the settings model reports it
    if worker not in WORKER_EXTRAS:
        return []
    package, extra = WORKER_EXTRAS[worker]
    try:  # imported, not only found: one that is there but does not import is missing too
        importlib.import_module(package)
    except ImportError:
        error = MissingExtra(package, extra, f"the {worker} LLM worker")
    else:
        return []
    return [Problem((*at, "worker"), str(error),
                    "install it, or set settings.worker to another worker")]
