"""Scripted worker: actions from a user function.

``--policy`` names the function as ``package.module:function`` (imported normally, so the module
must be on ``PYTHONPATH``) or ``path/to/file.py:function``. It is called as
``function(observation, legal_actions)`` and returns an action; ``None`` means the no-op.
``legal_actions`` is the list of legal actions: from the action mask when there is one, else every
action of a ``Discrete`` space, else ``None``. In ``reset``/``step`` mode the observation is what
the environment returned (often a NumPy array); in ``select_action`` mode it is the decoded JSON.

The function must be deterministic for ``--reproducible`` to be a true claim. Two example
functions live here: :func:`first_legal` and :func:`cartpole_balance`.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mosaic.operators.worker.runtime import (
    BasePolicy,
    add_runtime_arguments,
    discrete_actions,
    run_worker,
)

__all__ = ["ScriptedPolicy", "cartpole_balance", "first_legal", "load_function", "main"]

PolicyFunction = Callable[[Any, "list[int] | None"], Any]


def first_legal(observation: Any, legal_actions: list[int] | None) -> Any:
    """The first legal action (``None``, the no-op, when none is known)."""
    return legal_actions[0] if legal_actions else None


def cartpole_balance(observation: Any, legal_actions: list[int] | None) -> int:
    """Push the cart towards the side the pole is falling to (CartPole: 0 = left, 1 = right)."""
    angle, angular_velocity = float(observation[2]), float(observation[3])
    return 1 if angle + 0.5 * angular_velocity > 0 else 0


def load_function(spec: str) -> PolicyFunction:
    """Import ``module:function`` or ``file.py:function``.

    Raises ``ValueError`` for a malformed spec, ``ImportError`` for a missing module or file and
    ``AttributeError``/``TypeError`` when the name is missing or not callable.
    """
    module_name, sep, func_name = spec.rpartition(":")
    if not sep or not module_name or not func_name:
        raise ValueError(f"--policy must look like package.module:function; got {spec!r}")
    if module_name.endswith(".py"):
        path = Path(module_name)
        if not path.is_file():
            raise ImportError(f"no such policy file: {path}")
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        if module_spec is None or module_spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    function = getattr(module, func_name)
    if not callable(function):
        raise TypeError(f"{spec} is not callable")
    return function


class ScriptedPolicy(BasePolicy):
    """Calls ``function(observation, legal_actions)`` for every action."""

    def __init__(self, function: PolicyFunction, *, reproducible: bool = False) -> None:
        self.function = function
        self.reproducible = reproducible

    def select_action(
        self, observation: Any, legal_actions: list[int] | None = None, action_space: Any = None
    ) -> Any:
        """Whatever the user function returns; its exceptions become ``error`` replies."""
        if legal_actions is None:
            legal_actions = discrete_actions(action_space)
        return self.function(observation, legal_actions)


def build_parser() -> argparse.ArgumentParser:
    """The worker's command line."""
    parser = argparse.ArgumentParser(
        prog="python -m workers.scripted_worker",
        description="mosaic operator worker that acts with a user function "
                    "function(observation, legal_actions) -> action.",
    )
    parser.add_argument("--policy", required=True,
                        help="package.module:function or path/to/file.py:function")
    parser.add_argument("--reproducible", action="store_true",
                        help="claim that the function is deterministic (checked by the "
                             "conformance checker)")
    add_runtime_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the worker; a function that cannot be loaded gives exit code 2."""
    args = build_parser().parse_args(argv)
    return run_worker(
        "scripted_worker", args,
        lambda: ScriptedPolicy(load_function(args.policy), reproducible=args.reproducible),
    )


if __name__ == "__main__":
    sys.exit(main())
