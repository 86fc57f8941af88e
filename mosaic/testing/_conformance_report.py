"""The report of the worker conformance checker and the exchange helper its checks share.

Split from :mod:`mosaic.testing.worker_conformance`, which holds the checks themselves.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mosaic.core.errors import MosaicError
from mosaic.operators import dialect as d
from mosaic.operators import protocol as p
from mosaic.operators.driver.handle import OperatorProcessHandle

__all__ = ["CheckResult", "ConformanceReport", "Fail", "ReplyChecker", "close", "short"]


@dataclass(frozen=True)
class CheckResult:
    """One named check: ``passed`` is True, False, or None when the check was skipped."""

    name: str
    passed: bool | None
    detail: str = ""


@dataclass
class ConformanceReport:
    """The outcome of :func:`check_worker`: every check, in the order it ran."""

    argv: list[str]
    env_mode: str
    dialect: str = d.NATIVE
    checks: list[CheckResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when no check failed and at least one passed."""
        return any(c.passed for c in self.checks) and not self.failures

    @property
    def failures(self) -> list[CheckResult]:
        """The checks that failed."""
        return [c for c in self.checks if c.passed is False]

    def __getitem__(self, name: str) -> CheckResult:
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(name)

    def __str__(self) -> str:
        lines = [f"worker conformance ({self.env_mode} mode, {self.dialect} dialect): "
                 f"{' '.join(self.argv)}"]
        for c in self.checks:
            mark = {True: "PASS", False: "FAIL", None: "SKIP"}[c.passed]
            lines.append(f"  {mark}  {c.name}" + (f": {c.detail}" if c.detail else ""))
        counts = [sum(c.passed is v for c in self.checks) for v in (True, False, None)]
        lines.append(f"{counts[0]} passed, {counts[1]} failed, {counts[2]} skipped")
        return "\n".join(lines)


class Fail(Exception):
    """A check's expectation was not met."""


class ReplyChecker:
    def __init__(self, report: ConformanceReport, timeout: float, seed: int) -> None:
        self.report = report
        self.timeout = timeout
        self.seed = seed
        self.native = report.dialect == d.NATIVE
        self.id_problems: list[str] = []
        self.replies_seen = 0

    def run(self, name: str, check: Callable[[], str | None]) -> bool:
        try:
            detail = check()
        except (Fail, MosaicError) as exc:
            self.report.checks.append(CheckResult(name, False, f"{type(exc).__name__}: {exc}"))
            return False
        self.report.checks.append(CheckResult(name, True, detail or ""))
        return True

    def skip(self, name: str, why: str) -> None:
        self.report.checks.append(CheckResult(name, None, why))

    def exchange(
        self, handle: OperatorProcessHandle, command: dict[str, Any], expect: str
    ) -> dict[str, Any]:
        """Send ``command`` and read the very next line, which must be ``expect`` with our id."""
        request_id = handle.send(command, timeout=self.timeout)
        return self.next_reply(handle, expect, request_id)

    def next_reply(
        self, handle: OperatorProcessHandle, expect: str, request_id: int | None
    ) -> dict[str, Any]:
        reply = handle.read_response(self.timeout, accept_error=True)
        self.replies_seen += 1
        if self.native and request_id is not None and reply.get("id") != request_id:
            self.id_problems.append(
                f"{reply['type']} reply has id {reply.get('id')!r}, expected {request_id}")
        if reply["type"] != expect:
            raise Fail(f"expected {expect!r}, got {short(reply)}")
        return reply

    def probe(self, handle: OperatorProcessHandle) -> str:
        """One exchange that any live worker answers: ``ping`` in mosaic's protocol; in
        MOSAIC's dialect, which has no ping, ``reset`` (or ``init_agent`` in agent mode)."""
        if self.native:
            self.exchange(handle, {"cmd": p.CMD_PING}, p.RESP_PONG)
            return "pong"
        if self.report.env_mode == "agent":
            self.exchange(handle, {"cmd": p.CMD_INIT_AGENT, "player_id": "player_0",
                                   "game_name": "conformance"}, p.RESP_AGENT_READY)
            return "agent_ready"
        self.exchange(handle, {"cmd": p.CMD_RESET, "seed": self.seed}, p.RESP_READY)
        return "ready"

    def mosaic_indices(self, reply: Mapping[str, Any], episode: Any) -> Any:
        """MOSAIC's dialect: ``reply`` carries an int ``episode_index`` (equal to ``episode``
        unless that is None) and ``step_index``; returns the episode index."""
        if self.native:
            return None
        for name in ("episode_index", "step_index"):
            if not _is_int(reply.get(name)):
                raise Fail(f"{reply['type']!r} lacks MOSAIC's int field {name!r}: "
                            f"{short(reply)}")
        if episode is not None and reply["episode_index"] != episode:
            raise Fail(f"episode_index changed within an episode: {episode} then "
                        f"{reply['episode_index']}")
        return reply["episode_index"]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def short(reply: Mapping[str, Any]) -> str:
    text = repr(dict(reply))
    return text if len(text) <= 200 else text[:200] + "..."


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)
