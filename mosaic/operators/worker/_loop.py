"""The command loop of a worker: :class:`InteractiveRuntime`.

It reads protocol commands, calls the policy (and the environment the worker owns), and writes
one reply per command; every exception from the policy or the environment becomes an ``error``
reply. See :mod:`mosaic.operators.worker.runtime` for the guarantees a worker gives its driver.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import io
import json
import logging
import os
import sys
import termios
import time
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from mosaic.core.seeding import operator_episode_seed
from mosaic.operators import dialect as d
from mosaic.operators import protocol as p
from mosaic.operators.worker._games import game_action_space
from mosaic.operators.worker._policy import WorkerPolicy, noop_action
from mosaic.operators.worker._process import WorkerTerminated
from mosaic.runtime.processes.lines import bounded_lines

log = logging.getLogger("mosaic.worker")


#: The longest a worker in MOSAIC's dialect waits for its driver to read a line before it
#: writes the next of the same reply (see :meth:`InteractiveRuntime._write`).
LINE_HANDOVER_WAIT = 1.0


def wait_until_read(stream: BinaryIO, timeout: float) -> bool:
    """Wait until every byte written to ``stream`` (a pipe or terminal) has been read from it,
    at most ``timeout`` seconds; True if it was. A stream that cannot tell (a file) is True."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, io.UnsupportedOperation):
        return True
    unread = array.array("i", [0])
    deadline = time.monotonic() + timeout
    pause = 0.0002
    while True:
        try:
            fcntl.ioctl(fd, termios.FIONREAD, unread)
        except OSError:
            return True
        if unread[0] == 0:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.01)


def _legal_from_info(info: Any) -> list[int] | None:
    if isinstance(info, dict) and info.get("action_mask") is not None:
        return p.legal_from_mask(info["action_mask"])
    return None


