"""When a phase ends early: a reward threshold over recent episodes, or a user's condition."""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mosaic.core.errors import MosaicError
from mosaic.messages import TerminationSpec
from mosaic.stepping.progress import Progress


@dataclass
class Termination:
    """Checked after every episode; :meth:`reached` says why the phase should stop, if it should.

    The environments' own ends, ``max_steps`` and the episode count are handled by the
    controller's loop itself; this covers the conditions the experiment file adds.
    """

    reward_threshold: float | None = None
    window: int = 100
    condition: Callable[[dict[str, Any]], Any] | None = None
    returns: list[float] = field(default_factory=list)
    #: The condition's path in the experiment file, to name it when it fails.
    condition_path: str = ""
    _recent: collections.deque[float] = field(default_factory=collections.deque)

    @classmethod
    def from_spec(cls, spec: TerminationSpec | None) -> Termination:
        """The checks ``spec`` asks for (none without one); imports its condition."""
        if spec is None:
            return cls()
        condition = None
        if spec.condition:
            from mosaic.core.imports import import_object

            condition = import_object(spec.condition)
        return cls(spec.reward_threshold, spec.window, condition,
                   _recent=collections.deque(maxlen=spec.window),
                   condition_path=spec.condition or "")

    def reached(self, environment: str, episode_return: float, progress: Progress) -> str | None:
        """Record an episode's return; return why the phase should stop, or ``None``."""
        if self.reward_threshold is None and self.condition is None:
            return None
        self.returns.append(episode_return)
        self._recent.append(episode_return)
        if self.reward_threshold is not None and len(self._recent) == self.window:
            mean = sum(self._recent) / self.window
            if mean >= self.reward_threshold:
                return (f"mean return {mean:.2f} over the last {self.window} episodes reached "
                        f"{self.reward_threshold:g}")
        if self.condition is not None:
            stats = {"episodes": progress.episodes, "steps": progress.steps,
                     "returns": list(self.returns), "last_return": episode_return,
                     "environment": environment}
            try:
                met = self.condition(stats)
            except BaseException as error:  # also SystemExit: it must fail the run, not a thread
                raise MosaicError(f"termination condition {self.condition_path} failed: "
                                  f"{type(error).__name__}: {error}") from error
            if met:
                return f"condition {getattr(self.condition, '__name__', self.condition)} met"
        return None
