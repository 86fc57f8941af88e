"""Driver-side handles on worker subprocesses: :class:`OperatorProcessHandle` and
:class:`MultiAgentOperatorHandle`.

A handle owns one worker process started with pipes on stdin, stdout and stderr, supervised like
every child of mosaic (:mod:`mosaic.runtime.processes`): stdout lines go to a queue, stderr lines
to a bounded tail and to ``logging`` (logger ``mosaic.operators.worker.<operator_id>``, at the
level the line starts with, else INFO). Writes to stdin are non-blocking with a deadline, so no
call waits without a bound.

Failures are told apart:

* :class:`~mosaic.core.errors.WorkerTimeout`: the worker is alive but sent no reply in time;
* :class:`~mosaic.core.errors.WorkerCrashed`: the worker exited (its exit code and stderr tail
  are on the exception);
* :class:`~mosaic.core.errors.WorkerProtocolError`: a line that is not valid JSON or not a valid
  reply;
* :class:`WorkerReplyError`: the worker answered ``error`` (only when the caller did not ask to get
  error replies back as dicts);
* :class:`MissingEpisodeEnd` (a ``WorkerProtocolError``): a ``step`` reply ended the episode but
  no ``episode_end`` followed within the step's timeout; the step reply is on the exception.

Request ids: :meth:`OperatorProcessHandle.send` adds an ``id``;
:meth:`~OperatorProcessHandle.request` returns the reply to that request and drops late replies
to earlier requests that timed out. A worker that echoes ids is matched by id; one that has never
echoed an id (MOSAIC's workers) is matched by order, each command being owed its replies, so a
late reply is still recognised and never shifts the replies after it.

MOSAIC's dialect is read as well as mosaic's (:mod:`mosaic.operators.dialect`): its unsolicited
``init`` lines, and ``agent_ready``/``agent_initialized`` lines that answer no ``init_agent``,
are kept in :attr:`OperatorProcessHandle.routing` (``unsolicited``) and skipped; ``episode_done``
and MOSAIC's field names are renamed to mosaic's; a ``step_index`` counted from 1 is counted from
0. A line that fits neither dialect is a :class:`~mosaic.core.errors.WorkerProtocolError` that
says so.

The stdout reader is in ``_reply_reader``, the reply matching in ``_routing`` and
:class:`MultiAgentOperatorHandle` in :mod:`.multi_handle`; this module holds the protocol.

Why one file of this length: every request, its reply matching and the failure it can end in
belong to one handle, whose guarantees (above) are easiest to check in one place.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import queue
import select
import subprocess
import threading
import time
from collections.abc import Mapping
from typing import Any

from mosaic.core.errors import WorkerCrashed, WorkerError, WorkerProtocolError, WorkerTimeout
from mosaic.operators import protocol as p
from mosaic.operators.api.config import OperatorConfig
from mosaic.operators.driver._commands import init_agent_command, select_action_command
from mosaic.operators.driver._reply_reader import EOF, OVERSIZE, ReplyReader
from mosaic.operators.driver._routing import NEITHER_DIALECT, ReplyRouter
from mosaic.runtime.processes.child import ChildProcess
from mosaic.runtime.processes.stop import KILLED, UNREAPED, StopSchedule, stop_in_order

__all__ = ["MissingEpisodeEnd", "OperatorProcessHandle", "WorkerReplyError"]

log = logging.getLogger("mosaic.operators.driver.handle")


#: How long a worker that closed its stdout gets to exit before it is reported without its exit
#: code.
_EXIT_WAIT_S = 5.0


class WorkerReplyError(WorkerError):
    """The worker answered a command with an ``error`` reply; ``message`` is its text."""

    def __init__(self, operator_id: str, message: str, reply: dict[str, Any]) -> None:
        self.operator_id = operator_id
        self.message = message
        self.reply = reply
        super().__init__(f"worker {operator_id} answered with an error: {message}")


class MissingEpisodeEnd(WorkerProtocolError):
    """A ``step`` reply ended the episode, and no ``episode_end`` followed in time.

    ``step`` is that step reply: the step was taken, and a driver can still record it.
    """

    def __init__(self, operator_id: str, step: dict[str, Any], timeout: float) -> None:
        how = "terminated" if step.get("terminated") else "truncated"
        super().__init__(operator_id, repr(step),
                         f"its step reply ended the episode ({how}) but no episode_end "
                         f"followed within {timeout:.2f} s")
        self.step = step
        self.args = (f"worker {operator_id} sent a step reply that ended the episode ({how}) "
                     f"but no episode_end within {timeout:.2f} s",)


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
        self._send_lock = threading.Lock()
        self._stop_lock = threading.Lock()
        self._eof = False
        self._stopped = False
        self._stdin_fd: int | None = None
        if self.interactive and process.stdin is not None:
            self._stdin_fd = process.stdin.fileno()
            os.set_blocking(self._stdin_fd, False)
        self._replies = ReplyReader(self.MAX_QUEUED_LINES)
        #: How replies are matched to commands, and what the worker's dialect showed so far
        #: (``echoes_ids``, ``unsolicited`` lines, ``step_base``, ``end_spellings``).
        self.routing = ReplyRouter()
        self._child = ChildProcess(
            process, operator_id, read_stdout=self._replies.read,
            log=logging.getLogger(f"mosaic.operators.worker.{operator_id}"),
            default_level=logging.INFO, keep_lines=self.STDERR_TAIL_LINES)

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
        return self._child.alive()

    @property
    def exit_code(self) -> int | None:
        """The exit code (negative: killed by that signal), or None while running."""
        return self._child.exit_code

    def stderr_tail(self, max_chars: int = 8000) -> str:
        """The last lines the worker wrote to stderr (at most ``max_chars`` characters)."""
        return "\n".join(self._child.stderr_lines())[-max_chars:]

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
        self.routing.sent(request_id, command)
        return request_id

    def send_raw(self, data: bytes, *, timeout: float = 5.0) -> None:
        """Write ``data`` as is (for protocol tests: malformed lines); same errors as send.

        Each line is owed a reply like a command (an ``error`` for a malformed one).
        """
        self._write(data, timeout)
        self.routing.sent_raw(data)

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
        return self.send(
            select_action_command(observation, legal_actions, action_mask, player_id, info))

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
        reply = self._next_reply(timeout)
        if reply is None:
            raise self._timeout(timeout)
        return self._checked(reply[0], accept_error)

    def try_read_response(
        self, timeout: float = 0.1, *, accept_error: bool = False
    ) -> dict[str, Any] | None:
        """Like :meth:`read_response`, but None when no reply arrived within ``timeout``."""
        reply = self._next_reply(timeout)
        if reply is None:
            return None
        return self._checked(reply[0], accept_error)

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
        ``episode_end`` reply that follows it (else None). ``timeout`` bounds both; a missing
        ``episode_end`` raises :class:`MissingEpisodeEnd`."""
        deadline = time.monotonic() + timeout
        request_id = self.send({"cmd": p.CMD_STEP}, timeout=timeout)
        step = self._expect(self._await(request_id, deadline, timeout, False), p.RESP_STEP)
        if not (step["terminated"] or step["truncated"]):
            return step, None
        try:
            end = self._await(request_id, deadline, timeout, False)
        except WorkerTimeout:
            raise MissingEpisodeEnd(self.operator_id, step, timeout) from None
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
        reply = self.request(init_agent_command(player_id, env_name, task, settings), timeout)
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
        command = select_action_command(observation, legal_actions, action_mask, player_id, info)
        return self._expect(self.request(command, timeout), p.RESP_ACTION_SELECTED)

    def _await(
        self, request_id: int, deadline: float, timeout: float, accept_error: bool
    ) -> dict[str, Any]:
        while True:
            routed = self._next_reply(max(0.0, deadline - time.monotonic()))
            if routed is None:
                raise self._timeout(timeout)
            reply, answers = routed
            if answers is not None and answers != request_id:
                log.debug("worker %s: dropped a reply to request %r while waiting for %r: %s",
                          self.operator_id, answers, request_id, reply.get("type"))
                continue
            return self._checked(reply, accept_error)

    def _next_reply(self, timeout: float) -> tuple[dict[str, Any], int | None] | None:
        """The next reply and the request it answers (see ``_routing``), skipping unsolicited
        lines; None when none came within ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            line = self._next_line(max(0.0, deadline - time.monotonic()))
            if line is None:
                return None
            routed = self._route(line)
            if routed is not None:
                return routed
            log.debug("worker %s: unsolicited line %.200r", self.operator_id,
                      self.routing.unsolicited[-1])

    def _next_line(self, timeout: float) -> Any:
        """The next stdout line (bytes or ``OVERSIZE``), None on timeout; raises on exit."""
        if self._eof:
            raise self._crashed()
        deadline = time.monotonic() + timeout
        exited_at: float | None = None
        while True:
            remaining = deadline - time.monotonic()
            try:
                item = self._replies.replies.get(timeout=max(0.0, min(remaining, 0.25)))
            except queue.Empty:
                if not self._child.alive():
                    # The reader normally reports EOF right after exit; a grandchild holding
                    # the pipe open must not make a dead worker look alive.
                    exited_at = exited_at or time.monotonic()
                    if time.monotonic() - exited_at > 0.5:
                        raise self._crashed() from None
                if remaining <= 0:
                    return None
                continue
            if item is EOF:
                self._eof = True
                raise self._crashed()
            return item

    def _route(self, line: Any) -> tuple[dict[str, Any], int | None] | None:
        if line is OVERSIZE:
            raise WorkerProtocolError(self.operator_id, "", f"line over {p.MAX_LINE_BYTES} bytes")
        try:
            try:
                obj = p.decode_object(line)
            except p.ProtocolError as exc:
                raise p.ProtocolError(f"{exc}; {NEITHER_DIALECT}") from None
            return self.routing.route(obj)
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
        # A worker whose stdout has closed is exiting; on a busy machine the interpreter's
        # teardown can take seconds, and its exit code and last words are what the error is for.
        # The wait ends as soon as it exits.
        self._child.wait(_EXIT_WAIT_S)
        self._child.drain_stderr(0.5)
        return WorkerCrashed(self.operator_id, self._child.exit_code, self.stderr_tail())

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
                return self._child.exit_code
            try:
                if not self._child.alive():
                    self.stop_outcome = "already_exited"
                else:
                    can_ask = self._stdin_fd is not None
                    self.stop_outcome = stop_in_order(
                        self._child, StopSchedule.sharing(max(timeout, 0.4), ask=can_ask),
                        ask=self._ask_to_stop if can_ask else None,
                        close_stdin=self._close_stdin)
                if self.stop_outcome in (KILLED, UNREAPED):
                    log.warning("worker %s did not stop in time: %s", self.operator_id,
                                self.stop_outcome)
            finally:
                self._stopped = True
                self._close_pipes()
            return self._child.exit_code

    def _ask_to_stop(self, timeout: float) -> None:
        # One that cannot be asked (gone, or not reading its stdin) is ended by the next steps.
        with contextlib.suppress(WorkerError):
            self.send({"cmd": p.CMD_STOP}, timeout=timeout)

    def close_stdin(self) -> None:
        """Close the worker's stdin; a conforming worker exits on the EOF. Idempotent."""
        self._close_stdin()

    def _close_stdin(self) -> None:
        with self._send_lock:
            self._stdin_fd = None
            if self.process.stdin is not None and not self.process.stdin.closed:
                with contextlib.suppress(OSError):
                    self.process.stdin.close()

    def _close_pipes(self) -> None:
        self._close_stdin()
        self._replies.close()
        self._child.release()
