"""mosaic's operator layer: any decision-maker behind one small protocol.

* :class:`Operator`, the protocol (``select_action`` / ``reset`` / ``on_step_result``), and the
  in-process operators :class:`RandomOperator`, :class:`PassiveOperator`,
  :class:`ScriptedOperator` and :class:`WorkerOperator`;
* :class:`ActorService`, :class:`PolicyMappingService` and :class:`MultiOperatorService`;
* :class:`OperatorConfig` and :class:`OperatorLauncher`, which start worker subprocesses speaking
  the JSON-lines protocol (:mod:`mosaic.operators.protocol`), and their handles;
* :class:`OperatorMuscle`, an operator as an agent of an experiment;
* Script mode (:func:`run_script`) and Manual mode (:func:`run_manual`) over evaluation files.

The names are loaded on first use: a component process that imports
``mosaic.operators:OperatorMuscle`` must not pay for pydantic, YAML and the Script-mode code at
start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mosaic.operators.config import OPERATOR_TYPES, OperatorConfig, WorkerAssignment
    from mosaic.operators.handle import (
        MultiAgentOperatorHandle,
        OperatorProcessHandle,
        WorkerReplyError,
    )
    from mosaic.operators.launcher import OperatorLauncher
    from mosaic.operators.manual_mode import ManualSession, run_manual
    from mosaic.operators.muscle import OperatorError, OperatorMuscle
    from mosaic.operators.operator import (
        ActorDescriptor,
        EpisodeSummary,
        Operator,
        PassiveOperator,
        RandomOperator,
        ScriptedOperator,
        StepSnapshot,
        WorkerOperator,
    )
    from mosaic.operators.policies import (
        MLPPolicy,
        PolicyFileError,
        QTablePolicy,
        load_policy,
        save_mlp,
        save_q_table,
    )
    from mosaic.operators.script_mode import ScriptResult, run_script
    from mosaic.operators.script_schema import EvaluationConfig, load_evaluation
    from mosaic.operators.services import (
        ActorService,
        MultiOperatorService,
        OperatorService,
        PolicyMappingService,
    )

_HOMES = {
    **{name: "operator" for name in ("ActorDescriptor", "EpisodeSummary", "Operator",
                                     "PassiveOperator", "RandomOperator", "ScriptedOperator",
                                     "StepSnapshot", "WorkerOperator")},
    **{name: "config" for name in ("OPERATOR_TYPES", "OperatorConfig", "WorkerAssignment")},
    **{name: "handle" for name in ("MultiAgentOperatorHandle", "OperatorProcessHandle",
                                   "WorkerReplyError")},
    "OperatorLauncher": "launcher",
    **{name: "services" for name in ("ActorService", "MultiOperatorService", "OperatorService",
                                     "PolicyMappingService")},
    **{name: "policies" for name in ("MLPPolicy", "PolicyFileError", "QTablePolicy",
                                     "load_policy", "save_mlp", "save_q_table")},
    "OperatorError": "muscle", "OperatorMuscle": "muscle",
    "ScriptResult": "script_mode", "run_script": "script_mode",
    "EvaluationConfig": "script_schema", "load_evaluation": "script_schema",
    "ManualSession": "manual_mode", "run_manual": "manual_mode",
}

__all__ = [
    "OPERATOR_TYPES",
    "ActorDescriptor",
    "ActorService",
    "EpisodeSummary",
    "EvaluationConfig",
    "MLPPolicy",
    "ManualSession",
    "MultiAgentOperatorHandle",
    "MultiOperatorService",
    "Operator",
    "OperatorConfig",
    "OperatorError",
    "OperatorLauncher",
    "OperatorMuscle",
    "OperatorProcessHandle",
    "OperatorService",
    "PassiveOperator",
    "PolicyFileError",
    "PolicyMappingService",
    "QTablePolicy",
    "RandomOperator",
    "ScriptResult",
    "ScriptedOperator",
    "StepSnapshot",
    "WorkerAssignment",
    "WorkerOperator",
    "WorkerReplyError",
    "load_evaluation",
    "load_policy",
    "run_manual",
    "run_script",
    "save_mlp",
    "save_q_table",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'mosaic.operators' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"mosaic.operators.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
