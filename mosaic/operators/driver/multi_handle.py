"""Driver-side handle on a multi-agent operator: one worker per player, the driver owns the env."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mosaic.operators import protocol as p
from mosaic.operators.api.config import OperatorConfig
from mosaic.operators.driver._commands import INIT_AGENT_KEYS, init_agent_command

if TYPE_CHECKING:
    from mosaic.operators.driver.handle import OperatorProcessHandle


__all__ = ["MultiAgentOperatorHandle"]

_log = logging.getLogger(__name__)


class MultiAgentOperatorHandle:
    """One worker per player of a multi-agent operator; the driver owns the environment.

    Every method that waits takes a timeout. :meth:`stop_all` (and :meth:`stop`, which sums
    the exit codes up as one) stops the workers in parallel, so it takes about one stop timeout
    whatever the number of players.
    """

    def __init__(
        self,
        player_handles: dict[str, OperatorProcessHandle],
        config: OperatorConfig | None = None,
    ) -> None:
        self.player_handles = dict(player_handles)
        self.config = config
        self._pending: set[str] = set()

    def __enter__(self) -> MultiAgentOperatorHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()

    def __getitem__(self, player_id: str) -> OperatorProcessHandle:
        return self.player_handles[player_id]

    @property
    def players(self) -> list[str]:
        """The player ids, in assignment order."""
        return list(self.player_handles)

    def send_init_agents(
        self,
        env_name: str | None = None,
        task: str | None = None,
        settings: Mapping[str, Mapping[str, Any]] | None = None,
        timeout: float = 10.0,
    ) -> dict[str, dict[str, Any]]:
        """Send ``init_agent`` to every player, then wait for all ``agent_ready`` replies.

        Per-player settings come from ``settings[player]`` or else from the config's
        assignment (only ``n_actions`` and ``seed``). ``env_name``/``task`` default to the
        config's. ``timeout`` bounds the whole exchange.
        """
        if self.config is not None:
            env_name = env_name if env_name is not None else self.config.env_name
            task = task if task is not None else self.config.task
        deadline = time.monotonic() + timeout
        sent: dict[str, int] = {}
        for player, handle in self.player_handles.items():
            sent[player] = handle.send(
                init_agent_command(player, env_name, task, self._settings_for(player, settings)),
                timeout=timeout)
        replies = {}
        for player, request_id in sent.items():
            handle = self.player_handles[player]
            reply = handle._await(request_id, deadline, timeout, False)
            replies[player] = handle._expect(reply, p.RESP_AGENT_READY)
        return replies

    def _settings_for(
        self, player: str, settings: Mapping[str, Mapping[str, Any]] | None
    ) -> dict[str, Any] | None:
        if settings is not None and player in settings:
            return dict(settings[player])
        if self.config is not None and player in self.config.worker_assignments:
            source = self.config.worker_assignments[player].settings
            return {k: source[k] for k in INIT_AGENT_KEYS if k in source}
        return None

    def select_action(
        self,
        player_id: str,
        observation: Any,
        legal_actions: list[int] | None = None,
        action_mask: list[int] | None = None,
        timeout: float = 30.0,
        *,
        info: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Ask ``player_id`` for an action and wait; returns the ``action_selected`` reply."""
        return self.player_handles[player_id].select_action(
            observation, legal_actions, action_mask, player_id, timeout, info=info)

    def send_select_action(
        self,
        player_id: str,
        observation: Any,
        legal_actions: list[int] | None = None,
        action_mask: list[int] | None = None,
        info: dict[str, Any] | None = None,
    ) -> int:
        """Ask ``player_id`` for an action without waiting; collect it with
        :meth:`poll_all_responses`. Returns the request id."""
        request_id = self.player_handles[player_id].send_select_action(
            observation, legal_actions, action_mask, player_id, info)
        self._pending.add(player_id)
        return request_id

    def poll_all_responses(self, timeout: float = 0.1) -> dict[str, dict[str, Any]]:
        """At most one reply per player, waiting up to ``timeout`` for players with a request
        sent by :meth:`send_select_action` and not yet answered.

        ``error`` replies are returned as dicts; a crashed or garbled worker raises.
        """
        deadline = time.monotonic() + timeout
        replies: dict[str, dict[str, Any]] = {}
        while True:
            for player, handle in self.player_handles.items():
                if player not in replies:
                    reply = handle.try_read_response(0.0, accept_error=True)
                    if reply is not None:
                        replies[player] = reply
                        self._pending.discard(player)
            if not (self._pending - replies.keys()) or time.monotonic() >= deadline:
                return replies
            time.sleep(0.002)

    def gather_actions(self, timeout: float) -> dict[str, dict[str, Any] | None]:
        """Wait, up to ``timeout`` in all, for the reply of every player asked by
        :meth:`send_select_action` and not yet answered (:meth:`poll_all_responses`); each
        one's reply, in player order, None for a player whose reply did not come (it is asked
        no more). A crashed worker raises as it is read. Check each reply with
        :meth:`action_reply`."""
        asked = [player for player in self.player_handles if player in self._pending]
        deadline = time.monotonic() + timeout
        replies: dict[str, dict[str, Any]] = {}
        while len(replies) < len(asked):
            replies.update(self.poll_all_responses(max(0.0, deadline - time.monotonic())))
            if time.monotonic() >= deadline:
                break
        self._pending.clear()
        return {player: replies.get(player) for player in asked}

    def action_reply(self, player_id: str, reply: dict[str, Any] | None,
                     timeout: float) -> dict[str, Any]:
        """``player_id``'s gathered ``reply`` if it is an ``action_selected``; raises as
        :meth:`select_action` does: a :class:`~mosaic.core.errors.WorkerTimeout` when it did
        not come within ``timeout``, for an ``error`` reply, or for a reply of another type."""
        handle = self.player_handles[player_id]
        if reply is None:
            raise handle._timeout(timeout)
        return handle._expect(handle._checked(reply, False), p.RESP_ACTION_SELECTED)

    def stop_all(self, timeout: float = 3.0) -> dict[str, int | None]:
        """Stop every worker in parallel; returns each player's exit code.

        Never raises: a worker whose stop fails is logged and its code is ``None``.
        """
        codes: dict[str, int | None] = {}

        def stop(player: str, handle: OperatorProcessHandle) -> None:
            try:
                codes[player] = handle.stop(timeout)
            except Exception:  # the other players must still be stopped
                _log.exception("stopping the worker of player %r failed", player)
                codes[player] = None

        threads = [threading.Thread(target=stop, args=item, daemon=True)
                   for item in self.player_handles.items()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout + 2.0)
        return codes

    def stop(self, timeout: float = 3.0) -> int | None:
        """Stop every worker in parallel (:meth:`stop_all`); the first non-zero exit code in
        player order, else 0, or None when a worker's code is unknown. Never raises."""
        codes = self.stop_all(timeout)
        if any(codes.get(player) is None for player in self.player_handles):
            return None
        return next((code for code in codes.values() if code), 0)
