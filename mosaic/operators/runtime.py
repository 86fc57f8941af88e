"""The main loop every worker shares: :class:`InteractiveRuntime`.

A worker is a small program (see ``workers/``) that builds a *policy* and hands it to
:func:`run_worker`. The runtime then reads protocol commands from stdin (see
:mod:`mosaic.operators.protocol`), calls the policy, and writes one reply per command to stdout.

Two ways to drive a worker:

* ``reset`` / ``step``: the worker owns a Gymnasium environment made from ``--env-id``. ``step``
  asks the policy for an action, steps the environment and replies ``step``; the step that ends
  the episode is followed by one ``episode_end`` line.
* ``init_agent`` / ``select_action``: the driver owns the environment (multi-agent games) and
  sends observations; the worker replies ``action_selected``. ``reset`` then only seeds the policy.

Guarantees: stdout carries protocol lines only (file descriptor 1 is redirected to stderr, so even
stray prints from libraries land in the log); a bad line or an unknown command gets an ``error``
reply and the loop continues; an exception in the policy or the environment gets an ``error``
reply with its message and the loop continues; ``stop`` gets ``stopped`` and the worker exits 0;
EOF on stdin exits 0; SIGTERM exits 0 promptly after cleanup, without a reply, whatever the worker
is doing (including rendering or waiting for an HTTP reply); the worker also exits when its parent
dies (``PR_SET_PDEATHSIG`` on Linux, plus a parent-pid check every second).
"""

from __future__ import annotations

import argparse
import copy
import ctypes
import io
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, Protocol, runtime_checkable

import numpy as np

from mosaic.operators import protocol as p

__all__ = [
    "BasePolicy",
    "InteractiveRuntime",
    "WorkerPolicy",
    "WorkerTerminated",
    "add_runtime_arguments",
    "copy_space",
    "discrete_actions",
    "install_parent_death_signal",
    "make_env",
    "noop_action",
    "run_worker",
]

log = logging.getLogger("mosaic.worker")

#: The launcher puts its own pid here so a worker can tell that its parent died before it started.
PARENT_PID_ENV = "MOSAIC_PARENT_PID"


@runtime_checkable
class WorkerPolicy(Protocol):
    """What the runtime needs from a policy. Optional extras are listed on :class:`BasePolicy`."""

    def reset(self, seed: int | None) -> None:
        """A new episode starts; seed all randomness from ``seed`` (None = unseeded)."""

    def select_action(
        self, observation: Any, legal_actions: list[int] | None = None, action_space: Any = None
    ) -> Any:
        """The action for ``observation``; ``None`` means the no-op action."""

    def on_step_result(
        self, observation: Any, action: Any, reward: float, terminated: bool, truncated: bool
    ) -> None:
        """The outcome of the last action (only in ``reset``/``step`` mode)."""


class BasePolicy:
    """Defaults for a worker policy. Subclass and implement :meth:`select_action`.

    ``reproducible`` is the worker's claim that the same seed gives the same actions; it is sent
    in ``ready`` and ``agent_ready`` replies and checked by the conformance checker.
    """

    reproducible: bool = False

    def reset(self, seed: int | None) -> None:
        """Seed the policy for a new episode."""

    def select_action(
        self, observation: Any, legal_actions: list[int] | None = None, action_space: Any = None
    ) -> Any:
        """Return an action; subclasses must implement it."""
        raise NotImplementedError(f"{type(self).__name__} must implement select_action()")

    def on_step_result(
        self, observation: Any, action: Any, reward: float, terminated: bool, truncated: bool
    ) -> None:
        """Receive the outcome of the last action."""

    def init_agent(
        self, player_id: str, env_name: str | None, task: str | None, settings: dict[str, Any]
    ) -> None:
        """The driver assigned this worker to ``player_id`` (``init_agent`` command)."""

    def reply_fields(self) -> dict[str, Any]:
        """Extra fields for the ``step`` / ``action_selected`` reply of the last action."""
        return {}

    def close(self) -> None:
        """Release resources; called once when the worker exits, also on SIGTERM."""


class WorkerTerminated(BaseException):
    """Raised in the worker's main thread by SIGTERM so that it unwinds and cleans up.

    A ``BaseException`` so that ``except Exception`` in policies and environments does not
    swallow it.
    """


# --- action helpers -------------------------------------------------------------------------------


def discrete_actions(action_space: Any) -> list[int] | None:
    """All actions of a ``Discrete`` space as a list, or None for other spaces."""
    from gymnasium import spaces

    if isinstance(action_space, spaces.Discrete):
        start = int(action_space.start)
        return list(range(start, start + int(action_space.n)))
    return None


