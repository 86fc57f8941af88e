"""The exceptions mosaic raises, as one small tree.

Everything mosaic raises on purpose derives from :class:`MosaicError`, so a caller can catch the
whole family with one clause. Messages say what went wrong and what to do about it.
"""

from __future__ import annotations

__all__ = [
    "CallAbandoned",
    "ClusterTooSmall",
    "CodecError",
    "ComponentDied",
    "ConfigError",
    "FrameTooLarge",
    "IllegalTransition",
    "MalformedFrame",
    "MessageFieldError",
    "MissingExtra",
    "MosaicError",
    "ProtocolVersionMismatch",
    "RemoteError",
    "RequestTimeout",
    "RunCancelled",
    "StoreError",
    "StoreLost",
    "TransportError",
    "UnknownMessageType",
    "WorkerCrashed",
    "WorkerError",
    "WorkerProtocolError",
    "WorkerTimeout",
    "interruption_in",
]


class MosaicError(Exception):
    """Base of every error mosaic raises on purpose."""


class ConfigError(MosaicError):
    """An experiment or evaluation file is invalid.

    ``path`` is the file, ``location`` the key path (``agents[0].muscle``), ``message`` what is
    wrong and what was expected, and ``hint`` what to do about it. ``line`` and ``column``
    (1-based, optional) point into the file; they are shown as ``path:line:column``.

    One error may carry several problems, found in the same file at once: ``problems`` holds one
    ``ConfigError`` per problem (just this error when there is one), the first problem's fields
    are this error's fields, and ``str()`` shows one problem per line. Build such an error with
    :meth:`collect`.
    """

    def __init__(
        self,
        path: str,
        location: str,
        message: str,
        hint: str = "",
        *,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        self.path = path
        self.location = location
        self.message = message
        self.hint = hint
        self.line = line
        self.column = column
        self.problems: tuple[ConfigError, ...] = (self,)
        where = path
        if line is not None:
            where += f":{line}" + (f":{column}" if column is not None else "")
        if location:
            where += f": {location}"
        text = f"{where}: {message}"
        if hint:
            text += f" (hint: {hint})"
        super().__init__(text)

    @classmethod
    def collect(cls, problems: list[ConfigError] | tuple[ConfigError, ...]) -> ConfigError:
        """Return one error carrying all ``problems`` (at least one), in the order given.

        A single problem is returned as it is. Raises ``ValueError`` for an empty list.
        """
        if not problems:
            raise ValueError("ConfigError.collect() needs at least one problem")
        if len(problems) == 1:
            return problems[0]
        first = problems[0]
        error = cls(
            first.path,
            first.location,
            first.message,
            first.hint,
            line=first.line,
            column=first.column,
        )
        error.problems = tuple(problems)
        error.args = ("\n".join(str(problem) for problem in problems),)
        return error


class ClusterTooSmall(MosaicError):
    """A run, or a ``placement: ray`` component, asks more of a resource than any one alive
    node of the Ray cluster has: it would wait on the cluster's queue for ever."""


class CodecError(MosaicError):
    """A frame could not be encoded or decoded."""


class UnknownMessageType(CodecError):
    """A frame names a message type that this side does not know."""


class MessageFieldError(CodecError):
    """A frame's fields do not match its message type (missing, unknown or wrong type)."""


class FrameTooLarge(CodecError):
    """A frame is larger than the configured limit; it was not decoded."""


class ProtocolVersionMismatch(CodecError):
    """A frame was encoded with another protocol version."""


class MalformedFrame(CodecError):
    """A frame is not valid msgpack, or not a mosaic envelope."""


class TransportError(MosaicError):
    """A message could not be delivered or answered."""


class RequestTimeout(TransportError):
    """No response arrived within the timeout. The peer may be alive but slow."""


class ComponentDied(TransportError):
    """A component's thread or process ended; ``cause`` says how (exit code, signal, error)."""

    def __init__(self, component: str, cause: str) -> None:
        self.component = component
        self.cause = cause
        super().__init__(f"{component} died: {cause}")


class ComponentHung(ComponentDied):
    """A component's process runs but stopped answering (see mosaic.runtime.heartbeat)."""

    def __init__(self, component: str, cause: str) -> None:
        super().__init__(component, cause)
        self.args = (f"{component} {cause}",)


class CallAbandoned(TransportError):
    """A direct call into a component (see mosaic.runtime.direct) came back after its watchdog
    had given up on it and ended the caller's part in the run: the answer is of no use."""


class RunCancelled(MosaicError):
    """The run was cancelled (signal or user request) while waiting."""


class RemoteError(MosaicError):
    """A component answered a request with an error."""

    def __init__(self, component: str, error: str) -> None:
        self.component = component
        self.error = error
        super().__init__(f"{component}: {error}")


class IllegalTransition(MosaicError):
    """A run's state machine was asked for a transition its table does not allow."""


class StoreError(MosaicError):
    """The results store could not be opened, written or read."""


class StoreLost(StoreError):
    """The store refused every write for longer than the run allows (``store.outage_s``), or its
    disk is full: the records not written are kept in a spill file (``spill``, with ``unwritten``
    records in it), which ``mosaic store recover`` writes in once the store is back."""

    def __init__(self, message: str, spill: str | None = None, unwritten: int = 0) -> None:
        super().__init__(message)
        self.spill = spill
        self.unwritten = unwritten


class MissingExtra(MosaicError, ImportError):
    """An optional package is not installed; ``extra`` is the mosaic extra that installs it."""

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        self.package = package
        self.extra = extra
        super().__init__(f"{purpose} needs {package}, which is not installed: "
                         f"pip install 'mosaic[{extra}]'")


class WorkerError(MosaicError):
    """An operator worker subprocess failed to answer as the protocol requires."""


class WorkerTimeout(WorkerError):
    """The worker is alive but sent no reply within the timeout."""


class WorkerCrashed(WorkerError):
    """The worker process exited. ``exit_code`` and the tail of its stderr say why."""

    def __init__(self, operator_id: str, exit_code: int | None, stderr_tail: str) -> None:
        self.operator_id = operator_id
        self.exit_code = exit_code
        self.stderr_tail = stderr_tail
        tail = f"; stderr: {stderr_tail.strip()[-500:]}" if stderr_tail.strip() else ""
        super().__init__(f"worker {operator_id} exited with code {exit_code}{tail}")


class WorkerProtocolError(WorkerError):
    """The worker sent a line that is not a valid protocol reply (``line`` holds it)."""

    def __init__(self, operator_id: str, line: str, reason: str) -> None:
        self.operator_id = operator_id
        self.line = line
        super().__init__(f"worker {operator_id} sent a malformed reply ({reason}): {line[:200]!r}")


def interruption_in(error: BaseException) -> BaseException | None:
    """The interruption (``KeyboardInterrupt``, or another ``BaseException`` that is neither an
    ``Exception`` nor a ``SystemExit``) that ``error`` is or was raised from, if any.

    A signal's exception can land anywhere, and some places wrap what they catch: one during
    the creation of a class comes out of Python 3.11 as a ``RuntimeError`` "Error calling
    __set_name__" caused by it. Code that turns a user's errors into messages re-raises it.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if not isinstance(current, (Exception, SystemExit)):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
