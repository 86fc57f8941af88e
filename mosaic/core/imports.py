"""Resolving what an experiment file names: import paths, environments, agent classes.

An experiment file names classes and factories by import path, as ``package.module:Attr`` (the
form entry points use). ``Attr`` may be dotted to reach a nested attribute
(``package.module:Outer.Inner``). :func:`import_object` resolves such a path.

Environments are named in one of three forms, told apart by :func:`parse_env_reference`:

* ``gymnasium:<id>``: an id in Gymnasium's registry (``gymnasium:CartPole-v1``). An id of the form
  ``module:Id`` imports ``module`` first, so that a package can register its environments, as
  ``gymnasium.make`` does.
* ``pettingzoo:<family>.<module>``: a PettingZoo environment module
  (``pettingzoo:classic.tictactoe_v3``), which must provide ``env`` or ``parallel_env``.
* ``package.module:Attr``: a Gymnasium or PettingZoo environment class, or a factory returning one.

Every function here raises :class:`ImportPathError` when it cannot resolve a name. The message
says what failed and the ``hint`` what to check, so that the experiment loader can turn it into a
:class:`~mosaic.core.errors.ConfigError` at the right key.

A module of the user's own (``my_env:MyEnv``, ``my_env.py`` in the current folder) is imported
from the current folder, which :func:`user_folder_last` puts after the installed packages.
"""

from __future__ import annotations

import difflib
import importlib
import os
import pkgutil
import re
import sys
from typing import Any, Literal

from mosaic.core.errors import MissingExtra, interruption_in
from mosaic.core.extras import extra_for

__all__ = [
    "EnvKind",
    "ImportPathError",
    "import_module",
    "import_object",
    "parse_env_reference",
    "resolve_class",
    "resolve_env",
    "split_import_path",
    "user_folder_last",
]

EnvKind = Literal["gymnasium", "pettingzoo", "import"]
"""How an environment is named: a Gymnasium id, a PettingZoo module, or an import path."""

_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_PATH = re.compile(rf"(?P<module>{_DOTTED}):(?P<attr>{_DOTTED})")
_MODULE = re.compile(_DOTTED)
_SYS_PATH_HINT = (
    "check the spelling, and that the package is installed in this Python environment; a module "
    "of your own must be importable (installed, or its folder on PYTHONPATH)"
)


#: The folders of experiment files whose modules may be imported, for the processes a command
#: starts (see :func:`add_user_folder`).
USER_PATH_VARIABLE = "MOSAIC_USER_PATH"


def add_user_folder(folder: str | os.PathLike[str]) -> None:
    """Make ``folder`` (an experiment file's) importable, after the current folder: a module
    beside the file is found whatever folder the command runs in. Component processes and
    zygotes started from now on find it too (:data:`USER_PATH_VARIABLE`, read by
    :func:`user_folder_last`)."""
    path = os.path.abspath(folder)
    listed = [entry for entry in os.environ.get(USER_PATH_VARIABLE, "").split(os.pathsep)
              if entry]
    if path not in listed:
        os.environ[USER_PATH_VARIABLE] = os.pathsep.join([*listed, path])
    if path not in sys.path:
        sys.path.append(path)


def user_folder_last() -> None:
    """Make the current folder the last entry of ``sys.path``, after the installed packages,
    followed by the experiment files' folders a parent command named (:func:`add_user_folder`).

    The modules of a user's own that an experiment file names are imported from there, but a
    ``numpy.py`` or ``sqlalchemy.py`` there must not shadow the package mosaic imports (``python
    -m`` puts the folder first). Every mosaic process calls this before it imports anything of
    a third party: the command, and each component process and zygote, which run with the
    command's folder. Removes ``""``, ``"."`` and the folder itself from anywhere else in
    ``sys.path``; does nothing where the folder no longer exists.
    """
    try:
        here = os.getcwd()
    except OSError:  # removed under this process: nothing can be imported from it anyway
        return
    sys.path[:] = [*(entry for entry in sys.path if entry not in ("", ".", here)), here]
    for folder in os.environ.get(USER_PATH_VARIABLE, "").split(os.pathsep):
        if folder and folder not in sys.path:
            sys.path.append(folder)