def noop_action(action_space: Any, legal_actions: list[int] | None = None) -> Any:
    """The do-nothing action: 0 if legal (else the first legal action), or the space's origin.

    For a ``Discrete`` space that is its ``start``; for ``Box`` zeros clipped to the bounds; for
    ``MultiDiscrete`` its ``start``; for ``MultiBinary`` zeros. Raises ``ValueError`` when there
    is neither a legal-action list nor a known space.
    """
    from gymnasium import spaces

    if legal_actions:
        return 0 if 0 in legal_actions else legal_actions[0]
    if isinstance(action_space, spaces.Discrete):
        return int(action_space.start)
    if isinstance(action_space, spaces.Box):
        zero = np.zeros(action_space.shape, dtype=action_space.dtype)
        return np.clip(zero, action_space.low, action_space.high)
    if isinstance(action_space, spaces.MultiDiscrete):
        return np.asarray(action_space.start).copy()
    if isinstance(action_space, spaces.MultiBinary):
        return np.zeros(action_space.shape, dtype=action_space.dtype)
    raise ValueError(
        f"no no-op action known for action space {action_space!r} and no legal actions given"
    )


def _legal_from_info(info: Any) -> list[int] | None:
    if isinstance(info, dict) and info.get("action_mask") is not None:
        return p.legal_from_mask(info["action_mask"])
    return None


# --- environment ----------------------------------------------------------------------------------


def make_env(
    env_id: str,
    env_kwargs: dict[str, Any] | None = None,
    *,
    render_every: int = 0,
    render_mode: str = "auto",
) -> Any:
    """Make the Gymnasium environment ``env_id``.

    With ``render_every`` > 0 the environment gets a render mode: ``render_mode`` if it is
    ``rgb_array`` or ``ansi``; with ``auto``, ``rgb_array`` when the environment lists it, else
    ``ansi``. Raises whatever ``gymnasium.make`` raises for an unknown id or bad kwargs.
    """
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    kwargs = dict(env_kwargs or {})
    if render_every > 0:
        mode = render_mode
        if mode == "auto":
            spec = gym.spec(env_id)
            entry = spec.entry_point
            creator = load_env_creator(entry) if isinstance(entry, str) else entry
            modes = getattr(creator, "metadata", {}).get("render_modes", [])
            mode = "rgb_array" if "rgb_array" in modes else "ansi"
        kwargs["render_mode"] = mode
    return gym.make(env_id, **kwargs)


# --- the loop -------------------------------------------------------------------------------------


