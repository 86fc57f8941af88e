"""Which command a worker's reply answers, in either dialect: :class:`ReplyRouter`.

A worker that echoes request ids is matched by id. A worker that has never echoed one (MOSAIC's
workers) is matched by order: every command sent is owed one reply (a ``step`` that ends the
episode, two), so a late reply to a command that timed out is recognised as such and does not
shift the replies that follow. Lines that answer no command (MOSAIC's ``init``, and an
``agent_ready`` when no ``init_agent`` is owed a reply) are kept in :attr:`ReplyRouter.unsolicited`
and never returned as replies.
"""

from __future__ import annotations

import itertools
import json
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mosaic.operators import dialect as d
from mosaic.operators import protocol as p

#: Unsolicited lines kept per worker (the oldest are dropped).
UNSOLICITED_KEPT = 100

#: The help given with a reply that fits neither dialect.
NEITHER_DIALECT = ("a worker must speak mosaic's operator protocol or MOSAIC's dialect of it "
                   "(see mosaic.operators.protocol and mosaic.operators.dialect)")


@dataclass
class _Owed:
    """A command that is owed a reply: its key, its ``cmd`` (None for a raw line) and, for
    ``init_agent``, its player."""

    key: int
    cmd: str | None
    player_id: str | None = None
    #: A ``step`` whose ``step`` reply ended the episode and which now waits for its episode end.
    awaits_end: bool = False


class ReplyRouter:
    """The matching state of one worker (see the module docstring). Not thread-safe: the handle
    calls it from the thread that reads replies.

    :meth:`sent` registers each command; :meth:`route` takes each decoded line and returns the
    reply in mosaic's names together with the key of the command it answers (None when it
    answers none that is known), or None for an unsolicited line.
    """

    def __init__(self) -> None:
        self._owed: deque[_Owed] = deque()
        self._raw_keys = itertools.count(-1, -1)
        #: True once the worker echoed a request id: from then on replies are matched by id.
        self.echoes_ids = False
        #: Lines that answered no command, oldest first.
        self.unsolicited: deque[dict[str, Any]] = deque(maxlen=UNSOLICITED_KEPT)
        #: The worker's first ``step_index`` of an episode (0, or 1 for MOSAIC's CleanRL
        #: worker); None until a first step was seen.
        self.step_base: int | None = None
        #: The episode-end spellings the worker used.
        self.end_spellings: set[str] = set()
        self._first_step_pending = False
        self._last_step: dict[str, Any] | None = None

    def sent(self, key: int | None, command: Mapping[str, Any] | None) -> None:
        """Register a command written to the worker; ``key`` None is a raw line (key invented).

        Only commands the worker answers are owed a reply.
        """
        cmd = command.get("cmd") if command is not None else None
        if key is None:
            key = next(self._raw_keys)
        player = command.get("player_id") if command is not None else None
        self._owed.append(_Owed(key, cmd if isinstance(cmd, str) else None,
                                player if isinstance(player, str) else None))

    def sent_raw(self, data: bytes) -> None:
        """Register raw bytes written to the worker: each line is owed a reply like a command
        (an ``error`` for a malformed one)."""
        for line in data.splitlines():
            try:
                command = json.loads(line)
            except ValueError:
                command = None
            if not isinstance(command, dict):
                self.sent(None, None)
            else:
                rid = command.get("id")
                self.sent(rid if isinstance(rid, int) else None, command)

    def route(self, obj: dict[str, Any]) -> tuple[dict[str, Any], int | None] | None:
        """The validated reply in mosaic's names and the key it answers; None when ``obj``
        answers no command (it is then in :attr:`unsolicited`).

        Raises ``ProtocolError`` for a line that is no reply in either dialect.
        """
        kind = obj.get("type")
        if kind in d.UNSOLICITED_TYPES:
            self.unsolicited.append(obj)
            return None
        rid = obj.get("id")
        if rid is not None:
            self.echoes_ids = True
        owed = self._owed_for(obj, rid)
        stray = owed is None and rid is None and self.echoes_ids  # id left out, not an error
        if stray or (kind in d.AGENT_READY_SPELLINGS
                     and (owed is None or owed.cmd != p.CMD_INIT_AGENT)):
            self.unsolicited.append(obj)
            return None
        if kind in d.EPISODE_END_SPELLINGS:
            self.end_spellings.add(str(kind))
        renamed = (kind in d.AGENT_READY_SPELLINGS or kind in d.EPISODE_END_SPELLINGS
                   or (kind == p.RESP_READY
                       and not {"env_id", "observation_shape"} <= obj.keys()))
        reply = self._fill(d.to_native(obj), owed) if renamed else obj
        try:
            p.validate_response(reply)
        except p.ProtocolError as exc:
            raise p.ProtocolError(f"{exc}; {NEITHER_DIALECT}") from None
        if reply["type"] == p.RESP_READY:
            self._first_step_pending = True
        elif reply["type"] == p.RESP_STEP:
            reply["step_index"] = self._step_index(reply["step_index"])
            self._last_step = reply
        if owed is None:
            return reply, rid if isinstance(rid, int) else None
        self._settle(owed, reply)
        return reply, owed.key

    def _owed_for(self, obj: Mapping[str, Any], rid: Any) -> _Owed | None:
        if rid is not None:
            return next((o for o in self._owed if o.key == rid), None)
        if self.echoes_ids:
            # A worker that echoes ids leaves the id out only when it could not read the
            # command: an error, answering the oldest raw line, else the oldest command. Any
            # other line without id answers nothing.
            if obj.get("type") != p.RESP_ERROR:
                return None
            return next((o for o in self._owed if o.cmd is None),
                        self._owed[0] if self._owed else None)
        while self._owed:
            head = self._owed[0]
            if head.awaits_end and obj.get("type") not in d.EPISODE_END_SPELLINGS:
                self._owed.popleft()  # that step had no episode end: the line answers the next
                continue
            return head
        return None

    def _fill(self, reply: dict[str, Any], owed: _Owed | None) -> dict[str, Any]:
        """Fields MOSAIC's workers may leave out and that mosaic knows from context."""
        if (reply.get("type") == p.RESP_AGENT_READY and "player_id" not in reply
                and owed is not None and owed.player_id is not None):
            reply["player_id"] = owed.player_id
        if reply.get("type") == p.RESP_EPISODE_END and self._last_step is not None:
            for flag in ("terminated", "truncated"):
                reply.setdefault(flag, self._last_step.get(flag))
        return reply

    def _step_index(self, raw: int) -> int:
        if self._first_step_pending:
            self._first_step_pending = False
            if self.step_base is None:
                self.step_base = 1 if raw == 1 else 0
        return raw - (self.step_base or 0) if raw >= (self.step_base or 0) else raw

    def _settle(self, owed: _Owed, reply: Mapping[str, Any]) -> None:
        """Drop ``owed`` once fully answered, with every command owed before it when matched by
        id (their replies, if any come, are recognised by their ids)."""
        if (reply["type"] == p.RESP_STEP and owed.cmd == p.CMD_STEP
                and (reply["terminated"] or reply["truncated"])):
            owed.awaits_end = True
            return
        while self._owed:
            head = self._owed.popleft()
            if head is owed or not self.echoes_ids:
                return
