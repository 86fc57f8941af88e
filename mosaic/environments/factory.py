"""Making an environment from the ``env:`` string of an experiment file."""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, VectorEnv
from pettingzoo import AECEnv, ParallelEnv

from mosaic.core.errors import MosaicError
from mosaic.core.imports import ImportPathError, import_module, import_object, resolve_env
from mosaic.environments.adapter import EnvironmentAdapter
from mosaic.environments.global_state import GLOBAL_STATE_PARAM
from mosaic.environments.gymnasium_adapter import GymnasiumAdapter
from mosaic.environments.gymnasium_make import make_gymnasium
from mosaic.environments.pettingzoo_adapter import AECAdapter, ParallelAdapter
from mosaic.environments.sync_copies import SyncCopies
from mosaic.environments.vector import SEEDINGS, VECTOR_MODES, VectorAdapter
from mosaic.environments.video import RENDER_MODE, EpisodeVideo, VideoError
from mosaic.messages.run_config import VideoPlan, WrapperPlan

#: The params key that picks the PettingZoo API of a ``pettingzoo:`` module offering both.
API_PARAM = "api"
_APIS = ("aec", "parallel")


def make_environment(spec: str, params: Mapping[str, Any],
                     wrappers: Sequence[WrapperPlan] = ()) -> EnvironmentAdapter:
    """Build the environment ``spec`` names, with ``params`` as keyword arguments, wrapped in
    ``wrappers`` (innermost first; Gymnasium environments only).

    * ``gymnasium:<id>``: ``gymnasium.make(id, **params)``
      (:func:`~mosaic.environments.gymnasium_make.make_gymnasium`);
    * ``pettingzoo:<family>.<module>``: ``pettingzoo.<family>.<module>.env(**params)``, or
      ``parallel_env(**params)`` when the module has no ``env`` or when ``params`` holds
      ``api: parallel`` (``api: aec`` asks for ``env`` explicitly; ``api`` is not passed on);
    * ``package.module:Attr``: ``Attr(**params)``, where Attr is a ``gymnasium.Env``,
      ``pettingzoo.AECEnv`` or ``pettingzoo.ParallelEnv`` class, a factory returning one of
      them, or an :class:`EnvironmentAdapter` class.

    Gymnasium environments get a :class:`GymnasiumAdapter`, AEC environments an
    :class:`AECAdapter` and Parallel environments a :class:`ParallelAdapter`. ``params`` may
    hold ``global_state: true`` (mosaic's key, not passed on): a parallel environment's
    adapter then gives the global state in the infos
    (:mod:`mosaic.environments.global_state`); any other environment is refused.

    Raises :class:`MosaicError` with the reason when the spec cannot be resolved or makes
    something else, or a wrapper cannot wrap it (naming the wrapper); errors raised by the
    environment's own constructor propagate unchanged.
    """
    kind, _, target = spec.partition(":")
    if not target:
        raise MosaicError(f"environment {spec!r}: expected 'gymnasium:<id>', "
                          "'pettingzoo:<family>.<module>' or 'package.module:Attr'")
    params, global_state = _global_state(spec, params)
    if kind == "gymnasium":
        made: Any = wrap(spec, make_gymnasium(target, params), wrappers)
    elif kind == "pettingzoo":
        made = _make_pettingzoo(spec, target, dict(params))
    else:
        made = wrap(spec, _call_factory(spec, params), wrappers)
    return _adapt(spec, made, global_state)


def _global_state(spec: str, params: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool]:
    """``params`` without mosaic's ``global_state`` key, and its value (False when absent)."""
    if GLOBAL_STATE_PARAM not in params:
        return params, False
    rest = dict(params)
    value = rest.pop(GLOBAL_STATE_PARAM)
    if not isinstance(value, bool):
        raise MosaicError(f"environment {spec!r}: params.{GLOBAL_STATE_PARAM} must be true or "
                          f"false, not {value!r}")
    return rest, value


class WrapperError(MosaicError):
    """Wrapper ``index`` of an environment's ``wrappers`` could not wrap it: ``reason``."""

    def __init__(self, spec: str, index: int, class_path: str, reason: str) -> None:
        super().__init__(f"environment {spec!r}: wrappers[{index}] ({class_path}) failed: "
                         f"{reason}")
        self.index = index
        self.reason = reason


