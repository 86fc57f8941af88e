"""MOSAIC's dialect of the worker protocol: how mosaic reads it and how it writes it.

MOSAIC's own workers speak the protocol of :mod:`mosaic.operators.protocol` loosely:

* most of them print an unsolicited ``{"type": "init", "run_id", "worker", "behavior"}`` line
  when they start, and some print ``agent_ready`` / ``agent_initialized`` without being asked;
* no reply carries a request id;
* an episode ends with ``episode_end`` (``episode_index``, ``episode_steps``, ``episode_return``,
  ``terminated``, ``truncated``; the random and passive workers) or ``episode_done``
  (``total_reward``, ``num_steps``; the LLM, human and trainer workers);
* ``ready`` and ``step`` carry ``episode_index`` and ``step_index``, which the CleanRL worker
  counts from 1; the human worker's ``ready`` names the environment ``task``, not ``env_id``;
* in selector mode ``init_agent`` names the game as ``game_name`` and is answered with
  ``agent_ready`` or ``agent_initialized``.

Reading: :func:`to_native` renames a MOSAIC reply into mosaic's names (the worker's own fields
stay in the dict too); the driver's handle does the rest (skipping unsolicited lines, matching
replies by order, counting ``step_index`` from 0). Writing: :func:`to_mosaic` adds MOSAIC's field
names to a reply of mosaic's worker runtime, and :func:`init_line` is the line it starts with.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mosaic.operators import protocol as p

__all__ = [
    "AGENT_READY_SPELLINGS",
    "DIALECTS",
    "EPISODE_END_SPELLINGS",
    "MOSAIC",
    "NATIVE",
    "UNSOLICITED_TYPES",
    "init_line",
    "to_mosaic",
    "to_native",
]

#: mosaic's own protocol: ids echoed, one episode-end spelling, 0-based step_index.
NATIVE = "native"
#: MOSAIC's dialect (see the module docstring).
MOSAIC = "mosaic"
DIALECTS = (NATIVE, MOSAIC)

RESP_INIT = "init"
RESP_AGENT_INITIALIZED = "agent_initialized"
RESP_EPISODE_DONE = "episode_done"
#: Lines that never answer a command.
UNSOLICITED_TYPES = frozenset({RESP_INIT})
#: Both spellings of the reply to ``init_agent``.
AGENT_READY_SPELLINGS = frozenset({p.RESP_AGENT_READY, RESP_AGENT_INITIALIZED})
#: Both spellings of the line that ends an episode.
EPISODE_END_SPELLINGS = frozenset({p.RESP_EPISODE_END, RESP_EPISODE_DONE})

#: MOSAIC's names of an episode's length and return, in the order they are looked for.
_LENGTH_NAMES = ("episode_steps", "num_steps")
_RETURN_NAMES = ("episode_return", "total_reward")


def to_native(reply: Mapping[str, Any]) -> dict[str, Any]:
    """``reply`` with MOSAIC's spellings renamed to mosaic's; other replies are copied as is.

    ``agent_initialized`` becomes ``agent_ready``; a ``ready`` without ``env_id`` takes it from
    ``task`` (and ``observation_shape`` None when it has none); ``episode_done`` becomes
    ``episode_end``, and an episode end gets ``episode_length`` from ``episode_steps`` or
    ``num_steps`` and ``total_reward`` from ``episode_return`` when it lacks them. Nothing is
    checked here: the result is validated as a mosaic reply afterwards, so a missing field is
    named there.
    """
    out = dict(reply)
    kind = out.get("type")
    if kind == RESP_AGENT_INITIALIZED:
        out["type"] = p.RESP_AGENT_READY
    elif kind == p.RESP_READY:  # MOSAIC's human worker: its environment is its "task"
        if "env_id" not in out and isinstance(out.get("task"), str):
            out["env_id"] = out["task"]
        out.setdefault("observation_shape", None)
    elif kind in EPISODE_END_SPELLINGS:
        out["type"] = p.RESP_EPISODE_END
        for native, names in (("episode_length", _LENGTH_NAMES),
                              ("total_reward", _RETURN_NAMES)):
            if native not in out:
                found = next((name for name in names if name in out), None)
                if found is not None:
                    out[native] = out[found]
    return out


def to_mosaic(reply: Mapping[str, Any], run_id: str, episode_index: int) -> dict[str, Any]:
    """``reply`` with MOSAIC's field names added (mosaic's stay, so both readers work).

    ``ready`` gets ``episode_index`` and ``step_index`` 0; ``step`` gets ``episode_index``;
    ``episode_end`` gets ``run_id``, ``episode_index``, ``episode_steps`` and
    ``episode_return``. Other replies are copied as they are.
    """
    out = dict(reply)
    kind = out.get("type")
    if kind == p.RESP_READY:
        out.update(episode_index=episode_index, step_index=0)
    elif kind == p.RESP_STEP:
        out["episode_index"] = episode_index
    elif kind == p.RESP_EPISODE_END:
        out.update(run_id=run_id, episode_index=episode_index,
                   episode_steps=out["episode_length"], episode_return=out["total_reward"])
    return out


def init_line(run_id: str, worker: str) -> dict[str, Any]:
    """The line a worker in MOSAIC's dialect prints when it starts, before any command."""
    behavior = worker.removesuffix("_worker")
    return {"type": RESP_INIT, "run_id": run_id, "worker": worker, "behavior": behavior}
