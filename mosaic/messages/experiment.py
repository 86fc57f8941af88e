"""Messages between the Executor and a RunGovernor: one experiment run."""

from __future__ import annotations

from dataclasses import dataclass

from mosaic.messages._base import Notice, Request, Response
from mosaic.messages.run_config import RunConfig

__all__ = [
    "ExperimentRunFinishedNotice",
    "ExperimentRunShutdownRequest",
    "ExperimentShutdownResponse",
    "ExperimentStartRequest",
    "ExperimentStartResponse",
]


@dataclass(frozen=True, slots=True)
class ExperimentStartRequest(Request):
    """Executor -> RunGovernor: start run ``run_uid``; report its end to ``notify_endpoint``."""

    experiment_uid: str
    run_uid: str
    run_index: int
    seed: int
    config: RunConfig
    notify_endpoint: str


@dataclass(frozen=True, slots=True)
class ExperimentStartResponse(Response):
    """RunGovernor -> Executor: whether the run started (``error`` says why not)."""

    run_uid: str
    ok: bool
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ExperimentRunFinishedNotice(Notice):
    """RunGovernor -> Executor (at ``notify_endpoint``): the run ended with ``status``."""

    run_uid: str
    status: str
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ExperimentRunShutdownRequest(Request):
    """Executor -> RunGovernor: stop run ``run_uid`` early, for ``reason``."""

    run_uid: str
    reason: str


@dataclass(frozen=True, slots=True)
class ExperimentShutdownResponse(Response):
    """RunGovernor -> Executor: the run is down; its totals and the components it had to kill."""

    run_uid: str
    status: str
    error: str | None
    episodes: int
    steps: int
    killed: tuple[str, ...] = ()