class ImportPathError(ImportError):
    """A name in an experiment file cannot be resolved.

    ``path`` is the name as written, ``message`` what went wrong and ``hint`` what to check
    (possibly empty). ``reason`` classifies the failure: ``"format"`` (malformed name),
    ``"missing"`` (no such module), ``"failed"`` (the module exists but raised while importing),
    ``"attribute"`` (no such attribute) or ``"type"`` (the object is not of the expected kind).
    """

    def __init__(self, path: str, message: str, hint: str = "", *, reason: str = "failed") -> None:
        self.path = path
        self.message = message
        self.hint = hint
        self.reason = reason
        text = f"{path!r}: {message}"
        if hint:
            text += f" (hint: {hint})"
        super().__init__(text)


def _did_you_mean(candidates: list[str], prefix: str = "") -> str:
    return "did you mean " + " or ".join(f"'{prefix}{name}'" for name in candidates) + "?"


def split_import_path(path: str) -> tuple[str, str]:
    """Split ``package.module:Attr`` into ``("package.module", "Attr")``.

    Raises :class:`ImportPathError` when ``path`` does not have that form; the hint suggests the
    colon form when ``path`` uses a dot before the attribute instead.
    """
    match = _PATH.fullmatch(path)
    if match is not None:
        return match["module"], match["attr"]
    hint = "write the module, a colon, then the attribute, e.g. 'mosaic.agents:RandomMuscle'"
    if ":" not in path and "." in path and _MODULE.fullmatch(path):
        module, _, attr = path.rpartition(".")
        hint = _did_you_mean([f"{module}:{attr}"])
    raise ImportPathError(
        path, "expected an import path of the form 'package.module:Attr'", hint, reason="format"
    )


def import_module(name: str, path: str | None = None) -> Any:
    """Import and return the module ``name``, translating every failure to :class:`ImportPathError`.

    ``path`` is the text the error is reported against (``name`` when not given). A missing
    module (reason ``"missing"``) and a module that fails while importing, for a missing
    dependency, a syntax error or any exception at import time (reason ``"failed"``), are told
    apart, so that the user knows which one to fix. A part of mosaic whose optional packages
    are missing (:class:`~mosaic.core.errors.MissingExtra`) is ``"missing"``, and the message
    names the extra to install.
    """
    shown = name if path is None else path
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        missing = error.name or ""
        if missing and (missing == name or name.startswith(missing + ".")):
            raise ImportPathError(
                shown, f"no module named '{missing}'", _SYS_PATH_HINT, reason="missing"
            ) from error
        extra = extra_for(missing) if missing else None
        raise ImportPathError(
            shown,
            f"importing module '{name}' failed: {error}",
            (f"the module needs '{missing}', which is not installed: "
             f"pip install 'mosaic[{extra}]'") if extra is not None
            else f"the module needs '{missing}', which is not installed" if missing else "",
        ) from error
    except MissingExtra as error:  # an optional part of mosaic, without its extra
        raise ImportPathError(shown, str(error), reason="missing") from error  # names the extra
    except (Exception, SystemExit) as error:  # user code may raise anything
        if (interrupted := interruption_in(error)) is not None:
            raise interrupted from None  # a signal during the import, wrapped on its way out
        raise ImportPathError(
            shown,
            f"importing module '{name}' raised {type(error).__name__}: {error}",
            "fix the error in that module",
        ) from error


#: In a component process, the only paths :func:`import_object` imports: what the run's
#: experiment file named (see :func:`allow_only`); ``None`` elsewhere.
_allowed: frozenset[str] | None = None


def allow_only(paths: frozenset[str] | None) -> None:
    """From now on, let :func:`import_object` import only ``paths`` (``None``: anything).

    A component process calls it with the names of its run's validated experiment file, so a
    request can never make it import a name taken from the wire.
    """
    global _allowed
    _allowed = paths


