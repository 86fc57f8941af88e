"""MultiOperatorService: N operator worker subprocesses side by side."""

from __future__ import annotations

import logging
from typing import Any, Protocol, Self

from mosaic.operators.api.config import OperatorConfig
from mosaic.operators.driver.launcher import OperatorLauncher

__all__ = ["MultiOperatorService"]

_log = logging.getLogger(__name__)


class _Launcher(Protocol):
    def launch(self, config: OperatorConfig, run_id: str | None = None) -> Any: ...

    def launch_multi_agent(self, config: OperatorConfig, run_id: str | None = None) -> Any: ...


class MultiOperatorService:
    """N operator worker subprocesses side by side, each with its own environment instance.

    A multi-agent config (``worker_assignments``) is one operator too: :meth:`start` launches
    one worker per player (the driver owns the game) and keeps their
    :class:`~mosaic.operators.driver.multi_handle.MultiAgentOperatorHandle`, stopped as one.

    Configurations are kept in the order they were added. ``start_all`` launches the ones not
    yet running; ``stop_all`` stops every running worker and always reaps it. Use it as a
    context manager to guarantee ``stop_all`` on the way out. :meth:`start` and :meth:`stop`
    do the same for one operator, for a caller (Script and Manual mode) in which one
    operator's failure must not stop the others; each may be called from its own thread for
    different operators.
    """

    def __init__(
        self,
        launcher: _Launcher | None = None,
        *,
        run_id: str | None = None,
        stop_timeout: float = 5.0,
    ) -> None:
        self._launcher = launcher
        self._run_id = run_id
        self._stop_timeout = stop_timeout
        self._configs: dict[str, OperatorConfig] = {}
        self._handles: dict[str, Any] = {}

    def _get_launcher(self) -> _Launcher:
        if self._launcher is None:
            self._launcher = OperatorLauncher()
        return self._launcher

    def add_operator(self, config: OperatorConfig) -> None:
        """Add ``config``; ``ValueError`` if its ``operator_id`` is already present."""
        if config.operator_id in self._configs:
            raise ValueError(f"operator {config.operator_id!r} was already added")
        self._configs[config.operator_id] = config

    def remove_operator(self, operator_id: str) -> int | None:
        """Remove ``operator_id`` (``KeyError`` if unknown), stopping its worker if it runs.

        Returns the worker's exit code, or ``None`` if it was not running.
        """
        if operator_id not in self._configs:
            raise KeyError(f"unknown operator id {operator_id!r}")
        code = self._stop_one(operator_id) if operator_id in self._handles else None
        del self._configs[operator_id]
        return code

    def get_active_operators(self) -> list[OperatorConfig]:
        """Every configured operator, in the order added."""
        return list(self._configs.values())

    def get_handle(self, operator_id: str) -> Any:
        """The running worker's handle; ``KeyError`` if it is not running."""
        return self._handles[operator_id]

    @property
    def handles(self) -> dict[str, Any]:
        """Running workers by operator id (a copy)."""
        return dict(self._handles)

    def start(self, operator_id: str) -> Any:
        """Launch ``operator_id``'s worker unless it runs already; returns its handle.

        ``KeyError`` if the operator was never added; a launch error propagates, and nothing
        is then recorded as running.
        """
        if operator_id not in self._configs:
            raise KeyError(f"unknown operator id {operator_id!r}")
        if operator_id not in self._handles:
            self._handles[operator_id] = self._launch(self._configs[operator_id])
        return self._handles[operator_id]

    def _launch(self, config: OperatorConfig) -> Any:
        """One worker, or for a multi-agent config one per player under a
        :class:`~mosaic.operators.driver.multi_handle.MultiAgentOperatorHandle`."""
        launcher = self._get_launcher()
        if config.is_multi_agent:
            return launcher.launch_multi_agent(config, run_id=self._run_id)
        return launcher.launch(config, run_id=self._run_id)

    def stop(self, operator_id: str) -> int | None:
        """Stop and reap ``operator_id``'s worker within ``stop_timeout``; its exit code, or
        ``None`` if it was not running or stopping it failed (which is logged)."""
        if operator_id not in self._handles:
            return None
        return self._stop_one(operator_id)

    def start_all(self) -> dict[str, Any]:
        """Launch every configured operator that is not running yet, in order.

        If one launch fails, the workers this call started are stopped and the error
        propagates, so a failed ``start_all`` leaves no new process behind.
        """
        started: list[str] = []
        try:
            for operator_id, config in self._configs.items():
                if operator_id in self._handles:
                    continue
                self._handles[operator_id] = self._launch(config)
                started.append(operator_id)
        except BaseException:
            for operator_id in started:
                self._stop_one(operator_id)
            raise
        return dict(self._handles)

    def stop_all(self) -> dict[str, int | None]:
        """Stop every running worker, each within ``stop_timeout``; returns exit codes by id.

        Every worker is attempted even when stopping one of them fails (that failure is logged
        and its exit code reported as ``None``).
        """
        return {operator_id: self._stop_one(operator_id) for operator_id in list(self._handles)}

    def _stop_one(self, operator_id: str) -> int | None:
        handle = self._handles.pop(operator_id, None)
        if handle is None:  # stopped meanwhile by another thread
            return None
        try:
            code: int | None = handle.stop(timeout=self._stop_timeout)
        except Exception:  # keep stopping the others
            _log.exception("stopping operator %r failed", operator_id)
            return None
        return code

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop_all()