class InteractiveRuntime:
    """Serve protocol commands from ``stdin`` to ``policy``, writing replies to ``stdout``.

    ``env`` is a Gymnasium environment for ``reset``/``step`` mode, or None for a worker that only
    answers ``init_agent``/``select_action`` (``step`` then gets an ``error`` reply). Episodes end
    after ``max_steps`` steps when it is > 0 (reported as truncated). With ``render_every`` = N > 0
    the ``ready`` reply, every N-th step and the last step of an episode carry a
    ``render_payload``. With ``send_observations`` the observation is in ``ready`` and ``step``.

    ``stdin``/``stdout`` are binary streams (default: the process's). :meth:`serve` returns the
    exit code; every exception from the policy or the environment becomes an ``error`` reply.
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
        stdin: BinaryIO | None = None,
        stdout: BinaryIO | None = None,
    ) -> None:
        self.policy = policy
        self.env = env
        self.env_id = env_id
        self.run_id = run_id
        self.max_steps = max_steps
        self.render_every = render_every
        self.send_observations = send_observations
        self.agent_action_space = agent_action_space
        self._in = stdin if stdin is not None else sys.stdin.buffer
        self._out = stdout if stdout is not None else sys.stdout.buffer
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
        try:
            self.close()
        except WorkerTerminated:  # SIGTERM during cleanup after stop or EOF: still a clean exit
            pass

    # -- plumbing --

    def _lines(self) -> Iterator[bytes]:
        while True:
            line = self._in.readline(p.MAX_LINE_BYTES + 1)
            if not line:
                return
            if len(line) > p.MAX_LINE_BYTES and not line.endswith(b"\n"):
                while line and not line.endswith(b"\n"):  # discard the rest of the long line
                    line = self._in.readline(p.MAX_LINE_BYTES)
                self._write([self._error(f"line longer than {p.MAX_LINE_BYTES} bytes", None)])
                continue
            if line.strip():
                yield line

    def _write(self, replies: list[dict[str, Any]]) -> None:
        for reply in replies:
            try:
                data = p.encode_line(reply)
            except p.ProtocolError as exc:
                data = p.encode_line(self._error(f"cannot encode reply: {exc}", reply.get("id")))
            self._out.write(data)
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
        self.policy.reset(seed)
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
        if settings.get("n_actions") is not None:
            self.agent_action_space = spaces.Discrete(int(settings["n_actions"]))
        hook = getattr(self.policy, "init_agent", None)
        if hook is not None:
            hook(self._player_id, command.get("env_name"), command.get("task"), settings)
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


# --- process setup --------------------------------------------------------------------------------


def install_parent_death_signal(poll_interval: float = 1.0) -> None:
    """Make this process get SIGTERM when its parent dies.

    On Linux ``prctl(PR_SET_PDEATHSIG, SIGTERM)`` asks the kernel for it. Note that the kernel
    sends it when the parent *thread* that started this process exits. A daemon thread also
    checks every ``poll_interval`` seconds whether the parent pid changed, and at start whether
    the launcher's pid (``MOSAIC_PARENT_PID``) is still alive, which covers a parent that died
    before the ``prctl`` call and systems without ``prctl``.
    """
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            pr_set_pdeathsig = 1
            libc.prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
        except (OSError, AttributeError) as exc:  # not fatal: the pid check still works
            log.debug("prctl(PR_SET_PDEATHSIG) unavailable: %s", exc)
    parent = os.getppid()
    launcher = os.environ.get(PARENT_PID_ENV, "")
    if launcher.isdigit() and not _pid_alive(int(launcher)):
        os.kill(os.getpid(), signal.SIGTERM)
        return

    def watch() -> None:
        while True:
            time.sleep(poll_interval)
            if os.getppid() != parent:
                os.kill(os.getpid(), signal.SIGTERM)
                return

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _install_sigterm_handler() -> None:
    fired = False

    def on_sigterm(signum: int, frame: Any) -> None:
        nonlocal fired
        if fired:  # a second SIGTERM must not interrupt the cleanup of the first
            return
        fired = True
        raise WorkerTerminated()

    signal.signal(signal.SIGTERM, on_sigterm)


def _protocol_stdout() -> BinaryIO:
    """A private handle on the real stdout; fd 1 and ``sys.stdout`` then point at stderr."""
    sys.stdout.flush()
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(fd, "wb")


def add_runtime_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options every worker shares (environment, rendering, batch mode, logging)."""
    group = parser.add_argument_group("runtime")
    group.add_argument("--env-id", default="",
                       help="Gymnasium id of the environment this worker owns (reset/step mode); "
                            "omit it when the driver owns the environment")
    group.add_argument("--env-kwargs", default="{}", type=_json_object,
                       help='JSON object of keyword arguments for gymnasium.make, e.g. '
                            '\'{"is_slippery": false}\'')
    group.add_argument("--run-id", default=os.environ.get("OPERATOR_RUN_ID", ""),
                       help="run id sent in ready replies (default: $OPERATOR_RUN_ID)")
    group.add_argument("--max-steps", type=int, default=0,
                       help="truncate episodes after this many steps (0 = no limit)")
    group.add_argument("--render-every", type=int, default=0, metavar="N",
                       help="send a render frame every N steps (0 = never, the default)")
    group.add_argument("--render-mode", choices=("auto", "rgb_array", "ansi"), default="auto",
                       help="frame kind; auto prefers rgb_array (PNG) over ansi text")
    group.add_argument("--send-observations", action="store_true",
                       help="include observations in ready and step replies")
    group.add_argument("--n-actions", type=int, default=None,
                       help="size of a Discrete action space when the driver owns the env")
    group.add_argument("--batch", action="store_true",
                       help="run --episodes episodes without reading commands")
    group.add_argument("--episodes", type=int, default=1, help="episodes in --batch mode")
    group.add_argument("--seed", type=int, default=None,
                       help="first seed in --batch mode (episode i uses seed + i)")
    group.add_argument("--log-level", default=os.environ.get("MOSAIC_WORKER_LOG_LEVEL", "INFO"),
                       help="stderr log level (default INFO)")


def _json_object(text: str) -> dict[str, Any]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def run_worker(name: str, args: argparse.Namespace, make_policy: Callable[[], Any]) -> int:
    """Set the process up as worker ``name`` and serve until stop; returns the exit code.

    Order: stderr logging, SIGTERM handler, parent-death signal, stdout protection, then the
    policy and the environment. A policy or environment that cannot be built is logged and
    gives exit code 2 before any command is read.
    """
    logging.basicConfig(
        stream=sys.stderr, level=str(args.log_level).upper(),
        format="%(levelname)s %(name)s: %(message)s",
    )
    _install_sigterm_handler()
    try:
        install_parent_death_signal()
        out = _protocol_stdout()
        try:
            policy = make_policy()
            env = None
            if args.env_id:
                env = make_env(args.env_id, args.env_kwargs, render_every=args.render_every,
                               render_mode=args.render_mode)
        except Exception as exc:
            log.error("%s could not start: %s: %s", name, type(exc).__name__, exc)
            return 2
        agent_space = None
        if args.n_actions is not None:
            from gymnasium import spaces

            agent_space = spaces.Discrete(args.n_actions)
        runtime = InteractiveRuntime(
            policy, env=env, env_id=args.env_id, run_id=args.run_id, max_steps=args.max_steps,
            render_every=args.render_every, send_observations=args.send_observations,
            agent_action_space=agent_space, stdout=out,
        )
        log.debug("%s ready (pid %d)", name, os.getpid())
        if args.batch:
            if env is None:
                log.error("--batch needs --env-id")
                return 2
            return runtime.serve_batch(args.episodes, args.seed)
        return runtime.serve()
    except WorkerTerminated:  # SIGTERM before the loop started: nothing to clean up yet
        return 0


def copy_space(action_space: Any, seed: int | None) -> Any:
    """A private, seeded copy of ``action_space`` for sampling without touching the original."""
    space = copy.deepcopy(action_space)
    space.seed(seed)
    return space
