"""The reasoning cycle between two observations: :class:`BdiReasoner`.

Per episode a fresh agent is built from the plan library (its initial beliefs, rules and
plans). Each decision then:

1. updates the percepts (:mod:`._perception`), as Jason's belief update does: a percept no
   longer perceived is removed (a ``-b`` event), a new one added (``+b``), an unchanged one
   left alone; at the first decision of an episode the file's initial goals are posted after
   the percepts, so that their plans see the first observation;
2. runs reasoning cycles (agentspeak's ``Agent.step``, one instruction of one intention each)
   until a plan calls ``do(A)``, which is the decision's action and suspends that intention
   until the next observation, as an action does in Jason. One action per decision: other
   intentions that would act run at the decisions that follow, in the order of their events;
3. when no plan acts (nothing left to do, or ``max_cycles`` spent), falls back: the no-op
   (``fallback: noop``, the default), the first legal action (``first-legal``) or a seeded
   random one (``random``). Each fallback is counted with its reason, ``no_action`` or
   ``cycle_limit``, in the decision's account and the operator's :class:`BdiTally`.

A plan that fails (no applicable plan for a goal, a failed condition in a body, an error in
an action) drops its intention, as Jason does when no ``-!g`` plan handles the failure; it is
counted (``plan_failures``) and logged with the file and line, and the cycle goes on.
``do(A)`` with an ``A`` that names no action raises :class:`BdiError` (naming the file and
line), since no plan library meant it.

Determinism: beliefs are kept in insertion order (agentspeak keeps them in sets, whose order
depends on string hashing, which differs between processes), so the same plan library, seeds
and observations give the same actions in any process. ``.random`` draws from Python's
``random`` module, seeded at each reset that has a seed.
"""

from __future__ import annotations

import collections
import logging
import random
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import agentspeak
import agentspeak.runtime
import numpy as np

from mosaic.core.errors import MosaicError
from mosaic.operators.bdi._actions import UnknownAction, make_actions, resolve_action
from mosaic.operators.bdi._perception import (
    MINIGRID_ACTION_NAMES,
    Atom,
    Percept,
    is_minigrid,
    percepts,
)
from mosaic.operators.bdi._plan_library import (
    PlanLibrary,
    agentspeak_messages,
    describe_record,
    without_goals,
)

__all__ = ["DEFAULT_MAX_CYCLES", "FALLBACKS", "BdiError", "BdiReasoner", "BdiTally", "Decision"]

log = logging.getLogger("mosaic.operators.bdi")

#: Reasoning cycles a decision may take before it falls back (``max_cycles``).
DEFAULT_MAX_CYCLES = 1000
#: What a decision without an action from a plan takes instead (``fallback``).
FALLBACKS = ("noop", "first-legal", "random")
Fallback = Literal["noop", "first-legal", "random"]

_PERCEPT = agentspeak.Literal("source", (agentspeak.Literal("percept"),))


class BdiError(MosaicError):
    """A plan library asked for what cannot be done (``do(A)`` naming no action)."""


@dataclass(frozen=True)
class Decision:
    """One decision: the ``action`` (None: the no-op), where it came from (``source``:
    ``plan`` or ``fallback``), why it fell back (``reason``: ``no_action`` or
    ``cycle_limit``), the reasoning ``cycles`` it took and the ``plan_failures`` on the way."""

    action: Any
    source: str
    reason: str | None
    cycles: int
    plan_failures: int

    def account(self) -> dict[str, Any]:
        """The decision as the ``bdi`` field of a worker's reply."""
        account: dict[str, Any] = {"source": self.source, "cycles": self.cycles,
                                   "plan_failures": self.plan_failures}
        if self.reason is not None:
            account["reason"] = self.reason
        return account


@dataclass
class BdiTally:
    """Decisions added up: how many, how many fell back (by reason), and plan failures."""

    actions: int = 0
    fallbacks: int = 0
    plan_failures: int = 0
    reasons: Counter[str] = field(default_factory=Counter)

    def add(self, decision: Decision) -> None:
        """Count one decision."""
        self.actions += 1
        self.plan_failures += decision.plan_failures
        if decision.source == "fallback":
            self.fallbacks += 1
            self.reasons[decision.reason or "unknown"] += 1

    def describe(self) -> str:
        """``2 of 9 actions were fallbacks (no_action: 2); 0 plan failures``."""
        text = f"{self.fallbacks} of {self.actions} actions were fallbacks"
        if self.reasons:
            text += " (" + ", ".join(f"{r}: {n}" for r, n in sorted(self.reasons.items())) + ")"
        return text + f"; {self.plan_failures} plan failure{'s' * (self.plan_failures != 1)}"