def wrap(spec: str, env: Any, wrappers: Sequence[WrapperPlan]) -> Any:
    """``env`` wrapped in each of ``wrappers`` in turn (the first innermost).

    Raises :class:`WrapperError` naming the wrapper (``wrappers[i]``) that fails to build, and
    :class:`MosaicError` when ``env`` is not a ``gymnasium.Env``; ``env`` is then closed.
    """
    if not wrappers:
        return env
    if not isinstance(env, gymnasium.Env):
        _close(env)
        raise MosaicError(f"environment {spec!r}: wrappers: takes a gymnasium.Env, and it made "
                          f"a {type(env).__name__}")
    for index, wrapper in enumerate(wrappers):
        try:
            env = import_object(wrapper.class_path)(env, **dict(wrapper.params))
        except Exception as error:  # the wrapper's own checks may raise anything
            _close(env)
            raise WrapperError(spec, index, wrapper.class_path,
                               f"{type(error).__name__}: {error}") from error
    return env


def _close(env: Any) -> None:
    close = getattr(env, "close", None)
    if callable(close):
        # Closing what failed: the first error is the one to report.
        with contextlib.suppress(Exception):
            close()


def make_any(spec: str, params: Mapping[str, Any], copies: int | None = None,
             vector_mode: str = "sync", max_steps: int | None = None,
             wrappers: Sequence[WrapperPlan] = (), video: VideoPlan | None = None,
             name: str = "", seeding: str = "episode") -> EnvironmentAdapter | VectorAdapter:
    """What the environment actor holds: one environment, or a vector of ``copies``.

    Without ``copies`` it is :func:`make_environment`'s environment, unless a factory makes a
    ``gymnasium.vector.VectorEnv`` (``gymnasium.make_vec``, say): that one is held as it is
    (and cannot take ``wrappers``). With ``copies`` it is :func:`make_vector_environment`'s,
    its copies seeded as ``seeding`` says.

    With ``video`` the environment (one Gymnasium environment, no copies) is made with
    ``render_mode="rgb_array"`` and, outside its ``wrappers``, records the episodes ``video``
    names as the environment ``name`` (:class:`~mosaic.environments.video.EpisodeVideo`).
    Raises :class:`~mosaic.environments.video.VideoError` when it cannot be recorded.
    """
    if params.get(GLOBAL_STATE_PARAM) and (video is not None or copies is not None):
        raise MosaicError(f"environment {spec!r}: params.{GLOBAL_STATE_PARAM} gives the global "
                          "state of a PettingZoo parallel environment, which takes neither "
                          "copies nor record_video")
    if video is not None:
        return _recorded(spec, params, wrappers, video, name)
    if copies is not None:
        return make_vector_environment(spec, params, copies, vector_mode, max_steps, wrappers,
                                       seeding)
    kind, _, _ = spec.partition(":")
    if kind in ("gymnasium", "pettingzoo"):
        return make_environment(spec, params, wrappers)
    params, global_state = _global_state(spec, params)
    made = _call_factory(spec, params)
    if isinstance(made, VectorEnv) and not wrappers and not global_state:
        return VectorAdapter(made, max_steps)
    return _adapt(spec, wrap(spec, made, wrappers), global_state)


def _recorded(spec: str, params: Mapping[str, Any], wrappers: Sequence[WrapperPlan],
              video: VideoPlan, name: str) -> EnvironmentAdapter:
    asked = params.get("render_mode", RENDER_MODE)
    if asked != RENDER_MODE:
        raise VideoError(f"environment {spec!r}: record_video needs render_mode={RENDER_MODE!r}, "
                         f"and params set render_mode={asked!r}")
    kind, _, target = spec.partition(":")
    if kind == "pettingzoo":
        raise VideoError(f"environment {spec!r}: record_video records Gymnasium environments")
    made = (make_gymnasium(target, params, RENDER_MODE) if kind == "gymnasium"
            else _call_factory(spec, {**params, "render_mode": RENDER_MODE}))
    if not isinstance(made, gymnasium.Env):
        _close(made)
        raise VideoError(f"environment {spec!r}: record_video records a gymnasium.Env, and it "
                         f"made a {type(made).__name__}")
    modes = made.metadata.get("render_modes") or ()
    if RENDER_MODE not in modes:
        _close(made)
        raise VideoError(f"environment {spec!r} cannot render {RENDER_MODE!r} frames (its "
                         f"render modes: {', '.join(map(str, modes)) or 'none'}), which "
                         "record_video needs")
    return GymnasiumAdapter(EpisodeVideo(wrap(spec, made, wrappers), video, name or "environment"))


