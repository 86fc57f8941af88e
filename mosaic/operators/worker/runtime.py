"""The main loop every worker shares: :class:`InteractiveRuntime`.

A worker is a small program (see ``workers/``) that builds a *policy* and hands it to
:func:`run_worker`. The runtime then reads protocol commands from stdin (see
:mod:`mosaic.operators.protocol`), calls the policy, and writes one reply per command to stdout.

Two ways to drive a worker:

* ``reset`` / ``step``: the worker owns a Gymnasium environment made from ``--env-id``. ``step``
  asks the policy for an action, steps the environment and replies ``step``; the step that ends
  the episode is followed by one ``episode_end`` line.
* ``init_agent`` / ``select_action``: the driver owns the environment (multi-agent games) and
  sends observations; the worker replies ``action_selected``. ``reset`` then only seeds the policy.

Guarantees: stdout carries protocol lines only (file descriptor 1 is redirected to stderr, so even
stray prints from libraries land in the log); a bad line or an unknown command gets an ``error``
reply and the loop continues; an exception in the policy or the environment gets an ``error``
reply with its message and the loop continues; ``stop`` gets ``stopped`` and the worker exits 0;
EOF on stdin exits 0; SIGTERM exits 0 promptly after cleanup, without a reply, whatever the worker
is doing (including rendering or waiting for an HTTP reply); the worker also exits when its parent
dies (``PR_SET_PDEATHSIG`` on Linux, plus a parent-pid check every second).

MOSAIC's launcher starts a worker as ``python -m workers.random_worker --run-id R --env-name E
--task T --telemetry-dir D [--interactive] --seed S``; every worker accepts these flags. Given
any of them, the worker speaks MOSAIC's dialect (:mod:`mosaic.operators.dialect`: an ``init``
line first, ``episode_index``/``step_index`` in ``ready`` and ``step``,
``episode_steps``/``episode_return`` in ``episode_end``) and owns ``--task`` when it is a
Gymnasium id (else the driver owns the game). Without ``--interactive`` the LLM worker plays its
episodes by itself (batch mode), as MOSAIC's does; every other worker serves reset/step as
MOSAIC's random and passive workers do. ``--dialect native|mosaic`` chooses the dialect explicitly.

The pieces live in private modules, one concern each: the policy protocol and action helpers
(``_policy``), the command loop (``_loop``), the process setup and command line (``_process``)
and the action space of a game named in ``init_agent`` (``_games``). This module puts them
together in :func:`run_worker`.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from mosaic.operators.worker._loop import InteractiveRuntime
from mosaic.operators.worker._policy import (
    BasePolicy,
    WorkerPolicy,
    copy_space,
    discrete_actions,
    noop_action,
)
from mosaic.operators.worker._process import (
    WorkerTerminated,
    add_runtime_arguments,
    apply_launcher_flags,
    install_parent_death_signal,
    install_sigterm_handler,
    make_env,
    protocol_stdout,
)

__all__ = [
    "BasePolicy",
    "InteractiveRuntime",
    "WorkerPolicy",
    "WorkerTerminated",
    "add_runtime_arguments",
    "copy_space",
    "discrete_actions",
    "install_parent_death_signal",
    "make_env",
    "noop_action",
    "run_worker",
]

log = logging.getLogger("mosaic.worker")


def run_worker(name: str, args: argparse.Namespace, make_policy: Callable[[], Any], *,
               plays_alone: bool = False) -> int:
    """Set the process up as worker ``name`` and serve until stop; returns the exit code.

    Order: stderr logging, SIGTERM handler, parent-death signal, stdout protection, MOSAIC's
    launcher flags (see the module docstring; ``plays_alone``: started by MOSAIC's launcher
    without ``--interactive``, the worker plays its episodes by itself), then the policy and the
    environment. A policy or environment that cannot be built is logged and gives exit code 2
    before any command is read.
    """
    logging.basicConfig(
        stream=sys.stderr, level=str(args.log_level).upper(),
        format="%(levelname)s %(name)s: %(message)s",
    )
    install_sigterm_handler()
    try:
        install_parent_death_signal()
        out = protocol_stdout()
        apply_launcher_flags(args, plays_alone=plays_alone)
        try:
            policy = make_policy()
            env = None
            if args.env_id:
                env = make_env(args.env_id, args.env_kwargs, render_every=args.render_every,
                               render_mode=args.render_mode)
        except Exception as exc:
            log.error("%s could not start: %s: %s", name, type(exc).__name__, exc)
            return 2
        agent_space = None
        if args.n_actions is not None:
            from gymnasium import spaces

            agent_space = spaces.Discrete(args.n_actions)
        runtime = InteractiveRuntime(
            policy, env=env, env_id=args.env_id, run_id=args.run_id, max_steps=args.max_steps,
            render_every=args.render_every, send_observations=args.send_observations,
            agent_action_space=agent_space, operator_seed=args.seed, stdout=out,
            dialect=args.dialect, worker=name,
        )
        log.debug("%s ready (pid %d)", name, os.getpid())
        if args.batch:
            if env is None:
                log.error("batch mode (--batch, or the LLM worker under MOSAIC's flags without "
                          "--interactive) needs an environment: --env-id or a Gymnasium --task")
                return 2
            return runtime.serve_batch(args.episodes, args.seed)
        return runtime.serve()
    except WorkerTerminated:  # SIGTERM before the loop started: nothing to clean up yet
        return 0
