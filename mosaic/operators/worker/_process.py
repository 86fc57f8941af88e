"""Setting a worker process up: its command line, signals, parent death, stdout and environment.

:func:`~mosaic.operators.worker.runtime.run_worker` calls these in order before it serves commands.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any, BinaryIO, NoReturn

from mosaic.operators.dialect import DIALECTS, MOSAIC, NATIVE
from mosaic.operators.protocol import PARENT_PID_ENV, require_png
from mosaic.runtime.processes.parent import die_with_parent, on_first_sigterm

log = logging.getLogger("mosaic.worker")


class WorkerTerminated(BaseException):
    """Raised in the worker's main thread by SIGTERM so that it unwinds and cleans up.

    A ``BaseException`` so that ``except Exception`` in policies and environments does not
    swallow it.
    """


# --- environment ----------------------------------------------------------------------------------


def make_env(
    env_id: str,
    env_kwargs: dict[str, Any] | None = None,
    *,
    render_every: int = 0,
    render_mode: str = "auto",
) -> Any:
    """Make the Gymnasium environment ``env_id`` with ``env_kwargs``, as an experiment's
    ``gymnasium:<id>`` is made (:func:`~mosaic.environments.gymnasium_make.make_gymnasium`).

    With ``render_every`` > 0 the environment gets a render mode: ``render_mode`` if it is
    ``rgb_array`` or ``ansi``; with ``auto``, ``rgb_array`` when the environment lists it, else
    ``ansi``. Raises whatever ``gymnasium.make`` raises for an unknown id or bad kwargs,
    :class:`~mosaic.core.errors.MosaicError` when ``env_kwargs`` set another render mode, and
    :class:`~mosaic.core.errors.MissingExtra` naming the ``images`` extra when the frames are
    images and Pillow, which encodes them as PNG, is not installed.
    """
    # Here, not at the top: a worker whose driver owns the game never imports the environments.
    from mosaic.environments.gymnasium_make import declared_render_modes, make_gymnasium

    mode = None
    if render_every > 0:
        mode = render_mode
        if mode == "auto":
            mode = "rgb_array" if "rgb_array" in declared_render_modes(env_id) else "ansi"
        if mode == "rgb_array":
            require_png()
    return make_gymnasium(env_id, env_kwargs, mode)


# --- process setup --------------------------------------------------------------------------------


def install_parent_death_signal(poll_interval: float = 1.0) -> None:
    """Make this process get SIGTERM when its parent dies, as every child of mosaic does.

    On Linux ``prctl(PR_SET_PDEATHSIG, SIGTERM)`` asks the kernel for it. Note that the kernel
    sends it when the parent *thread* that started this process exits. A daemon thread also
    checks every ``poll_interval`` seconds whether the parent pid changed, and at start whether
    the launcher's pid (``MOSAIC_PARENT_PID``) is still alive, which covers a parent that died
    before the ``prctl`` call and systems without ``prctl``. See
    :func:`mosaic.runtime.processes.parent.die_with_parent`.
    """
    launcher = os.environ.get(PARENT_PID_ENV, "")
    die_with_parent(launcher_pid=int(launcher) if launcher.isdigit() else None,
                    check_every=poll_interval)


def install_sigterm_handler() -> None:
    """Make SIGTERM raise :class:`WorkerTerminated` in the main thread (once: not in cleanup)."""
    on_first_sigterm(_raise_terminated)


def _raise_terminated() -> NoReturn:
    raise WorkerTerminated()


def protocol_stdout() -> BinaryIO:
    """A private handle on the real stdout; fd 1 and ``sys.stdout`` then point at stderr."""
    sys.stdout.flush()
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(fd, "wb")


def add_runtime_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options every worker shares (environment, rendering, batch mode, logging)."""
    group = parser.add_argument_group("runtime")
    group.add_argument("--env-id", default="",
                       help="Gymnasium id of the environment this worker owns (reset/step mode); "
                            "omit it when the driver owns the environment")
    group.add_argument("--env-kwargs", default="{}", type=_json_object,
                       help='JSON object of keyword arguments for gymnasium.make, e.g. '
                            '\'{"is_slippery": false}\'')
    group.add_argument("--run-id", default=os.environ.get("OPERATOR_RUN_ID", ""),
                       help="run id sent in ready replies (default: $OPERATOR_RUN_ID)")
    group.add_argument("--max-steps", type=int, default=0,
                       help="truncate episodes after this many steps (0 = no limit)")
    group.add_argument("--render-every", type=int, default=0, metavar="N",
                       help="send a render frame every N steps (0 = never, the default)")
    group.add_argument("--render-mode", choices=("auto", "rgb_array", "ansi"), default="auto",
                       help="frame kind; auto prefers rgb_array (PNG) over ansi text")
    group.add_argument("--send-observations", action="store_true",
                       help="include observations in ready and step replies")
    group.add_argument("--n-actions", type=int, default=None,
                       help="size of a Discrete action space when the driver owns the env")
    group.add_argument("--batch", action="store_true",
                       help="run --episodes episodes without reading commands")
    group.add_argument("--episodes", type=int, default=1, help="episodes in --batch mode")
    group.add_argument("--seed", type=int, default=None,
                       help="the operator's own seed: its actions' randomness comes from it, not "
                            "from the environment's reset seed (also the first seed in --batch "
                            "mode: episode i uses seed + i)")
    group.add_argument("--settings", default="{}", type=_json_object,
                       help="JSON object of a plug-in operator type's own settings (see "
                            "mosaic.operators.api.kinds)")
    group.add_argument("--log-level", default=os.environ.get("MOSAIC_WORKER_LOG_LEVEL", "INFO"),
                       help="stderr log level (default INFO)")
    group.add_argument("--dialect", choices=DIALECTS, default=None,
                       help="reply field names: native (mosaic's) or mosaic (MOSAIC's: an init "
                            "line, episode_index/step_index, episode_steps/episode_return); "
                            "default mosaic when started with MOSAIC's launcher flags")
    launch = parser.add_argument_group(
        "MOSAIC's launcher", "the flags MOSAIC's OperatorLauncher passes to every worker")
    launch.add_argument("--task", default="",
                        help="the environment: a Gymnasium id is made as with --env-id; any "
                             "other name leaves the game to the driver (selector mode)")
    launch.add_argument("--env-name", default="",
                        help="accepted for MOSAIC's launcher (the environment family); "
                             "--task alone names the environment")
    launch.add_argument("--telemetry-dir", default="",
                        help="accepted for MOSAIC's launcher; mosaic's workers write no "
                             "telemetry themselves (the driver does)")
    launch.add_argument("--interactive", action="store_true",
                        help="MOSAIC's action-selector mode (init_agent/select_action); "
                             "without it the worker owns --task and serves reset/step, except "
                             "the LLM worker, which then plays --episodes episodes by itself")