def make_vector_environment(spec: str, params: Mapping[str, Any], copies: int,
                            vector_mode: str = "sync", max_steps: int | None = None,
                            wrappers: Sequence[WrapperPlan] = (),
                            seeding: str = "episode") -> VectorAdapter:
    """``copies`` copies of the Gymnasium environment ``spec`` names, in one vector; each copy
    wrapped in ``wrappers`` (not with ``native``, which makes its copies itself).

    ``vector_mode`` ``sync`` steps them one after another in this thread, ``async`` in one
    process each (Gymnasium's ``AsyncVectorEnv``), and ``native`` uses the environment's own
    vectorised implementation (``gymnasium.make_vec`` with its ``vector_entry_point``). The
    copies of ``sync`` and ``async`` are reset by mosaic, each with a seed of its own: every
    episode, or with ``seeding="once"`` only the first (each copy then draws its next episodes
    from its own generator, as in Gymnasium's own vector environments).
    """
    if seeding not in SEEDINGS:
        raise MosaicError(f"environment {spec!r}: seeding must be one of "
                          f"{', '.join(SEEDINGS)}, not {seeding!r}")
    if vector_mode not in VECTOR_MODES:
        raise MosaicError(f"environment {spec!r}: vector_mode must be one of "
                          f"{', '.join(VECTOR_MODES)}, not {vector_mode!r}")
    kind, _, target = spec.partition(":")
    if kind == "pettingzoo":
        raise MosaicError(f"environment {spec!r}: copies: takes Gymnasium environments; a "
                          "PettingZoo environment's agents already act side by side")
    if wrappers and vector_mode == "native":
        raise MosaicError(f"environment {spec!r}: vector_mode: native makes its copies without "
                          "wrappers; use sync or async")
    if kind == "gymnasium":
        if vector_mode == "native":
            return VectorAdapter(gymnasium.make_vec(target, num_envs=copies,
                                                    vectorization_mode="vector_entry_point",
                                                    **dict(params)), max_steps)
        return _copies(_Wrapped(spec, functools.partial(make_gymnasium, target, dict(params)),
                                tuple(wrappers)), copies, vector_mode, max_steps, seeding)
    made = _call_factory(spec, params)
    if isinstance(made, VectorEnv) and wrappers:
        made.close()
        raise MosaicError(f"environment {spec!r} made a vector environment, which wrappers: "
                          "cannot wrap (they wrap one gymnasium.Env each)")
    if isinstance(made, VectorEnv):
        if made.num_envs != copies:
            made.close()
            raise MosaicError(f"environment {spec!r} made a vector of {made.num_envs} copies, "
                              f"but the file asks for copies: {copies}")
        return VectorAdapter(made, max_steps)
    if not isinstance(made, gymnasium.Env):
        raise MosaicError(f"environment {spec!r}: copies: takes Gymnasium environments, and it "
                          f"made a {type(made).__name__}")
    made.close()
    if vector_mode == "native":
        raise MosaicError(f"environment {spec!r}: vector_mode: native needs a registered "
                          "Gymnasium id with a vector_entry_point ('gymnasium:<id>')")
    return _copies(_Wrapped(spec, functools.partial(import_object(spec), **dict(params)),
                            tuple(wrappers)), copies, vector_mode, max_steps, seeding)


def _copies(make: Callable[[], gymnasium.Env[Any, Any]], copies: int, vector_mode: str,
            max_steps: int | None, seeding: str) -> VectorAdapter:
    """``copies`` environments from ``make`` in a Sync- or AsyncVectorEnv that mosaic resets."""
    once = seeding == "once"
    # Copies seeded once and not cut at max_steps reset themselves inside the vector's step
    # (SAME_STEP): the same episodes, each copy drawing the next from its own generator, as a
    # reset with a mask after the step gives them, without a second pass over every copy and a
    # second concatenation of the observations per step an episode ends in.
    mode = (AutoresetMode.SAME_STEP if once and max_steps is None else AutoresetMode.DISABLED)
    if vector_mode == "sync":
        return VectorAdapter(SyncCopies([make] * copies, autoreset_mode=mode), max_steps,
                             seed_once=once)
    # Spawned, so that a copy's process does not inherit this one's ZeroMQ and actor threads.
    return VectorAdapter(AsyncVectorEnv([_WithoutInterrupts(make)] * copies,
                                        autoreset_mode=mode, context="spawn"),
                         max_steps, seed_once=once)


