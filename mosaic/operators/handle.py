"""Driver-side handles on worker subprocesses: :class:`OperatorProcessHandle` and
:class:`MultiAgentOperatorHandle`.

A handle owns one worker process started with pipes on stdin, stdout and stderr. Two daemon
threads read the pipes: stdout lines go to a queue, stderr lines go to a bounded tail and to
``logging`` (logger ``mosaic.operators.worker.<operator_id>``, at the level the line starts with,
else INFO). Writes to stdin are non-blocking with a deadline, so no call waits without a bound.

Failures are told apart:

* :class:`~mosaic.errors.WorkerTimeout`: the worker is alive but sent no reply in time;
* :class:`~mosaic.errors.WorkerCrashed`: the worker exited (its exit code and stderr tail are on
  the exception);
* :class:`~mosaic.errors.WorkerProtocolError`: a line that is not valid JSON or not a valid reply;
* :class:`WorkerReplyError`: the worker answered ``error`` (only when the caller did not ask to get
  error replies back as dicts).

Request ids: :meth:`OperatorProcessHandle.send` adds an ``id``;
:meth:`~OperatorProcessHandle.request` returns the reply with that id and drops replies with other
ids (late replies to requests that timed out). A reply without ``id`` is taken as the answer, so
workers that do not echo ids still work, but then a late reply cannot be told from the current
one.
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import select
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

from mosaic.errors import WorkerCrashed, WorkerError, WorkerProtocolError, WorkerTimeout
from mosaic.operators import protocol as p
from mosaic.operators.config import OperatorConfig

__all__ = ["MultiAgentOperatorHandle", "OperatorProcessHandle", "WorkerReplyError"]

log = logging.getLogger("mosaic.operators.handle")

_EOF = object()
_OVERSIZE = object()
_LEVELS = {name: getattr(logging, name) for name in ("DEBUG", "INFO", "WARNING", "ERROR",
                                                     "CRITICAL")}


class WorkerReplyError(WorkerError):
    """The worker answered a command with an ``error`` reply; ``message`` is its text."""

    def __init__(self, operator_id: str, message: str, reply: dict[str, Any]) -> None:
        self.operator_id = operator_id
        self.message = message
        self.reply = reply
        super().__init__(f"worker {operator_id} answered with an error: {message}")


class OperatorProcessHandle:
    """One worker subprocess and the protocol spoken with it.

    ``process`` must have been started with binary pipes for stdout and stderr, and for stdin
    unless the worker runs in batch mode (``interactive=False``, then :meth:`send` raises
    ``WorkerError``). Every method that waits takes a timeout in seconds. Not thread-safe for
    concurrent requests; :meth:`stop` may be called from any thread.
    """

    #: Lines of worker stderr kept for :meth:`stderr_tail` and crash reports.
    STDERR_TAIL_LINES = 200
    #: Reply lines buffered before the reader stops reading (back-pressure on a chatty worker).
    MAX_QUEUED_LINES = 10_000

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        operator_id: str,
        config: OperatorConfig | None = None,
        run_id: str = "",
        *,
        interactive: bool = True,
    ) -> None:
        self.process = process
        self.operator_id = operator_id
        self.config = config
        self.run_id = run_id
        self.interactive = interactive and process.stdin is not None
        #: How :meth:`stop` ended the process: ``stopped``, ``eof``, ``sigterm``, ``sigkill``,
        #: ``already_exited`` or ``unreaped``; None before :meth:`stop`.
        self.stop_outcome: str | None = None
        self._ids = itertools.count(1)
        self._replies: queue.Queue[Any] = queue.Queue(self.MAX_QUEUED_LINES)
        self._stderr: deque[str] = deque(maxlen=self.STDERR_TAIL_LINES)
        self._stderr_lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._stop_lock = threading.Lock()
        self._closing = threading.Event()
        self._eof = False
        self._stopped = False
        self._worker_log = logging.getLogger(f"mosaic.operators.worker.{operator_id}")
        self._stdin_fd: int | None = None
        if self.interactive and process.stdin is not None:
            self._stdin_fd = process.stdin.fileno()
            os.set_blocking(self._stdin_fd, False)
        self._stdout_thread = threading.Thread(
            target=self._read_stdout, name=f"{operator_id}-stdout", daemon=True)
        self._stderr_thread = threading.Thread(
            target=self._read_stderr, name=f"{operator_id}-stderr", daemon=True)
        self._stdout_thread.start()
        self._stderr_thread.start()

    def __repr__(self) -> str:
        return f"<OperatorProcessHandle {self.operator_id} pid={self.pid} exit={self.exit_code}>"

    def __enter__(self) -> OperatorProcessHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- state --

    @property
    def pid(self) -> int:
        """The worker's process id."""
        return self.process.pid

    @property
    def is_running(self) -> bool:
        """True while the process has not exited."""
        return self.process.poll() is None

    @property
    def exit_code(self) -> int | None:
        """The exit code (negative: killed by that signal), or None while running."""
        return self.process.poll()

    def stderr_tail(self, max_chars: int = 8000) -> str:
        """The last lines the worker wrote to stderr (at most ``max_chars`` characters)."""
        with self._stderr_lock:
            text = "\n".join(self._stderr)
        return text[-max_chars:]

    # -- sending --

    def send(self, command: Mapping[str, Any], *, timeout: float = 5.0) -> int:
        """Write ``command`` with a fresh ``id`` added; returns the id.

        Raises ``WorkerError`` for a non-interactive handle, :class:`WorkerCrashed` when the
        worker has exited, :class:`WorkerTimeout` when the pipe stays full for ``timeout``
        seconds (the worker is not reading; a partial line may then be in the pipe, so stop the
        worker), and ``ProtocolError`` when ``command`` cannot be encoded.
        """
        request_id = next(self._ids)
        self._write(p.encode_line({**command, "id": request_id}), timeout)
        return request_id

    def send_raw(self, data: bytes, *, timeout: float = 5.0) -> None:
        """Write ``data`` as is (for protocol tests: malformed lines); same errors as send."""
        self._write(data, timeout)

    def send_reset(self, seed: int | None = None) -> int:
        """Send ``reset``; returns the request id. Read the ``ready`` reply yourself."""
        return self.send({"cmd": p.CMD_RESET, "seed": seed})

    def send_step(self) -> int:
        """Send ``step``; returns the request id."""
        return self.send({"cmd": p.CMD_STEP})

    def send_stop(self) -> int:
        """Send ``stop``; returns the request id (use :meth:`stop` to also reap the process)."""
        return self.send({"cmd": p.CMD_STOP})

    def send_select_action(
        self,
        observation: Any,
        legal_actions: list[int] | None = None,
        action_mask: list[int] | None = None,
        player_id: str | None = None,
        info: dict[str, Any] | None = None,
    ) -> int:
        """Send ``select_action`` without waiting; returns the request id."""
        return self.send(_select_action(observation, legal_actions, action_mask, player_id, info))

    def _write(self, data: bytes, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        view = memoryview(data)
        with self._send_lock:
            fd = self._stdin_fd
            if fd is None:
                raise WorkerError(
                    f"worker {self.operator_id} is not interactive or its stdin is closed")
            while view:
                try:
                    view = view[os.write(fd, view):]
                except BlockingIOError:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise WorkerTimeout(
                            f"worker {self.operator_id} did not read its stdin for "
                            f"{timeout:.1f} s (pid {self.pid})") from None
                    select.select([], [fd], [], min(remaining, 0.1))
                except (BrokenPipeError, ValueError, OSError) as exc:
                    raise self._crashed() from exc

    # -- receiving --

    def read_response(self, timeout: float = 5.0, *, accept_error: bool = False) -> dict[str, Any]:
        """The next reply, whatever its id, waiting up to ``timeout`` seconds.

        Raises :class:`WorkerTimeout`, :class:`WorkerCrashed`, :class:`WorkerProtocolError`, or
        :class:`WorkerReplyError` for an ``error`` reply unless ``accept_error``.
        """
        line = self._next_line(timeout)
        if line is None:
            raise self._timeout(timeout)
        return self._checked(self._parse(line), accept_error)

    def try_read_response(
        self, timeout: float = 0.1, *, accept_error: bool = False
    ) -> dict[str, Any] | None:
        """Like :meth:`read_response`, but None when no reply arrived within ``timeout``."""
        line = self._next_line(timeout)
        if line is None:
            return None
        return self._checked(self._parse(line), accept_error)

    def request(
        self, command: Mapping[str, Any], timeout: float = 5.0, *, accept_error: bool = False
    ) -> dict[str, Any]:
        """Send ``command`` and return its reply (the one with the matching id).

        Replies with another id are dropped (debug log). ``timeout`` bounds the whole exchange.
        Raises as :meth:`read_response` does.
        """
        deadline = time.monotonic() + timeout
        request_id = self.send(command, timeout=timeout)
        return self._await(request_id, deadline, timeout, accept_error)

    def reset(self, seed: int | None = None, timeout: float = 10.0) -> dict[str, Any]:
        """``reset`` with ``seed``; returns the ``ready`` reply."""
        reply = self.request({"cmd": p.CMD_RESET, "seed": seed}, timeout)
        return self._expect(reply, p.RESP_READY)

    def step(self, timeout: float = 5.0) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """One ``step``; returns the ``step`` reply and, if it ended the episode, the
        ``episode_end`` reply that follows it (else None). ``timeout`` bounds both."""
        deadline = time.monotonic() + timeout
        request_id = self.send({"cmd": p.CMD_STEP}, timeout=timeout)
        step = self._expect(self._await(request_id, deadline, timeout, False), p.RESP_STEP)
        if not (step["terminated"] or step["truncated"]):
            return step, None
        end = self._await(request_id, deadline, timeout, False)
        return step, self._expect(end, p.RESP_EPISODE_END)

    def ping(self, timeout: float = 5.0) -> float:
        """Round-trip time of ``ping``/``pong`` in seconds."""
        start = time.perf_counter()
        self._expect(self.request({"cmd": p.CMD_PING}, timeout), p.RESP_PONG)
        return time.perf_counter() - start

    def init_agent(
        self,
        player_id: str,
        env_name: str | None = None,
        task: str | None = None,
        settings: Mapping[str, Any] | None = None,
        timeout: float = 10.0,
    ) -> dict[str, Any]:
        """``init_agent`` for ``player_id``; returns the ``agent_ready`` reply."""
        reply = self.request(_init_agent(player_id, env_name, task, settings), timeout)
        return self._expect(reply, p.RESP_AGENT_READY)

    def select_action(
        self,
        observation: Any,
        legal_actions: list[int] | None = None,
        action_mask: list[int] | None = None,
        player_id: str | None = None,
        timeout: float = 30.0,
        *,
        info: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``select_action``; returns the ``action_selected`` reply (``action`` holds it)."""
        command = _select_action(observation, legal_actions, action_mask, player_id, info)
        return self._expect(self.request(command, timeout), p.RESP_ACTION_SELECTED)

    def _await(
        self, request_id: int, deadline: float, timeout: float, accept_error: bool
    ) -> dict[str, Any]:
        while True:
            line = self._next_line(max(0.0, deadline - time.monotonic()))
            if line is None:
                raise self._timeout(timeout)
            reply = self._parse(line)
            if "id" in reply and reply["id"] != request_id:
                log.debug("worker %s: dropped a reply to request %r while waiting for %r: %s",
                          self.operator_id, reply["id"], request_id, reply.get("type"))
                continue
            return self._checked(reply, accept_error)

    def _next_line(self, timeout: float) -> Any:
        """The next stdout line (bytes or ``_OVERSIZE``), None on timeout; raises on exit."""
        if self._eof:
            raise self._crashed()
        deadline = time.monotonic() + timeout
        exited_at: float | None = None
        while True:
            remaining = deadline - time.monotonic()
            try:
                item = self._replies.get(timeout=max(0.0, min(remaining, 0.25)))
            except queue.Empty:
                if self.process.poll() is not None:
                    # The reader normally reports EOF right after exit; a grandchild holding
                    # the pipe open must not make a dead worker look alive.
                    exited_at = exited_at or time.monotonic()
                    if time.monotonic() - exited_at > 0.5:
                        raise self._crashed() from None
                if remaining <= 0:
                    return None
                continue
            if item is _EOF:
                self._eof = True
                raise self._crashed()
            return item

    def _parse(self, line: Any) -> dict[str, Any]:
        if line is _OVERSIZE:
            raise WorkerProtocolError(self.operator_id, "", f"line over {p.MAX_LINE_BYTES} bytes")
        try:
            return p.parse_response(line)
        except p.ProtocolError as exc:
            raise WorkerProtocolError(
                self.operator_id, line.decode("utf-8", "replace").rstrip("\n"), str(exc)
            ) from None

    def _checked(self, reply: dict[str, Any], accept_error: bool) -> dict[str, Any]:
        if reply["type"] == p.RESP_ERROR and not accept_error:
            raise WorkerReplyError(self.operator_id, reply["message"], reply)
        return reply

    def _expect(self, reply: dict[str, Any], kind: str) -> dict[str, Any]:
        if reply["type"] != kind:
            raise WorkerProtocolError(
                self.operator_id, repr(reply), f"expected a {kind!r} reply, got {reply['type']!r}")
        return reply

    def _timeout(self, timeout: float) -> WorkerTimeout:
        return WorkerTimeout(
            f"worker {self.operator_id} (pid {self.pid}) is running but sent no reply within "
            f"{timeout:.2f} s")

    def _crashed(self) -> WorkerCrashed:
        try:
            self.process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass
        self._stderr_thread.join(timeout=0.5)
        return WorkerCrashed(self.operator_id, self.process.poll(), self.stderr_tail())

    # -- reader threads --

    def _put(self, item: Any) -> None:
        while not self._closing.is_set():
            try:
                self._replies.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def _read_stdout(self) -> None:
        stream = self.process.stdout
        if stream is None:
            self._put(_EOF)
            return
        try:
            while True:
                line = stream.readline(p.MAX_LINE_BYTES + 1)
                if not line:
                    break
                if len(line) > p.MAX_LINE_BYTES and not line.endswith(b"\n"):
                    while line and not line.endswith(b"\n"):
                        line = stream.readline(p.MAX_LINE_BYTES)
                    self._put(_OVERSIZE)
                    continue
                if line.strip():
                    self._put(line)
        except (OSError, ValueError):  # the pipe was closed under us during stop()
            pass
        finally:
            self._put(_EOF)

    def _read_stderr(self) -> None:
        stream = self.process.stderr
        if stream is None:
            return
        try:
            for raw in iter(lambda: stream.readline(8192), b""):
                text = raw.decode("utf-8", "replace").rstrip("\r\n")
                with self._stderr_lock:
                    self._stderr.append(text)
                level = _LEVELS.get(text.split(" ", 1)[0], logging.INFO)
                self._worker_log.log(level, "%s", text)
        except (OSError, ValueError):
            pass

    # -- shutdown --

    def stop(self, timeout: float = 3.0) -> int | None:
        """Stop the worker and reap it; returns its exit code (None only if even SIGKILL did not
        reap it). Idempotent: later calls return the same code at once.

        Escalation, each step bounded by a share of ``timeout``: ``stop`` command (40 %), close
        stdin so the worker sees EOF (15 %), SIGTERM to its process group (30 %), SIGKILL (the
        rest, at least 0.2 s). :attr:`stop_outcome` says which step ended it.
        """
        with self._stop_lock:
            if self._stopped:
                return self.process.poll()
            try:
                if self.process.poll() is not None:
                    self.stop_outcome = "already_exited"
                else:
                    self.stop_outcome = self._escalate(max(timeout, 0.4))
                if self.stop_outcome in ("sigkill", "unreaped"):
                    log.warning("worker %s did not stop in time: %s", self.operator_id,
                                self.stop_outcome)
            finally:
                self._stopped = True
                self._close_pipes()
            return self.process.poll()

    def _escalate(self, budget: float) -> str:
        if self._stdin_fd is not None:
            try:
                self._write(p.encode_line({"cmd": p.CMD_STOP, "id": next(self._ids)}),
                            min(0.2, budget * 0.4))
            except WorkerError:
                pass
            if self._wait(budget * 0.4):
                return "stopped"
        self._close_stdin()
        if self._wait(budget * 0.15):
            return "eof"
        self._signal(signal.SIGTERM)
        if self._wait(budget * 0.3):
            return "sigterm"
        self._signal(signal.SIGKILL)
        if self._wait(max(budget * 0.15, 0.2)):
            return "sigkill"
        return "unreaped"

    def _wait(self, timeout: float) -> bool:
        try:
            self.process.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def _signal(self, sig: signal.Signals) -> None:
        if self.process.poll() is not None:
            return
        try:
            if os.getpgid(self.pid) == self.pid:  # started in its own session: reach its children
                os.killpg(self.pid, sig)
            else:
                self.process.send_signal(sig)
        except (ProcessLookupError, PermissionError):
            pass

    def close_stdin(self) -> None:
        """Close the worker's stdin; a conforming worker exits on the EOF. Idempotent."""
        self._close_stdin()

    def _close_stdin(self) -> None:
        with self._send_lock:
            self._stdin_fd = None
            if self.process.stdin is not None and not self.process.stdin.closed:
                try:
                    self.process.stdin.close()
                except OSError:
                    pass

    def _close_pipes(self) -> None:
        self._close_stdin()
        self._closing.set()
        for thread, stream in ((self._stdout_thread, self.process.stdout),
                               (self._stderr_thread, self.process.stderr)):
            thread.join(timeout=0.5)
            if not thread.is_alive() and stream is not None:
                stream.close()


def _init_agent(
    player_id: str, env_name: str | None, task: str | None, settings: Mapping[str, Any] | None
) -> dict[str, Any]:
    command: dict[str, Any] = {"cmd": p.CMD_INIT_AGENT, "player_id": player_id}
    if env_name is not None:
        command["env_name"] = env_name
    if task is not None:
        command["task"] = task
    if settings is not None:
        command["settings"] = dict(settings)
    return command


def _select_action(
    observation: Any,
    legal_actions: list[int] | None,
    action_mask: list[int] | None,
    player_id: str | None,
    info: dict[str, Any] | None,
) -> dict[str, Any]:
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


#: Keys of a player's settings that are passed on in ``init_agent``.
INIT_AGENT_KEYS = ("n_actions", "seed")


class MultiAgentOperatorHandle:
    """One worker per player of a multi-agent operator; the driver owns the environment.

    Every method that waits takes a timeout. :meth:`stop_all` stops the workers in parallel, so
    it takes about one stop timeout whatever the number of players.
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
                _init_agent(player, env_name, task, self._settings_for(player, settings)),
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

    def stop_all(self, timeout: float = 3.0) -> dict[str, int | None]:
        """Stop every worker in parallel; returns each player's exit code."""
        codes: dict[str, int | None] = {}

        def stop(player: str, handle: OperatorProcessHandle) -> None:
            codes[player] = handle.stop(timeout)

        threads = [threading.Thread(target=stop, args=item, daemon=True)
                   for item in self.player_handles.items()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout + 2.0)
        return codes