def apply_launcher_flags(args: argparse.Namespace, *, plays_alone: bool = False) -> None:
    """Settle ``args`` from MOSAIC's launcher flags, in place.

    With any of ``--task``, ``--env-name``, ``--telemetry-dir`` or ``--interactive`` the worker
    was started by MOSAIC's launcher: the dialect defaults to ``mosaic``. Without
    ``--interactive`` a worker that ``plays_alone`` (the LLM worker, as MOSAIC's own does) runs
    in batch mode; every other one serves commands on stdin, as MOSAIC's random and passive
    workers do then. ``--task`` becomes ``--env-id`` when it names a registered Gymnasium
    environment and ``--env-id`` is not given.
    """
    by_mosaic = bool(args.task or args.env_name or args.telemetry_dir or args.interactive)
    if args.dialect is None:
        args.dialect = MOSAIC if by_mosaic else NATIVE
    if by_mosaic and not args.interactive and plays_alone:
        args.batch = True
    if args.task and not args.env_id:
        if _is_gymnasium_id(args.task):
            args.env_id = args.task
        else:
            log.info("--task %r is not a Gymnasium id: the driver owns the game (selector mode)",
                     args.task)


def _is_gymnasium_id(name: str) -> bool:
    import gymnasium as gym

    try:
        gym.spec(name)
    except Exception:  # an unknown id, or a ``module:Id`` whose module fails to import
        return False
    return True


def _json_object(text: str) -> dict[str, Any]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value