@dataclass(frozen=True)
class _Wrapped:
    """Makes one copy and wraps it (picklable, for the processes of ``async`` copies)."""

    spec: str
    make: Callable[[], gymnasium.Env[Any, Any]]
    wrappers: tuple[WrapperPlan, ...]

    def __call__(self) -> gymnasium.Env[Any, Any]:
        env: gymnasium.Env[Any, Any] = wrap(self.spec, self.make(), self.wrappers)
        return env


@dataclass(frozen=True)
class _WithoutInterrupts:
    """Makes an environment in a copy's own process, which then ignores SIGINT.

    Ctrl-C reaches every process of the terminal's group; the run stops its environments in
    order, so a copy's process must not die of it first (and print its traceback).
    """

    make: Callable[[], gymnasium.Env[Any, Any]]

    def __call__(self) -> gymnasium.Env[Any, Any]:
        # AsyncVectorEnv also calls it here, for the spaces: only a copy's process ignores.
        if multiprocessing.parent_process() is not None:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        return self.make()


def _call_factory(spec: str, params: Mapping[str, Any]) -> Any:
    try:
        factory = import_object(spec)
    except ImportPathError as error:
        raise MosaicError(f"environment {error}") from error
    return factory(**dict(params))


def _make_pettingzoo(spec: str, target: str, params: dict[str, Any]) -> Any:
    api = params.pop(API_PARAM, None)
    if api is not None and api not in _APIS:
        raise MosaicError(f"environment {spec!r}: params.{API_PARAM} must be 'aec' or "
                          f"'parallel', not {api!r}")
    try:
        resolve_env(spec)  # for its messages: close module names, neither env() nor parallel_env()
        module = import_module(f"pettingzoo.{target}", spec)
    except ImportPathError as error:
        raise MosaicError(f"environment {error}") from error
    constructors = {name: getattr(module, name, None) for name in ("env", "parallel_env")}
    if api is None:
        name = "env" if callable(constructors["env"]) else "parallel_env"
    else:
        name = "env" if api == "aec" else "parallel_env"
    constructor = constructors[name]
    if not callable(constructor):
        offered = [n for n, c in constructors.items() if callable(c)]
        raise MosaicError(f"environment {spec!r}: module 'pettingzoo.{target}' has no {name}() "
                          f"(it offers {', '.join(f'{n}()' for n in offered) or 'neither'}); "
                          + (f"remove params.{API_PARAM} or choose the API it offers"
                             if offered else "name a PettingZoo environment module"))
    return constructor(**params)


def _adapt(spec: str, made: Any, global_state: bool = False) -> EnvironmentAdapter:
    if global_state and not isinstance(made, ParallelEnv):
        _close(made)
        what = ("a pettingzoo.AECEnv (one agent acts per step; params: {api: parallel} picks "
                "the parallel API of a module that has both)" if isinstance(made, AECEnv)
                else "a gymnasium.Env (one agent)" if isinstance(made, gymnasium.Env)
                else f"a {type(made).__name__}")
        raise MosaicError(f"environment {spec!r}: params.{GLOBAL_STATE_PARAM} gives the global "
                          f"state of a PettingZoo parallel environment, and it made {what}; "
                          f"use a parallel environment or remove {GLOBAL_STATE_PARAM}")
    if isinstance(made, EnvironmentAdapter):
        return made
    if isinstance(made, gymnasium.Env):
        return GymnasiumAdapter(made)
    if isinstance(made, AECEnv):
        return AECAdapter(made)
    if isinstance(made, ParallelEnv):
        return ParallelAdapter(made, global_state)
    raise MosaicError(f"environment {spec!r} made a {type(made).__name__}, not a gymnasium.Env, "
                      "pettingzoo.AECEnv, pettingzoo.ParallelEnv or EnvironmentAdapter")
