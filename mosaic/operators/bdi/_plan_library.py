"""A plan library file (``.asl``), read and checked once: :func:`load_plan_library`.

The file is AgentSpeak as the ``agentspeak`` package reads it (Jason's language: beliefs,
rules, initial goals ``!g.``, plans ``+trigger : context <- body.``). Its problems are raised
as one :class:`PlanLibraryError` that names the file and the line and column where agentspeak
found the first one, with agentspeak's message; agentspeak's own coloured log lines are kept
off stderr (:func:`agentspeak_messages` collects them instead).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import agentspeak
import agentspeak.lexer
import agentspeak.parser
import agentspeak.runtime

from mosaic.core.errors import MosaicError
from mosaic.core.imports import USER_PATH_VARIABLE
from mosaic.operators.bdi._actions import make_actions

__all__ = [
    "AGENTSPEAK_LOGGERS",
    "PlanLibrary",
    "PlanLibraryError",
    "agentspeak_messages",
    "describe_record",
    "load_plan_library",
    "resolve_plan_library",
    "without_goals",
]

#: The loggers agentspeak reports a plan library's problems and a plan's failures to.
AGENTSPEAK_LOGGERS = ("agentspeak.runtime", "agentspeak.stdlib", "agentspeak.parser",
                      "agentspeak.lexer")
#: Bytes of a plan library file read at most: a plan library is a program, not data.
MAX_PLAN_LIBRARY_BYTES = 1_000_000


class PlanLibraryError(MosaicError, ValueError):
    """A plan library that cannot be used: missing, unreadable, or not AgentSpeak. ``path``
    names the file; ``line`` and ``column`` (1-based) where agentspeak found the problem, when
    it said."""

    def __init__(self, path: str, message: str, line: int | None = None,
                 column: int | None = None) -> None:
        self.path = path
        self.line = line
        self.column = column
        self.message = message
        where = path if line is None else f"{path}, line {line}" + (
            f", column {column}" if column is not None else "")
        super().__init__(f"plan library {where}: {message}")


@dataclass(frozen=True)
class PlanLibrary:
    """A parsed plan library: its ``path`` where it was found (as given when in the working
    directory), and agentspeak's syntax tree of it
    (``ast``), from which the reasoner builds a fresh agent every episode."""

    path: str
    ast: Any = field(repr=False)


class _Dispatch(logging.Handler):
    """Sends agentspeak's records to the collecting thread's list, or, outside
    :func:`agentspeak_messages`, to mosaic's log as plain lines."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)

    def emit(self, record: logging.LogRecord) -> None:
        collected: list[logging.LogRecord] | None = getattr(_COLLECTING, "records", None)
        if collected is not None:
            collected.append(record)
            return
        message, line, _ = describe_record(record)
        where = "" if line is None else f" (line {line})"
        logging.getLogger("mosaic.operators.bdi").log(record.levelno, "agentspeak: %s%s",
                                                      message, where)


_COLLECTING = threading.local()
_INSTALLED: list[bool] = []
_INSTALL_LOCK = threading.Lock()


def _install() -> None:
    """Route agentspeak's loggers through :class:`_Dispatch`, once per process (its own
    handlers write coloured lines to stderr)."""
    with _INSTALL_LOCK:
        if _INSTALLED:
            return
        dispatch = _Dispatch()
        for name in AGENTSPEAK_LOGGERS:
            logger = agentspeak.get_logger(name)  # creates it with agentspeak's own handler
            for handler in list(logger.handlers):
                logger.removeHandler(handler)
            logger.addHandler(dispatch)
            logger.propagate = False
        _INSTALLED.append(True)


@contextlib.contextmanager
def agentspeak_messages() -> Iterator[list[logging.LogRecord]]:
    """Collect what agentspeak logs in this thread (errors and warnings, with their source
    location in the record's ``loc``) into the list it yields, instead of its coloured lines
    on stderr. Other threads' records go to their own lists."""
    _install()
    records: list[logging.LogRecord] = []
    outer = getattr(_COLLECTING, "records", None)
    _COLLECTING.records = records
    try:
        yield records
    finally:
        _COLLECTING.records = outer


