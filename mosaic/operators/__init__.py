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

from typing import TYPE_CHECKING

from mosaic.core.lazy import lazy_names

if TYPE_CHECKING:
    from mosaic.agents.policies import (
        MLPPolicy,
        PolicyFileError,
        QTablePolicy,
        load_policy,
        save_mlp,
        save_q_table,
    )
    from mosaic.operators.api.config import OPERATOR_TYPES, OperatorConfig, WorkerAssignment
    from mosaic.operators.api.operator import (
        ActorDescriptor,
        EpisodeSummary,
        Operator,
        PassiveOperator,
        RandomOperator,
        ScriptedOperator,
        StepSnapshot,
        WorkerOperator,
    )
    from mosaic.operators.api.services import ActorService, OperatorService, PolicyMappingService
    from mosaic.operators.driver.handle import OperatorProcessHandle, WorkerReplyError
    from mosaic.operators.driver.launcher import OperatorLauncher
    from mosaic.operators.driver.multi_handle import MultiAgentOperatorHandle
    from mosaic.operators.driver.multi_operator import MultiOperatorService
    from mosaic.operators.evaluation.manual import ManualSession, run_manual
    from mosaic.operators.evaluation.schema import EvaluationConfig, load_evaluation
    from mosaic.operators.evaluation.script import ScriptResult, run_script
    from mosaic.operators.muscle import OperatorError, OperatorMuscle

_HOMES = {
    **{name: "mosaic.operators.api.operator"
       for name in ("ActorDescriptor", "EpisodeSummary", "Operator", "PassiveOperator",
                    "RandomOperator", "ScriptedOperator", "StepSnapshot", "WorkerOperator")},
    **{name: "mosaic.operators.api.config"
       for name in ("OPERATOR_TYPES", "OperatorConfig", "WorkerAssignment")},
    **{name: "mosaic.operators.api.services"
       for name in ("ActorService", "OperatorService", "PolicyMappingService")},
    "MultiOperatorService": "mosaic.operators.driver.multi_operator",
    "OperatorError": "mosaic.operators.muscle",
    "OperatorMuscle": "mosaic.operators.muscle",
    "OperatorProcessHandle": "mosaic.operators.driver.handle",
    "WorkerReplyError": "mosaic.operators.driver.handle",
    "MultiAgentOperatorHandle": "mosaic.operators.driver.multi_handle",
    "OperatorLauncher": "mosaic.operators.driver.launcher",
    **{name: "mosaic.agents.policies"
       for name in ("MLPPolicy", "PolicyFileError", "QTablePolicy", "load_policy", "save_mlp",
                    "save_q_table")},
    "ScriptResult": "mosaic.operators.evaluation.script",
    "run_script": "mosaic.operators.evaluation.script",
    "EvaluationConfig": "mosaic.operators.evaluation.schema",
    "load_evaluation": "mosaic.operators.evaluation.schema",
    "ManualSession": "mosaic.operators.evaluation.manual",
    "run_manual": "mosaic.operators.evaluation.manual",
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


__getattr__, __dir__ = lazy_names(__name__, _HOMES, __all__)