class _OrderedBeliefs:
    """A set of beliefs that iterates in insertion order (see the module docstring)."""

    def __init__(self) -> None:
        self._items: dict[Any, None] = {}

    def add(self, item: Any) -> None:
        self._items[item] = None

    def remove(self, item: Any) -> None:
        del self._items[item]

    def discard(self, item: Any) -> None:
        self._items.pop(item, None)

    def __contains__(self, item: object) -> bool:
        return item in self._items

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __copy__(self) -> _OrderedBeliefs:
        copied = _OrderedBeliefs()
        copied._items = dict(self._items)
        return copied


class _Agent(agentspeak.runtime.Agent):  # type: ignore[misc]
    """agentspeak's agent with its beliefs in insertion order."""

    def __init__(self, env: Any, name: str, beliefs: Any = None, rules: Any = None,
                 plans: Any = None) -> None:
        super().__init__(env, name,
                         beliefs if beliefs is not None else collections.defaultdict(
                             _OrderedBeliefs),
                         rules, plans)


def _term(value: Any) -> Any:
    return agentspeak.Literal(str(value)) if isinstance(value, Atom) else value


def _literal(percept: Percept) -> Any:
    functor, args = percept
    return agentspeak.Literal(functor, tuple(_term(a) for a in args), (_PERCEPT,))


