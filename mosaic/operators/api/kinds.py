"""The kinds of operator (``type:`` of an operator), named once: mosaic's own and those that
installed packages add through the ``mosaic.operators`` entry-point group.

A package adds a kind without editing mosaic by declaring, in its ``pyproject.toml``::

    [project.entry-points."mosaic.operators"]
    bdi = "my_package.bdi_worker"

The entry point names a worker *module*, which mosaic's launcher runs as ``python -m
my_package.bdi_worker`` with the flags every worker takes
(:func:`mosaic.operators.worker.runtime.add_runtime_arguments`), and, when the operator has
settings of the kind's own, ``--settings`` with them as a JSON object. The module may define
``SETTINGS_MODEL``, a pydantic model that checks those settings where the file is checked;
without one, any mapping is passed on. The module is imported only when its settings are checked
(not when kinds are listed), so a broken package fails the files that use it, not every command.
``mosaic operators`` lists every kind and where it comes from.
"""

from __future__ import annotations

import functools
import importlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pydantic only where settings are checked: a worker's muscle never loads it
    from pydantic import BaseModel

    from mosaic.core.config_problems import Loc, Problem

__all__ = [
    "BUILTIN_KINDS",
    "ENTRY_POINT_GROUP",
    "OperatorKind",
    "kind_names",
    "operator_kind",
    "operator_kinds",
    "plugin_settings_argv",
    "settings_problems",
    "type_problems",
]

log = logging.getLogger(__name__)

#: The entry-point group a package registers kinds of operator in.
ENTRY_POINT_GROUP = "mosaic.operators"


@dataclass(frozen=True)
class OperatorKind:
    """One kind of operator: its ``type:`` name, the worker module the launcher runs for it
    (``None`` for ``command``, whose argv the file gives) and where it comes from (``mosaic``,
    or the distribution and version that declared it)."""

    name: str
    worker_module: str | None
    origin: str = "mosaic"
    description: str = ""

    @property
    def builtin(self) -> bool:
        """Whether the kind is one of mosaic's own."""
        return self.origin == "mosaic"

    def settings_model(self) -> type[BaseModel] | None:
        """The model that checks this kind's settings: mosaic's own for its kinds, a plug-in
        module's ``SETTINGS_MODEL`` (None when it has none: any mapping passes).

        Raises ``ImportError`` (or what the module raises) when a plug-in module cannot be
        imported, and ``TypeError`` when its ``SETTINGS_MODEL`` is no pydantic model.
        """
        from pydantic import BaseModel

        if self.builtin:
            from mosaic.operators.api.settings import SETTINGS_MODELS

            return SETTINGS_MODELS[self.name]
        module = importlib.import_module(self.worker_module or "")
        model = getattr(module, "SETTINGS_MODEL", None)
        if model is not None and not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise TypeError(f"{self.worker_module}.SETTINGS_MODEL must be a pydantic model "
                            f"class; got {model!r}")
        return model


#: mosaic's own kinds, in the order they are listed.
BUILTIN_KINDS: Mapping[str, OperatorKind] = {kind.name: kind for kind in (
    OperatorKind("random", "workers.random_worker",
                 description="uniform over the legal actions, seeded"),
    OperatorKind("passive", "workers.passive_worker", description="always the no-op action"),
    OperatorKind("scripted", "workers.scripted_worker",
                 description="a Python function of the observation (settings.policy)"),
    OperatorKind("rl", "workers.rl_worker", description="a trained policy checkpoint"),
    OperatorKind("llm", "workers.llm_worker",
                 description="a language model behind an OpenAI-compatible endpoint "
                             "(workers by game: llm, chess, balrog, vlm)"),
    OperatorKind("bdi", "workers.bdi_worker",
                 description="an AgentSpeak plan library, a BDI agent (settings.plan_library)"),
    OperatorKind("human", "workers.human_worker", description="a person at a terminal"),
    OperatorKind("command", None,
                 description="any worker program given as a command list (MOSAIC's too)"),
)}


@functools.cache
def operator_kinds() -> Mapping[str, OperatorKind]:
    """Every kind: mosaic's own, then those of the ``mosaic.operators`` entry points in name
    order. An entry point that reuses a name of mosaic's, or names no module, is skipped with
    a warning; so is the second of two with one name. Read once per process."""
    kinds = dict(BUILTIN_KINDS)
    for entry in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        distribution = getattr(entry, "dist", None)
        origin = (f"{distribution.name} {distribution.version}" if distribution is not None
                  else "an installed package")
        if entry.name in kinds:
            log.warning("ignoring the operator kind %r of %s: %s already has one of that name",
                        entry.name, origin, kinds[entry.name].origin)
            continue
        if entry.attr:
            log.warning("ignoring the operator kind %r of %s: its entry point %r must name a "
                        "worker module (package.module), not an object in one",
                        entry.name, origin, entry.value)
            continue
        kinds[entry.name] = OperatorKind(entry.name, entry.module, origin)
    return kinds


def operator_kind(name: str) -> OperatorKind:
    """The kind called ``name``; ``ValueError`` naming every kind when there is none."""
    kinds = operator_kinds()
    if name not in kinds:
        raise ValueError(f"unknown operator type {name!r}; expected {kind_names()}")
    return kinds[name]


def kind_names() -> str:
    """``"one of random, passive, ..."``: every kind's name, for messages."""
    return "one of " + ", ".join(operator_kinds())


def type_problems(name: str, at: Loc) -> list[Problem]:
    """A problem at ``at`` when no kind is called ``name`` (with a did-you-mean), else none."""
    from mosaic.core.config_problems import Problem, describe_value, did_you_mean

    kinds = operator_kinds()
    if name in kinds:
        return []
    return [Problem(at, f"expected {kind_names()}, got {describe_value(name)}",
                    did_you_mean(name, list(kinds)) or "'mosaic operators' lists every kind")]


def settings_problems(name: str, settings: Mapping[str, Any], at: Loc) -> list[Problem]:
    """What is wrong with ``settings`` for the kind ``name`` (an unknown kind: nothing here),
    at key path ``at``; a plug-in whose module cannot be imported is a problem there too."""
    from mosaic.core.config_problems import Problem, validate

    kind = operator_kinds().get(name)
    if kind is None:
        return []
    try:
        model = kind.settings_model()
    except Exception as error:  # a plug-in's module may raise anything on import
        return [Problem(at, f"the operator type {name!r} of {kind.origin} could not be loaded: "
                            f"{type(error).__name__}: {error}",
                        f"fix or reinstall {kind.origin}")]
    if model is None:
        return []
    return validate(model, dict(settings), at)[1]


def plugin_settings_argv(settings: Mapping[str, Any]) -> list[str]:
    """The flags that carry a plug-in kind's own settings to its worker: ``--settings`` with
    them as a JSON object, or nothing when there are none."""
    return ["--settings", json.dumps(dict(settings), sort_keys=True)] if settings else []