class InteractiveRuntime:
    """Serve protocol commands from ``stdin`` to ``policy``, writing replies to ``stdout``.

    ``env`` is a Gymnasium environment for ``reset``/``step`` mode, or None for a worker that only
    answers ``init_agent``/``select_action`` (``step`` then gets an ``error`` reply). Episodes end
    after ``max_steps`` steps when it is > 0 (reported as truncated). With ``render_every`` = N > 0
    the ``ready`` reply, every N-th step and the last step of an episode carry a
    ``render_payload``. With ``send_observations`` the observation is in ``ready`` and ``step``.

    ``operator_seed`` (``--seed``) is the operator's own seed: the policy is seeded from it at
    start, and at the *n*-th ``reset`` with ``operator_episode_seed(operator_seed, n)``
    (:mod:`mosaic.core.seeding`), so its actions never depend on the environment's seed and
    two operators with their own seeds never play alike. Without it, the policy is seeded with
    each ``reset``'s seed (reproducible from the reset seed, as a driver that gives no operator
    seed expects).

    ``stdin``/``stdout`` are binary streams (default: the process's). :meth:`serve` returns the
    exit code; every exception from the policy or the environment becomes an ``error`` reply.

    With ``dialect="mosaic"`` the replies also carry MOSAIC's field names
    (:func:`mosaic.operators.dialect.to_mosaic`) and :meth:`serve` first prints MOSAIC's ``init``
    line for ``worker``. ``init_agent`` without ``settings.n_actions`` takes the action space of
    the game its ``game_name`` (or ``task``) names, when that can be made.
    """

    def __init__(
        self,
        policy: WorkerPolicy,
        *,
        env: Any = None,
        env_id: str = "",
        run_id: str = "",
        max_steps: int = 0,
        render_every: int = 0,
        send_observations: bool = False,
        agent_action_space: Any = None,
        operator_seed: int | None = None,
        stdin: BinaryIO | None = None,
        stdout: BinaryIO | None = None,
        dialect: str = d.NATIVE,
        worker: str = "worker",
    ) -> None:
        self.policy = policy
        self.env = env
        self.env_id = env_id
        self.run_id = run_id
        self.max_steps = max_steps
        self.render_every = render_every
        self.send_observations = send_observations
        self.agent_action_space = agent_action_space
        self.operator_seed = operator_seed
        if operator_seed is not None:  # selector mode may never send reset
            policy.reset(operator_episode_seed(operator_seed, 0))
        self._in = stdin if stdin is not None else sys.stdin.buffer
        self._out = stdout if stdout is not None else sys.stdout.buffer
        self.dialect = dialect
        #: Whether a line waits for the driver to read the one before it (see :meth:`_write`):
        #: when answering a driver in MOSAIC's dialect, not in batch mode, which nobody reads
        #: line by line.
        self._hand_over_lines = False
        self.worker = worker
        self._episode = -1
        self._player_id: str | None = None
        self._obs: Any = None
        self._info: Any = None
        self._steps = 0
        self._episode_reward = 0.0
        self._done = True
        self._closed = False
        self._handlers: dict[str, Callable[[dict[str, Any]], list[dict[str, Any]]]] = {
            p.CMD_RESET: self._on_reset,
            p.CMD_STEP: self._on_step,
            p.CMD_PING: self._on_ping,
            p.CMD_INIT_AGENT: self._on_init_agent,
            p.CMD_SELECT_ACTION: self._on_select_action,
        }

    # -- entry points --

    def serve(self) -> int:
        """Answer commands until ``stop``, EOF or SIGTERM (exit code 0); closes on the way out."""
        try:
            if self.dialect == d.MOSAIC:
                self._write([d.init_line(self.run_id, self.worker)])
                self._hand_over_lines = True
            for line in self._lines():
                if not self.handle_line(line):
                    break
            return 0
        except WorkerTerminated:
            log.info("SIGTERM: exiting")
            return 0
        except BrokenPipeError:
            log.warning("the driver closed stdout; exiting")
            self._silence_stdout()
            return 0
        except KeyboardInterrupt:
            return 130
        finally:
            self._close_quietly()

    def serve_batch(self, episodes: int, seed: int | None) -> int:
        """Run ``episodes`` episodes without commands, writing the same replies to stdout.

        Episode *i* is reset with ``seed + i`` (or unseeded when ``seed`` is None).
        """
        try:
            for episode in range(episodes):
                episode_seed = None if seed is None else seed + episode
                replies = self._dispatch({"cmd": p.CMD_RESET, "seed": episode_seed})
                self._write(replies)
                if replies[-1]["type"] == p.RESP_ERROR:
                    return 1
                while not self._done:
                    replies = self._dispatch({"cmd": p.CMD_STEP})
                    self._write(replies)
                    if replies[-1]["type"] == p.RESP_ERROR:
                        return 1
            return 0
        except WorkerTerminated:
            return 0
        except BrokenPipeError:
            self._silence_stdout()
            return 0
        finally:
            self._close_quietly()

    def handle_line(self, line: bytes) -> bool:
        """Answer one command line; returns False after ``stop``."""
        try:
            command = p.parse_command(line)
        except p.ProtocolError as exc:
            self._write([self._error(str(exc), _peek_id(line))])
            return True
        if command["cmd"] == p.CMD_STOP:
            self._write([self._reply(command, p.RESP_STOPPED)])
            return False
        self._write(self._dispatch(command))
        return True

    def close(self) -> None:
        """Close the policy and the environment; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        for closer in (getattr(self.policy, "close", None), getattr(self.env, "close", None)):
            if closer is None:
                continue
            try:
                closer()
            except Exception:  # cleanup must go on; the error is only logged
                log.exception("error during cleanup")

    def _silence_stdout(self) -> None:
        # Unsent bytes would raise again when Python flushes at exit; send them nowhere instead.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._out.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            pass

    def _close_quietly(self) -> None:
        # SIGTERM during cleanup after stop or EOF: still a clean exit
        with contextlib.suppress(WorkerTerminated):
            self.close()

    # -- plumbing --

    def _lines(self) -> Iterator[bytes]:
        for line in bounded_lines(self._in, p.MAX_LINE_BYTES):
            if line is None:
                self._write([self._error(f"line longer than {p.MAX_LINE_BYTES} bytes", None)])
            else:
                yield line

    def _write(self, replies: list[dict[str, Any]]) -> None:
        """Write ``replies``, one line each.

        Answering a driver in MOSAIC's dialect, each line after the first waits (at most
        :data:`LINE_HANDOVER_WAIT` seconds) until the driver has read the ones before it:
        MOSAIC's handle waits with ``select`` and then reads one line through a buffered file,
        so an ``episode_end`` that arrived with its ``step`` sat in that buffer, unseen.
        """
        for index, reply in enumerate(replies):
            if self.dialect == d.MOSAIC:
                reply = d.to_mosaic(reply, self.run_id, max(self._episode, 0))
            if index and self._hand_over_lines:
                wait_until_read(self._out, LINE_HANDOVER_WAIT)
            try:
                data = p.encode_line(reply)
            except p.ProtocolError as exc:
                data = p.encode_line(self._error(f"cannot encode reply: {exc}", reply.get("id")))
            self._out.write(data)
            if self._hand_over_lines:
                self._out.flush()
        self._out.flush()

    def _dispatch(self, command: dict[str, Any]) -> list[dict[str, Any]]:
        try:
            return self._handlers[command["cmd"]](command)
        except Exception as exc:
            log.exception("command %r failed", command["cmd"])
            return [self._error(f"{command['cmd']} failed: {type(exc).__name__}: {exc}",
                                command.get("id"))]

    @staticmethod
    def _reply(command: dict[str, Any], kind: str, **fields: Any) -> dict[str, Any]:
        reply: dict[str, Any] = {"type": kind, **fields}
        if "id" in command:
            reply["id"] = command["id"]
        return reply

    @staticmethod
    def _error(message: str, request_id: Any) -> dict[str, Any]:
        reply: dict[str, Any] = {"type": p.RESP_ERROR, "message": message}
        if request_id is not None:
            reply["id"] = request_id
        return reply

    def _extra(self) -> dict[str, Any]:
        fields = getattr(self.policy, "reply_fields", None)
        return dict(fields()) if fields is not None else {}

    def _frame(self) -> dict[str, Any]:
        frame = self.env.render()
        if self.env.render_mode == "ansi":
            return p.ansi_payload(frame)
        return p.rgb_payload(frame)

    def _choose(self, observation: Any, legal: list[int] | None, space: Any) -> Any:
        action = self.policy.select_action(observation, legal, space)
        if action is None:
            action = noop_action(space, legal)
        if legal is not None and action not in legal:
            raise ValueError(f"the policy chose {action!r}, which is not a legal action {legal}")
        return action

    # -- handlers --

    def _on_ping(self, command: dict[str, Any]) -> list[dict[str, Any]]:
        return [self._reply(command, p.RESP_PONG)]

    def _on_reset(self, command: dict[str, Any]) -> list[dict[str, Any]]:
        seed = command.get("seed")
        reply = self._reply(
            command, p.RESP_READY, run_id=self.run_id, env_id=self.env_id, seed=seed,
            observation_shape=None, reproducible=bool(getattr(self.policy, "reproducible", False)),
        )
        self._episode += 1
        if self.operator_seed is None:
            self.policy.reset(seed)
        else:
            self.policy.reset(operator_episode_seed(self.operator_seed, self._episode))
        if self.env is None:
            return [reply]
        self._obs, self._info = self.env.reset(seed=seed)
        if seed is not None:
            self.env.action_space.seed(seed)
        self._steps, self._episode_reward, self._done = 0, 0.0, False
        shape = getattr(self.env.observation_space, "shape", None)
        reply["observation_shape"] = list(shape) if shape is not None else None
        if self.send_observations:
            reply["observation"] = self._obs
        if self.render_every > 0:
            reply["render_payload"] = self._frame()
        return [reply]

    def _on_step(self, command: dict[str, Any]) -> list[dict[str, Any]]:
        if self.env is None:
            raise RuntimeError(
                "this worker has no environment (started without --env-id); "
                "use init_agent/select_action"
            )
        if self._obs is None:
            raise RuntimeError("send reset before the first step")
        if self._done:
            raise RuntimeError("the episode has ended; send reset to start the next one")
        space = self.env.action_space
        action = self._choose(self._obs, _legal_from_info(self._info), space)
        extra = self._extra()
        obs, reward, terminated, truncated, info = self.env.step(action)
        index = self._steps
        self._steps += 1
        reward = float(reward)
        self._episode_reward += reward
        terminated, truncated = bool(terminated), bool(truncated)
        if self.max_steps > 0 and self._steps >= self.max_steps and not terminated:
            truncated = True
        self._obs, self._info = obs, info
        self.policy.on_step_result(obs, action, reward, terminated, truncated)
        done = terminated or truncated
        step = self._reply(
            command, p.RESP_STEP, step_index=index, action=action, reward=reward,
            terminated=terminated, truncated=truncated, episode_reward=self._episode_reward,
            **extra,
        )
        if self.send_observations:
            step["observation"] = obs
        if self.render_every > 0 and (done or index % self.render_every == 0):
            step["render_payload"] = self._frame()
        if not done:
            return [step]
        self._done = True
        end = self._reply(
            command, p.RESP_EPISODE_END, total_reward=self._episode_reward,
            episode_length=self._steps, terminated=terminated, truncated=truncated,
        )
        return [step, end]

    def _on_init_agent(self, command: dict[str, Any]) -> list[dict[str, Any]]:
        from gymnasium import spaces

        settings = dict(command.get("settings") or {})
        self._player_id = command["player_id"]
        game = command.get("game_name") or command.get("task")
        if settings.get("n_actions") is not None:
            self.agent_action_space = spaces.Discrete(int(settings["n_actions"]))
        elif game and self.env is None:
            space = game_action_space(game, self._player_id)
            if space is not None:
                self.agent_action_space = space
        hook = getattr(self.policy, "init_agent", None)
        if hook is not None:
            hook(self._player_id, command.get("env_name"), command.get("task") or game, settings)
        if "seed" in settings:
            self.policy.reset(settings["seed"])
        return [self._reply(
            command, p.RESP_AGENT_READY, player_id=self._player_id,
            reproducible=bool(getattr(self.policy, "reproducible", False)),
        )]

    def _on_select_action(self, command: dict[str, Any]) -> list[dict[str, Any]]:
        observation = command["observation"]
        legal = command.get("legal_actions")
        if legal is None and command.get("action_mask") is not None:
            legal = p.legal_from_mask(command["action_mask"])
        if legal is None and isinstance(observation, dict) and "action_mask" in observation:
            legal = p.legal_from_mask(observation["action_mask"])
        if legal is not None and not legal:
            raise ValueError("no legal actions: the action mask or list is empty")
        space = self.agent_action_space
        if space is None and self.env is not None:
            space = self.env.action_space
        action = self._choose(observation, legal, space)
        player = command.get("player_id") or self._player_id
        return [self._reply(
            command, p.RESP_ACTION_SELECTED, action=action, player_id=player, **self._extra()
        )]


def _peek_id(line: bytes) -> Any:
    """The ``id`` of a line that failed validation, when the line is at least a JSON object."""
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if isinstance(obj, dict) and isinstance(obj.get("id"), (str, int)):
        return obj["id"]
    return None