class BdiReasoner:
    """A plan library acting on observations, one decision per call (see the module docstring).

    ``action_names`` name the actions for ``do(Name)`` (default: MiniGrid's for a MiniGrid
    observation); ``max_cycles`` bounds the reasoning cycles of one decision; ``fallback`` is
    one of :data:`FALLBACKS`. :attr:`tally` counts every decision since the reasoner was made,
    :attr:`episode_tally` those of the current episode.
    """

    def __init__(self, library: PlanLibrary, *, action_names: Sequence[str] | None = None,
                 max_cycles: int = DEFAULT_MAX_CYCLES, fallback: Fallback = "noop") -> None:
        if max_cycles < 1:
            raise ValueError(f"max_cycles must be at least 1; got {max_cycles}")
        if fallback not in FALLBACKS:
            raise ValueError(f"fallback must be one of {', '.join(FALLBACKS)}; got {fallback!r}")
        self.library = library
        self.action_names = list(action_names) if action_names else None
        self.max_cycles = max_cycles
        self.fallback = fallback
        self.tally = BdiTally()
        self.episode_tally = BdiTally()
        self._actions = make_actions(self._on_do)
        self._rng = np.random.default_rng()
        self._agent: Any = None
        self._percepts: list[Any] = []
        self._step = 0
        self._done: list[Any] = []
        self._episode = -1
        self._warned: set[str] = set()

    # -- the Operator-like surface --

    def reset(self, seed: int | None = None) -> None:
        """Start an episode: a fresh agent at the next decision; with ``seed``, the fallback's
        random choices and agentspeak's ``.random`` are seeded from it."""
        if self.episode_tally.actions:
            log.info("bdi %s: episode %d: %s", self.library.path, max(self._episode, 0),
                     self.episode_tally.describe())
        self._episode += 1
        self.episode_tally = BdiTally()
        self._agent = None
        self._percepts = []
        self._step = 0
        if seed is not None:
            self._rng = np.random.default_rng(seed)
            random.seed(seed)

    def decide(self, observation: Any, legal_actions: Sequence[int] | None = None,
               actions: Sequence[int] | None = None) -> Decision:
        """The action for ``observation`` (``legal_actions``: the legal ones when known;
        ``actions``: every action, for the fallbacks). Raises :class:`BdiError` when a plan
        calls ``do(A)`` with an ``A`` that names no action."""
        legal = [int(a) for a in legal_actions] if legal_actions is not None else None
        names = self.action_names
        if names is None and is_minigrid(observation):
            names = list(MINIGRID_ACTION_NAMES)
        failures = 0
        with agentspeak_messages() as records:
            if self._agent is None:
                failures += self._start(observation, legal, records)
            else:
                self._perceive(percepts(observation, self._step, legal))
            cycles, chosen, location = 0, None, None
            while cycles < self.max_cycles and chosen is None:
                selected = self._next_intention()
                if selected is None:
                    break
                instruction = selected[-1].instr
                location = getattr(instruction, "loc", None)
                cycles += 1
                try:
                    self._agent.step()
                except (agentspeak.AggregatedError, agentspeak.AslError) as error:
                    failures += 1
                    self._report_failure(records, error)
                    self._drop(selected)
                    continue
                if self._done:
                    chosen = self._done[0]
                    self._done.clear()
        self._step += 1
        if chosen is not None:
            try:
                action = resolve_action(chosen, names)
            except UnknownAction as error:
                where = self.library.path if location is None else (
                    f"{self.library.path}, line {location.lineno}")
                raise BdiError(f"plan library {where}: {error}") from None
            decision = Decision(action, "plan", None, cycles, failures)
        else:
            reason = "cycle_limit" if cycles >= self.max_cycles else "no_action"
            decision = Decision(self._fallback_action(legal, actions), "fallback", reason,
                                cycles, failures)
            self._warn_once(reason, self._fallback_text(reason))
        self.tally.add(decision)
        self.episode_tally.add(decision)
        return decision

    # -- the cycle --

    def _on_do(self, argument: Any) -> None:
        self._done.append(argument)

    def _start(self, observation: Any, legal: list[int] | None,
               records: list[logging.LogRecord]) -> int:
        """Build the episode's agent, perceive, then post the initial goals; the goals that
        have no applicable plan, counted as plan failures."""
        env = agentspeak.runtime.Environment()
        source = agentspeak.StringSource(self.library.path, "")
        _, self._agent = env.build_agent_from_ast(source, without_goals(self.library.ast),
                                                  self._actions, agent_cls=_Agent)
        self._percepts = []
        self._perceive(percepts(observation, self._step, legal))
        failures = 0
        for goal in self.library.ast.goals:
            term = goal.atom.accept(agentspeak.runtime.BuildTermVisitor({}))
            try:
                self._agent.call(agentspeak.Trigger.addition, agentspeak.GoalType.achievement,
                                 term, agentspeak.runtime.Intention(), delayed=True)
            except (agentspeak.AggregatedError, agentspeak.AslError) as error:
                failures += 1
                self._report_failure(records, error, goal)
        return failures

    def _perceive(self, current: list[Percept]) -> None:
        """Jason's belief update: removals of what is gone, then additions of what is new."""
        literals = [_literal(p) for p in current]
        new = set(literals)
        old = set(self._percepts)
        for literal in self._percepts:
            if literal not in new:
                self._agent.call(agentspeak.Trigger.removal, agentspeak.GoalType.belief,
                                 literal, agentspeak.runtime.Intention(), delayed=True)
        for literal in literals:
            if literal not in old:
                self._agent.call(agentspeak.Trigger.addition, agentspeak.GoalType.belief,
                                 literal, agentspeak.runtime.Intention(), delayed=True)
        self._percepts = literals

    def _next_intention(self) -> Any:
        """The intention stack agentspeak's next ``step`` runs (its own choice, without the
        side effects), or None when it has nothing to run."""
        agent = self._agent
        while agent.intentions and not agent.intentions[0]:
            agent.intentions.popleft()
        for stack in agent.intentions:
            if not stack:
                continue
            waiter = stack[-1].waiter
            if waiter is not None and not waiter.poll(agent.env):
                continue
            return stack
        return None

    def _drop(self, selected: Any) -> None:
        intentions = self._agent.intentions
        for index, stack in enumerate(intentions):
            if stack is selected:
                del intentions[index]
                return

    def _report_failure(self, records: list[logging.LogRecord], error: BaseException,
                        goal: Any = None) -> None:
        errors = [r for r in records if r.levelno >= logging.ERROR]
        if errors:
            message, line, _ = describe_record(errors[-1])
        else:
            message, line = str(error), None
            if goal is not None and getattr(goal, "loc", None) is not None:
                line = goal.loc.lineno
        records.clear()
        where = self.library.path if line is None else f"{self.library.path}, line {line}"
        self._warn_once(f"failure {where} {message}",
                        f"a plan failed and its intention was dropped: plan library {where}: "
                        f"{message} (each failure is counted in plan_failures; this one is "
                        f"logged once)")

    # -- fallbacks --

    def _fallback_action(self, legal: list[int] | None, actions: Sequence[int] | None) -> Any:
        choices = legal if legal is not None else (list(actions) if actions else None)
        if self.fallback == "noop" or not choices:
            return None
        if self.fallback == "first-legal":
            return choices[0]
        return choices[int(self._rng.integers(len(choices)))]

    def _fallback_text(self, reason: str) -> str:
        what = {"noop": "the no-op", "first-legal": "the first legal action",
                "random": "a random action"}[self.fallback]
        why = (f"no plan called do(A) within max_cycles {self.max_cycles} reasoning cycles"
               if reason == "cycle_limit" else "no plan called do(A): nothing left to do")
        return (f"bdi {self.library.path}: {why}; took {what} instead (fallback {reason}; "
                f"each one is counted, this is logged once)")

    def _warn_once(self, key: str, text: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning("%s", text)