def import_object(path: str) -> Any:
    """Import and return the object that ``path`` (``package.module:Attr``) names.

    ``Attr`` may be dotted (``Outer.Inner``). Importing runs the module's top-level code, as any
    import does. Raises :class:`ImportPathError` (a subclass of :class:`ImportError`) when the
    path is malformed, the module cannot be imported, or the attribute does not exist; in the
    last case the hint names close attributes that do exist.
    """
    if _allowed is not None and path not in _allowed:
        raise ImportPathError(path, "refusing to import it: the experiment file does not name it",
                              reason="refused")
    module_name, attr = split_import_path(path)
    target: Any = import_module(module_name, path)
    reached: list[str] = []
    for part in attr.split("."):
        owner = module_name + (":" + ".".join(reached) if reached else "")
        try:
            target = getattr(target, part)
        except AttributeError:
            names = [name for name in dir(target) if not name.startswith("_")]
            close = difflib.get_close_matches(part, names, n=3, cutoff=0.6)
            hint = _did_you_mean(close) if close else "check the spelling and case of the name"
            raise ImportPathError(
                path, f"'{owner}' has no attribute '{part}'", hint, reason="attribute"
            ) from None
        except Exception as error:  # a module __getattr__ may raise anything
            if (interrupted := interruption_in(error)) is not None:
                raise interrupted from None
            raise ImportPathError(
                path, f"reading '{part}' from '{owner}' raised {type(error).__name__}: {error}"
            ) from error
        reached.append(part)
    return target


def resolve_class(path: str, base: type) -> type:
    """Import the class ``path`` names and check that it subclasses ``base`` (and is not ``base``).

    Returns the class. Raises :class:`ImportPathError` when it cannot be imported, when it is not
    a class, when it is ``base`` itself (which only defines the interface), or when it does not
    subclass ``base``; the hint names the base class to subclass.
    """
    obj = import_object(path)
    # mosaic's bases are documented under their package, not their private module.
    module = "mosaic.agents" if base.__module__.startswith("mosaic.agents.") else base.__module__
    base_name = f"{module}.{base.__name__}"
    if not isinstance(obj, type):
        raise ImportPathError(
            path,
            f"'{path}' is {_kind_of(obj)}, not a class",
            f"point to a class that subclasses {base_name}",
            reason="type",
        )
    if obj is base:
        raise ImportPathError(
            path,
            f"'{path}' is the base class {base_name} itself, which only defines the interface",
            f"point to a subclass of {base_name}, e.g. one of your own",
            reason="type",
        )
    if not issubclass(obj, base):
        raise ImportPathError(
            path,
            f"class '{path}' does not subclass {base_name}",
            f"a {base.__name__.lower()} class must subclass {base_name}",
            reason="type",
        )
    return obj


def _kind_of(obj: Any) -> str:
    if callable(obj):
        return "a function" if type(obj).__name__ == "function" else "a callable object"
    if type(obj).__name__ == "module":
        return "a module"
    return f"a value of type {type(obj).__name__}"


def parse_env_reference(text: str) -> tuple[EnvKind, str]:
    """Split an ``env`` value into its kind and its target.

    ``gymnasium:CartPole-v1`` gives ``("gymnasium", "CartPole-v1")``,
    ``pettingzoo:classic.tictactoe_v3`` gives ``("pettingzoo", "classic.tictactoe_v3")``, and any
    other text ``("import", text)``. Nothing is imported or checked.
    """
    for kind in ("gymnasium", "pettingzoo"):
        prefix = f"{kind}:"
        if text.startswith(prefix):
            return kind, text[len(prefix) :]
    return "import", text


def resolve_env(text: str) -> EnvKind:
    """Check that the environment ``text`` names exists, without building it; return its kind.

    A Gymnasium id must be registered, and its entry point must import (so that a missing
    optional dependency shows now, not at run time). A PettingZoo module must import and provide
    ``env`` or ``parallel_env``. An import path must name a Gymnasium ``Env``, a PettingZoo
    ``AECEnv`` or ``ParallelEnv`` class, or another callable (a factory). Raises
    :class:`ImportPathError` otherwise, with close names as hints where there are any.
    """
    kind, target = parse_env_reference(text)
    if kind == "gymnasium":
        _resolve_gymnasium(text, target)
    elif kind == "pettingzoo":
        _resolve_pettingzoo(text, target)
    else:
        _resolve_env_import(text)
    return kind


