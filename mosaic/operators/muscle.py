"""OperatorMuscle: an agent of an experiment whose actions come from an Operator.

This is how an LLM, a scripted baseline or a trained policy served by a worker plays in an
experiment: the experiment's environment actor owns the environment, and the operator only
chooses actions (agent mode). In the experiment file::

    agents:
      - uid: player
        muscle:
          class: mosaic.operators:OperatorMuscle
          params:
            operator: {class: random}          # or one of the forms below
            timeout: 10                        # seconds per operator call

``params.operator`` takes one of two forms.

*In process*, with ``class``: an import path ``package.module:Factory`` of a class or function
that returns an object satisfying :class:`~mosaic.operators.Operator`, or a built-in shorthand:
``random`` (uniform over the legal actions, seeded by the muscle), ``passive`` (always the no-op)
or ``scripted`` with ``function: package.module:fn`` (``fn(observation, legal_actions)``). The
factory is called with ``params`` as keyword arguments, plus those of ``action_space``,
``observation_space``, ``seed`` and ``operator_id`` that its signature names and ``params`` do not
set.

*As a worker subprocess*, with ``type`` (``llm``, ``random``, ``rl``, ``scripted``, ``passive``,
``bdi``, ``human`` or ``command``): ``settings`` are the worker's options, those of its type in an
evaluation file (:mod:`mosaic.operators.evaluation.schema`, checked with the same models),
``command`` the argv of a ``command`` worker, and ``task``
(e.g. ``FrozenLake-v1``) and ``env_name`` name the game to the worker (the LLM worker puts them in
its prompt; ``env_name`` defaults to the environment's uid). An ``llm`` operator's worker is
chosen from ``task`` (else ``env_name``): ``chess_v6`` runs the chess worker, a BabyAI or
MiniGrid id the BALROG-style one (:mod:`mosaic.operators.api.llm_routing`), unless
``settings.worker`` names one. The worker is started by
:class:`~mosaic.operators.OperatorLauncher` in :meth:`OperatorMuscle.setup` and receives
``init_agent`` for its slot; per episode it gets ``reset`` and per step ``select_action``.

Both forms take ``id`` (default: the agent's uid) and ``name``. Each slot of the muscle gets an
operator of its own (one worker each); with several slots their ids are ``<id>.<slot>``.

Other keys of ``params``: ``timeout`` (seconds per operator call: 30 for ``llm`` workers, else
10), ``start_timeout`` (seconds to start a worker and get its ``agent_ready``, default 10),
``stop_timeout`` (seconds to stop a worker, default 3), ``noop_action`` (the action used when
the operator answers ``None``) and ``max_fallback_fraction`` (default 0.5; see below). Keys it
does not know are ignored, since an agent's ``params`` are shared with its brain; unknown keys
inside ``operator`` are errors. Keep ``timeout`` below the experiment's ``timeouts.step`` so that
the operator's own error, not a step timeout, ends the run.

The params are checked when the experiment file is loaded (``mosaic experiment-check``), so that a
bad one is reported with the file, line and key path and nothing starts; the models are in
:mod:`mosaic.operators.muscle_params`. What ``class`` and ``function`` name is imported at set-up.

Legal actions: the environment's action mask of a ``Discrete`` slot is passed to the operator as
the list of legal actions; masks of other spaces are not passed on.

Failure: whatever goes wrong in an operator (a worker that times out, exits, sends garbage or
answers ``error``; an in-process operator that raises; an action outside the slot's action space)
is raised as :class:`OperatorError`, which names the operator and the cause. Raised from
:meth:`~OperatorMuscle.act`, it fails the run with that message.

LLM accounting: a worker whose replies carry an ``llm`` account (the ``llm`` worker; see
:mod:`mosaic.operators.llm_accounting`) has each action's account reported as metrics
(``llm.fallback``, ``llm.prompt_tokens``, ``llm.completion_tokens``, ``llm.retries`` and, on a
fallback, ``llm.fallback.<reason>``) in the run's ``metrics`` table. At the end of every episode,
an operator whose share of fallback actions so far is above ``max_fallback_fraction`` fails the
run with an :class:`OperatorError` that names the endpoint and the first error. Teardown logs
each LLM operator's tally.

BDI accounting: an operator whose actions carry a BDI account (the ``bdi`` worker's ``bdi``
reply field, or an in-process :class:`~mosaic.operators.bdi.BdiOperator`'s ``last_decision``)
has, at the end of each episode, its fallback actions (steps in which no plan acted) and plan
failures of the episode reported as the metrics ``bdi.fallbacks`` and ``bdi.plan_failures``;
its share of fallback actions so far is held to ``max_fallback_fraction`` as an LLM
operator's is.

Why one file of this length: most of it is this documentation of the params, which is what a
user reads; the code is the muscle and the two ways it builds an operator for a slot.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium import spaces

from mosaic.agents import Muscle, MuscleContext, Slot
from mosaic.core.errors import MosaicError
from mosaic.operators.api.config import OperatorConfig
from mosaic.operators.api.llm_routing import llm_worker_for
from mosaic.operators.api.operator import (
    BUILTIN_OPERATORS,
    EpisodeSummary,
    NamedOperator,
    Operator,
    StepSnapshot,
)
from mosaic.operators.api.services import ActorService, PolicyMappingService
from mosaic.operators.driver.handle import OperatorProcessHandle
from mosaic.operators.driver.launcher import OperatorLauncher
from mosaic.operators.driver.multi_handle import MultiAgentOperatorHandle
from mosaic.operators.llm_accounting import (
    DEFAULT_MAX_FALLBACK_FRACTION,
    FallbackTally,
    account_metrics,
    account_of,
)
from mosaic.operators.worker.runtime import noop_action

if TYPE_CHECKING:
    from pydantic import BaseModel

    from mosaic.operators.muscle_params import InProcessSpec, WorkerSpec

__all__ = ["OperatorError", "OperatorMuscle"]

log = logging.getLogger(__name__)

#: Share of ``timeout`` an LLM worker may spend on one HTTP socket operation (unless its
#: ``settings.timeout`` is given): a slow endpoint then gets the worker's fallback action in time,
#: rather than failing the run on the muscle's timeout.
LLM_HTTP_SHARE = 0.45
_SEED_BOUND = 2**31 - 1
_INJECTED = ("action_space", "observation_space", "seed", "operator_id")


class OperatorError(MosaicError):
    """An operator failed: it could not start, reset or choose an action, or chose a bad one.

    ``operator_id`` names the operator, ``phase`` what it was doing, ``cause`` what went wrong
    (for a worker, the handle's account: timeout, exit code and stderr tail, or the bad line).
    """

    def __init__(self, operator_id: str, description: str, phase: str, cause: str) -> None:
        self.operator_id = operator_id
        self.description = description
        self.phase = phase
        self.cause = cause
        super().__init__(f"operator {operator_id!r} ({description}) failed to {phase}: {cause}")


def _cause(error: BaseException) -> str:
    return str(error) if isinstance(error, MosaicError) else f"{type(error).__name__}: {error}"


class _AgentWorker(NamedOperator):
    """A worker in agent mode behind the Operator protocol, for one slot.

    Unlike :class:`~mosaic.operators.WorkerOperator` it tells the worker which game it plays
    (``env_name``/``task`` of ``init_agent``, which the LLM worker puts in its prompt), starts it
    eagerly in :meth:`start`, and keeps the ``tokens`` of the last reply. Every call waits at most
    ``timeout`` seconds and raises the handle's ``WorkerError`` subclasses unchanged.
    """

    def __init__(self, handle: OperatorProcessHandle, operator_id: str, name: str,
                 player_id: str, timeout: float) -> None:
        self.handle = handle
        self._id = operator_id
        self._name = name
        self._player_id = player_id
        self._timeout = timeout
        self.tokens: Mapping[str, Any] | None = None
        #: The ``llm`` account of the last action, if the worker sent one.
        self.account: dict[str, Any] | None = None
        #: The ``bdi`` account of the last action, if the worker sent one.
        self.bdi: Mapping[str, Any] | None = None

    def start(self, env_name: str | None, task: str | None, settings: Mapping[str, Any],
              timeout: float) -> None:
        """``init_agent``; the timeout also covers the worker's start-up."""
        self.handle.init_agent(self._player_id, env_name, task, settings, timeout)

    def reset(self, seed: int | None = None) -> None:
        """``reset`` with ``seed``, which seeds the worker's policy for the episode; not sent to
        a worker that echoed no request id in its ``agent_ready`` (one of MOSAIC's): MOSAIC's
        action selectors know no reset (seeded once by ``--seed``), and its random and passive
        workers answer one by making the environment of a ``--task`` they were not given."""
        if self.handle.routing.echoes_ids:
            self.handle.reset(seed, self._timeout)

    def select_action(self, observation: Any, legal_actions: Sequence[Any] | None = None) -> Any:
        reply = self.handle.select_action(
            observation, legal_actions=list(legal_actions) if legal_actions is not None else None,
            player_id=self._player_id, timeout=self._timeout)
        tokens = reply.get("tokens")
        if isinstance(tokens, Mapping):
            self.tokens = tokens
        self.account = account_of(reply)
        bdi = reply.get("bdi")
        self.bdi = bdi if isinstance(bdi, Mapping) else None
        return reply["action"]

    def on_step_result(self, observation: Any, action: Any, reward: float, terminated: bool,
                       truncated: bool) -> None:
        return None  # agent mode has no command for it: the driver owns the episode


@dataclass
class _Lane:
    """One slot and its operator, with the bookkeeping of the current episode."""

    slot: str
    space: Any
    operator: Operator
    description: str
    worker: _AgentWorker | None = None
    last_action: Any = None
    episode: int = -1
    steps: int = 0
    total_reward: float = 0.0
    llm: FallbackTally | None = None
    #: The episode's BDI fallbacks and plan failures, once an action carried a BDI account.
    bdi: list[int] | None = None
    #: The run's BDI accounts so far, held to ``max_fallback_fraction`` as ``llm`` is.
    bdi_tally: FallbackTally | None = None

    def error(self, phase: str, error: BaseException) -> OperatorError:
        description = self.description
        if self.worker is not None:
            description += f", pid {self.worker.handle.pid}"
        return OperatorError(self.operator.id, description, phase, _cause(error))


class OperatorMuscle(Muscle):
    """A muscle whose actions come from an Operator (see the module docstring for params).

    The operators go through the services of :mod:`mosaic.operators.api.services`: each is
    registered in an :class:`ActorService` (the first slot's is active first), each slot is
    mapped to its operator by a :class:`PolicyMappingService`, and ``act`` / ``feedback`` are
    ``select_action_for(slot)``, ``notify_step`` and ``notify_episode_end`` with the slot's
    operator made active. Seeds are not broadcast: each slot's operator is reset with a seed of
    its own, so that two random operators of one agent do not play the same stream.

    ``setup`` builds one operator per slot; worker operators are launched there and must answer
    ``agent_ready`` within ``start_timeout``, else the workers already started are stopped and
    :class:`OperatorError` is raised. ``reset`` resets every operator with a seed drawn from the
    muscle's ``context.rng``, so the same run seed gives the same seeds. ``act`` asks the slot's
    operator, waiting at most ``timeout`` seconds for a worker; ``None`` becomes
    ``params.noop_action`` if given, else the space's no-op (for a ``Discrete`` space its start,
    0, or the first legal action when 0 is not legal; zeros for ``Box``; see
    :func:`mosaic.operators.worker.runtime.noop_action`). ``feedback`` forwards to
    the optional ``on_step(snapshot)`` hook, else ``on_step_result``, and, when the episode
    ended, to the optional ``on_episode_end`` hook; it returns no experience.
    ``teardown`` stops every worker in parallel through a :class:`MultiAgentOperatorHandle`
    (one worker per slot, the experiment owns the environment), each within ``stop_timeout``
    (stop command, EOF, SIGTERM, SIGKILL), and never raises. Every operator failure raises
    :class:`OperatorError`.
    """

    def __init__(self) -> None:
        self._lanes: dict[str, _Lane] = {}
        #: Every slot's operator, registered under its id; only the active one is asked.
        self._actors = ActorService()
        #: Slot uid -> operator id.
        self._mapping = PolicyMappingService()
        self._noop: Any = None
        self._has_noop = False
        self._stop_timeout = 0.0  # set by setup before any worker starts
        self._max_fallbacks = DEFAULT_MAX_FALLBACK_FRACTION

    @classmethod
    def params_model(cls) -> type[BaseModel]:
        """:class:`~mosaic.operators.muscle_params.OperatorMuscleParams`."""
        from mosaic.operators.muscle_params import OperatorMuscleParams

        return OperatorMuscleParams

    def setup(self, context: MuscleContext) -> None:
        """Build (and for workers, launch) one operator per slot; see the class docstring.

        Raises MosaicError for bad params (worded as when the experiment file is loaded) and
        :class:`OperatorError` when an operator cannot be built or a worker does not start in
        time; nothing is left running then.
        """
        super().setup(context)
        # Imported here: a component process pays for pydantic only when it sets a muscle up.
        from mosaic.operators.muscle_params import WorkerSpec, check_params

        params = check_params(context.params, context.agent, f"OperatorMuscle {context.muscle}")
        spec = params.operator
        self._stop_timeout = params.stop_timeout
        self._has_noop, self._noop = params.has_noop, params.noop_action
        self._max_fallbacks = params.max_fallback_fraction
        slots = sorted(context.slots.items())
        try:
            for uid, slot in slots:
                operator_id = spec.id if len(slots) == 1 else f"{spec.id}.{uid}"
                seed = int(context.rng.integers(_SEED_BOUND))
                if isinstance(spec, WorkerSpec):
                    lane = self._launch(spec, operator_id, slot, params.timeout)
                else:
                    lane = self._build(spec, operator_id, slot, seed)
                self._lanes[uid] = lane
                self._register(uid, lane)
            for uid, slot in slots:  # launched together above, so their start-ups overlap
                lane = self._lanes[uid]
                if lane.worker is not None and isinstance(spec, WorkerSpec):
                    self._start(lane, lane.worker, spec, slot, params.start_timeout)
        except BaseException:
            self.teardown()
            raise

    def _register(self, slot: str, lane: _Lane) -> None:
        """Register ``lane``'s operator (the first one registered is active) and map ``slot``
        to it."""
        operator_id = lane.operator.id
        try:
            self._actors.register_actor(lane.operator, activate=len(self._actors) == 0,
                                        description=lane.description)
        except TypeError as error:  # not an Operator after all
            raise lane.error("start", error) from error
        except ValueError as error:  # the id is another slot's operator's
            raise lane.error("start", MosaicError(
                f"{error}: each slot's operator needs an id of its own (a factory is offered "
                "one as its operator_id argument)")) from error
        self._mapping.set_mapping(slot, operator_id)

    def _build(self, spec: InProcessSpec, operator_id: str, slot: Slot, seed: int) -> _Lane:
        description = spec.description
        try:
            operator = _make_in_process(spec, operator_id, slot, seed)
        except Exception as error:
            raise OperatorError(operator_id, description, "start", _cause(error)) from error
        missing = [m for m in ("id", "name", "select_action", "reset", "on_step_result")
                   if not hasattr(operator, m)]
        if missing:
            raise OperatorError(operator_id, description, "start",
                                f"{spec.class_} returned a {type(operator).__name__}, which is "
                                f"not an Operator: it lacks {', '.join(missing)}")
        return _Lane(slot.uid, slot.action_space, operator, description)

    def _launch(self, spec: WorkerSpec, operator_id: str, slot: Slot, timeout: float) -> _Lane:
        settings = dict(spec.settings or {})
        if spec.type == "llm" and "timeout" not in settings:
            settings["timeout"] = round(timeout * LLM_HTTP_SHARE, 3)
        if spec.type == "llm":  # routed by the game named to the worker, not the env's uid
            settings["worker"] = llm_worker_for(settings.get("worker"), spec.task, spec.env_name)
        description = spec.description
        try:
            config = OperatorConfig.single_agent(
                operator_id, spec.type, operator_id, spec.name,
                env_name=spec.env_name or self.context.environment, task="", settings=settings,
                command=spec.command)
            handle = OperatorLauncher().launch(config)
        except (MosaicError, ValueError) as error:
            raise OperatorError(operator_id, description, "start", _cause(error)) from error
        worker = _AgentWorker(handle, operator_id, spec.name, slot.uid, timeout)
        return _Lane(slot.uid, slot.action_space, worker, description, worker=worker)

    def _start(self, lane: _Lane, worker: _AgentWorker, spec: WorkerSpec, slot: Slot,
               timeout: float) -> None:
        settings: dict[str, Any] = {}
        space = slot.action_space
        if isinstance(space, spaces.Discrete) and int(space.start) == 0:
            settings["n_actions"] = int(space.n)
        try:
            worker.start(spec.env_name or self.context.environment, spec.task, settings, timeout)
        except MosaicError as error:
            raise lane.error("start", error) from error

    def reset(self) -> None:
        """Reset every operator with a seed from ``context.rng``; raises OperatorError."""
        rng = self.context.rng
        for uid in sorted(self._lanes):
            lane = self._lanes[uid]
            seed = int(rng.integers(_SEED_BOUND))
            lane.episode += 1
            lane.steps, lane.total_reward, lane.last_action = 0, 0.0, None
            lane.bdi = [0, 0] if lane.bdi is not None else None
            try:
                lane.operator.reset(seed)
            except Exception as error:
                raise lane.error("reset", error) from error

    def act(self, slot: str, observation: Any, legal_actions: Any = None) -> Any:
        """The operator's action for ``slot``; ``legal_actions`` is the environment's mask.

        Waits at most ``timeout`` seconds for a worker. Raises OperatorError when the operator
        fails or chooses an action outside the slot's action space.
        """
        lane = self._lanes[slot]
        space = lane.space
        legal = None
        if legal_actions is not None and isinstance(space, spaces.Discrete):
            start = int(space.start)
            legal = [start + int(i) for i in np.flatnonzero(np.asarray(legal_actions))]
        snapshot = StepSnapshot(step_index=lane.steps, observation=observation, agent_id=slot,
                                legal_actions=legal, episode_index=max(lane.episode, 0))
        try:
            action = self._mapping.select_action_for(slot, snapshot, self._actors)
        except Exception as error:
            raise lane.error(f"select an action for slot {slot!r}", error) from error
        if lane.worker is not None and lane.worker.account is not None:
            self._account(lane, lane.worker.account)
        bdi = _bdi_account(lane)
        if bdi is not None:
            counts = lane.bdi if lane.bdi is not None else [0, 0]
            counts[0] += int(bdi.get("source") == "fallback")
            counts[1] += int(bdi.get("plan_failures") or 0)
            lane.bdi = counts
            if lane.bdi_tally is None:
                lane.bdi_tally = FallbackTally(kind="bdi")
            lane.bdi_tally.add(bdi)
        if action is None:
            action = self._noop_for(lane, legal)
        else:
            action = _coerce(action, space)
            if not _in_space(action, space):
                raise lane.error(f"select an action for slot {slot!r}", MosaicError(
                    f"it chose {action!r}, which is not in the action space {space}"))
        lane.last_action = action
        return action

    def _account(self, lane: _Lane, account: Mapping[str, Any]) -> None:
        if lane.llm is None:
            lane.llm = FallbackTally()
        lane.llm.add(account)
        for name, value in account_metrics(account):
            self.context.log_metric(name, value)

    def _noop_for(self, lane: _Lane, legal: list[int] | None) -> Any:
        if self._has_noop:
            return _coerce(self._noop, lane.space)
        try:
            return noop_action(lane.space, legal)
        except ValueError as error:
            raise lane.error("select an action", MosaicError(
                f"it answered None (no-op), and {error}; set params.noop_action")) from error

    def feedback(self, slot: str, reward: float, terminated: bool, truncated: bool,
                 observation: Any) -> Any:
        """Forward the outcome to ``on_step`` / ``on_step_result`` (and ``on_episode_end`` at
        the end), through :meth:`ActorService.notify_step` and ``notify_episode_end``.

        Returns None: an operator sends no experience to the brain. Raises OperatorError when
        a hook raises, and at the end of an episode when the operator's share of LLM or BDI
        fallback actions so far is above ``max_fallback_fraction``.
        """
        lane = self._lanes[slot]
        lane.steps += 1
        lane.total_reward += float(reward)
        episode = max(lane.episode, 0)
        snapshot = StepSnapshot(step_index=lane.steps - 1, observation=observation,
                                reward=float(reward), terminated=terminated, truncated=truncated,
                                agent_id=slot, action=lane.last_action, episode_index=episode)
        try:
            self._actors.set_active_actor(self._mapping.get_actor_id(slot))
            self._actors.notify_step(snapshot)
            if terminated or truncated:
                self._actors.notify_episode_end(
                    EpisodeSummary(episode, lane.total_reward, lane.steps))
        except Exception as error:
            raise lane.error("take the step result", error) from error
        if (terminated or truncated) and lane.bdi is not None:
            self.context.log_metric("bdi.fallbacks", lane.bdi[0])
            self.context.log_metric("bdi.plan_failures", lane.bdi[1])
            lane.bdi = [0, 0]
        if terminated or truncated:
            for tally, what in ((lane.llm, "act from its model"),
                                (lane.bdi_tally, "act from its plans")):
                if tally is not None and tally.exceeds(self._max_fallbacks):
                    raise lane.error(what, MosaicError(tally.failure(self._max_fallbacks)))
        return None

    def teardown(self) -> None:
        """Stop every worker, all in parallel, each within ``stop_timeout``; logs problems,
        never raises."""
        workers = {uid: lane.worker.handle for uid, lane in self._lanes.items()
                   if lane.worker is not None}
        MultiAgentOperatorHandle(workers).stop_all(self._stop_timeout)
        for lane in self._lanes.values():
            worker = lane.worker
            if worker is None:
                continue
            if lane.llm is not None:
                log.info("operator %s: %s", lane.operator.id, lane.llm.describe())
            elif worker.tokens:
                log.info("operator %s: %s", lane.operator.id,
                         ", ".join(f"{k} {v}" for k, v in worker.tokens.items()))

    @property
    def operators(self) -> dict[str, Operator]:
        """Each slot's operator (after :meth:`setup`), as the policy mapping resolves it."""
        return {uid: self._actors.get_actor(self._mapping.get_actor_id(uid))
                for uid in self._lanes}


def _make_in_process(spec: InProcessSpec, operator_id: str, slot: Slot, seed: int) -> Any:
    from mosaic.core.imports import import_object

    builtin = BUILTIN_OPERATORS.get(spec.class_)
    if builtin is not None:
        fn = None if spec.function is None else import_object(spec.function)
        if spec.function is not None and not callable(fn):
            raise MosaicError(f"{spec.function} is not callable")
        return builtin(slot.action_space, seed, fn, operator_id=operator_id, name=spec.name)
    factory = import_object(spec.class_)
    if not callable(factory):
        raise MosaicError(f"{spec.class_} is not a class or function")
    kwargs = dict(spec.params or {})
    offered = {"action_space": slot.action_space, "observation_space": slot.observation_space,
               "seed": seed, "operator_id": operator_id}
    accepted: Mapping[str, inspect.Parameter]
    try:
        accepted = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # some builtins have no signature: pass params only
        accepted = {}
    for name in _INJECTED:
        parameter = accepted.get(name)
        if (parameter is not None and name not in kwargs
                and parameter.kind is not inspect.Parameter.POSITIONAL_ONLY):
            kwargs[name] = offered[name]
    return factory(**kwargs)


def _bdi_account(lane: _Lane) -> Mapping[str, Any] | None:
    """The BDI account of the lane's last action: its worker's ``bdi`` reply field, or an
    in-process operator's ``last_decision`` (:class:`~mosaic.operators.bdi.Decision`)."""
    if lane.worker is not None:
        return lane.worker.bdi
    decision = getattr(lane.operator, "last_decision", None)
    account = getattr(decision, "account", None)
    if not callable(account):
        return None
    result = account()
    return result if isinstance(result, Mapping) else None


def _in_space(action: Any, space: Any) -> bool:
    """``space.contains``, except that a bool is no Discrete action (Python says it is an int)."""
    if isinstance(action, bool | np.bool_) and isinstance(space, spaces.Discrete):
        return False
    try:
        return bool(space.contains(action))
    except Exception:  # a space may raise on a value of the wrong kind: that is "no"
        return False


def _coerce(action: Any, space: Any) -> Any:
    """JSON-shaped actions (ints, lists) in the space's own form; others unchanged."""
    if isinstance(space, spaces.Discrete):
        return int(action) if isinstance(action, np.integer) else action
    if isinstance(space, spaces.Box | spaces.MultiDiscrete | spaces.MultiBinary) and isinstance(
            action, list | tuple | int | float | np.generic):
        try:
            return np.asarray(action, dtype=space.dtype).reshape(space.shape)
        except (TypeError, ValueError):
            return action  # left to the space check, which names it
    return action