def describe_record(record: logging.LogRecord) -> tuple[str, int | None, int | None]:
    """agentspeak's message in ``record`` and where it points: (message, line, column)."""
    loc = getattr(record, "loc", None)
    message = record.getMessage()
    if loc is None:
        return message, None, None
    return message, int(loc.lineno), int(loc.startcol) + 1


def _first_error(path: str, records: list[logging.LogRecord], fallback: str
                 ) -> PlanLibraryError:
    errors = [r for r in records if r.levelno >= logging.ERROR] or records
    if not errors:
        return PlanLibraryError(path, fallback)
    message, line, column = describe_record(errors[0])
    more = len([r for r in records if r.levelno >= logging.ERROR]) - 1
    if more > 0:
        message += f" (and {more} more error{'s' if more > 1 else ''})"
    return PlanLibraryError(path, message, line, column)


def resolve_plan_library(path: str) -> Path:
    """Where the plan library ``path`` is: as given when absolute; a relative one in the
    working directory, else beside the experiment file (the folders of
    :data:`~mosaic.core.imports.USER_PATH_VARIABLE`, where modules of one's own are found).
    Raises :class:`PlanLibraryError` saying where it looked."""
    file = Path(path).expanduser()
    if file.is_absolute():
        if file.is_file():
            return file
        raise PlanLibraryError(path, "no such file")
    folders = [Path.cwd()] + [Path(folder) for folder in
                              os.environ.get(USER_PATH_VARIABLE, "").split(os.pathsep) if folder]
    if file.is_file():
        return file  # in the working directory: named as given
    for folder in folders[1:]:
        if (folder / file).is_file():
            return folder / file
    raise PlanLibraryError(path, "no such file in " + ", ".join(
        dict.fromkeys(str(folder) for folder in folders)) + " (a relative path is read from the "
        "working directory, else from the experiment file's folder)")


def load_plan_library(path: str | os.PathLike[str], actions: Any = None) -> PlanLibrary:
    """Read and check the plan library at ``path`` (found by :func:`resolve_plan_library`), with
    ``actions`` (an ``agentspeak.Actions``; default: agentspeak's standard library and
    ``do/1``) as the actions its plans may call.

    The file is parsed and an agent is built from it once, so that every problem agentspeak
    can find before the first step is found here. Raises :class:`PlanLibraryError` naming the
    file, the line and column, and agentspeak's message.
    """
    if actions is None:
        actions = make_actions(lambda argument: None)
    file = resolve_plan_library(os.fspath(path))
    name = str(file)  # where it was found: agentspeak reads its include() beside it
    try:
        if file.stat().st_size > MAX_PLAN_LIBRARY_BYTES:
            raise PlanLibraryError(name, f"larger than {MAX_PLAN_LIBRARY_BYTES} bytes")
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PlanLibraryError(name, f"cannot be read: {error}") from None
    with agentspeak_messages() as records:
        try:
            log = agentspeak.Log(agentspeak.get_logger("agentspeak.runtime"), 3)
            tokens = agentspeak.lexer.TokenStream(agentspeak.StringSource(name, text), log)
            ast = agentspeak.parser.parse(name, tokens, log)
            log.throw()
            # Building an agent finds what parsing does not (a query that is no condition).
            agentspeak.runtime.Environment().build_agent_from_ast(
                agentspeak.StringSource(name, ""), without_goals(ast), actions)
        except (agentspeak.AggregatedError, agentspeak.AslError) as error:
            raise _first_error(name, records, str(error)) from None
        except Exception as error:  # agentspeak's parser raises plain errors on some input
            raise _first_error(name, records, f"{type(error).__name__}: {error}") from None
    warnings = [r for r in records if r.levelno == logging.WARNING]
    for record in warnings:
        message, line, _ = describe_record(record)
        logging.getLogger("mosaic.operators.bdi").warning(
            "plan library %s%s: %s", name, "" if line is None else f", line {line}", message)
    return PlanLibrary(name, ast)


def without_goals(ast: Any) -> Any:
    """A shallow copy of ``ast`` without its initial goals: the reasoner posts them itself,
    after the first observation's percepts."""
    bare = copy.copy(ast)
    bare.goals = []
    return bare