def _resolve_gymnasium(text: str, env_id: str) -> None:
    import gymnasium

    if ":" in env_id:
        module, _, env_id = env_id.partition(":")
        import_module(module, text)
    registry = gymnasium.envs.registry
    if env_id not in registry:
        ids = list(registry)
        by_case = {name.lower(): name for name in ids}
        close = [by_case[env_id.lower()]] if env_id.lower() in by_case else []
        close = close or difflib.get_close_matches(env_id, ids, n=3, cutoff=0.6)
        hint = (
            _did_you_mean(close, "gymnasium:")
            if close
            else "gymnasium.pprint_registry() lists the registered ids; for an environment from "
            "another package write 'gymnasium:package.module:Id' so that the package registers it"
        )
        raise ImportPathError(
            text, f"no Gymnasium environment is registered as '{env_id}'", hint, reason="missing"
        )
    entry_point = registry[env_id].entry_point
    if isinstance(entry_point, str):
        try:
            import_object(entry_point)
        except ImportPathError as error:
            raise ImportPathError(
                text,
                f"'{env_id}' is registered, but its entry point '{entry_point}' cannot be "
                f"loaded: {error.message}",
                "install the optional dependencies it needs, e.g. gymnasium[box2d] or "
                "gymnasium[mujoco]",
                reason="failed",
            ) from error


def _pettingzoo_modules() -> list[str]:
    """``family.module_vN`` names under pettingzoo, found on disk without importing them."""
    import pettingzoo

    names = []
    for root in pettingzoo.__path__:
        for family in pkgutil.iter_modules([root]):
            if not family.ispkg:
                continue
            for module in pkgutil.iter_modules([os.path.join(root, family.name)]):
                if re.search(r"_v\d+$", module.name):
                    names.append(f"{family.name}.{module.name}")
    return sorted(names)


def _resolve_pettingzoo(text: str, target: str) -> None:
    example = "e.g. 'pettingzoo:classic.tictactoe_v3'"
    if not _MODULE.fullmatch(target):
        raise ImportPathError(
            text,
            "expected 'pettingzoo:<family>.<module>'",
            f"name a PettingZoo environment module, {example}",
            reason="format",
        )
    try:
        module = import_module(f"pettingzoo.{target}", text)
    except ImportPathError as error:
        if error.reason != "missing":
            raise
        close = difflib.get_close_matches(target, _pettingzoo_modules(), n=3, cutoff=0.6)
        hint = _did_you_mean(close, "pettingzoo:") if close else f"name a module, {example}"
        raise ImportPathError(
            text, f"PettingZoo has no environment module '{target}'", hint, reason="missing"
        ) from error
    if not any(callable(getattr(module, name, None)) for name in ("env", "parallel_env")):
        raise ImportPathError(
            text,
            f"module 'pettingzoo.{target}' has neither env() nor parallel_env()",
            f"name an environment module such as {example}",
            reason="type",
        )


def _resolve_env_import(text: str) -> None:
    import gymnasium
    from pettingzoo import AECEnv, ParallelEnv

    try:
        obj = import_object(text)
    except ImportPathError as error:
        if error.reason != "format":
            raise
        raise ImportPathError(
            text,
            "expected 'gymnasium:<id>', 'pettingzoo:<family>.<module>' or 'package.module:Attr'",
            _env_form_hint(text, error.hint),
            reason="format",
        ) from None
    if isinstance(obj, type):
        if not issubclass(obj, (gymnasium.Env, AECEnv, ParallelEnv)):
            raise ImportPathError(
                text,
                f"class '{text}' is not an environment",
                "an environment class must subclass gymnasium.Env, pettingzoo.AECEnv or "
                "pettingzoo.ParallelEnv",
                reason="type",
            )
    elif not callable(obj):
        raise ImportPathError(
            text,
            f"'{text}' is {_kind_of(obj)}, neither an environment class nor a factory",
            "point to an environment class, or to a function that returns an environment",
            reason="type",
        )


def _env_form_hint(text: str, import_hint: str) -> str:
    import gymnasium

    if text in gymnasium.envs.registry:
        return _did_you_mean([text], "gymnasium:")
    if re.fullmatch(r"[a-z]+\.[a-z0-9_]+_v\d+", text):
        return _did_you_mean([text], "pettingzoo:")
    if import_hint.startswith("did you mean"):
        return import_hint
    return (
        "e.g. 'gymnasium:CartPole-v1', 'pettingzoo:classic.tictactoe_v3' or 'my_package.envs:MyEnv'"
    )
