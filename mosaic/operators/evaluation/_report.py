"""The comparison table Script mode prints at the end of a run."""

from __future__ import annotations

import math

from mosaic.core.text_table import format_table
from mosaic.operators.evaluation._results import ScriptResult


def _number(value: float, digits: int = 2) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def format_comparison_table(result: ScriptResult) -> str:
    """A plain-text table: operator, episodes done, mean and std return, mean length, LLM
    fallbacks (``fallbacks/actions`` for operators whose replies account for them, else ``-``),
    failures.

    Operators with fallbacks are explained under the table (reasons, tokens), then failed
    operators with their messages.
    """
    header = ("operator", "episodes", "mean return", "std return", "mean length", "fallbacks",
              "failures")
    rows = []
    for op in result.operators.values():
        name = op.operator_id
        if op.display_name != op.operator_id:
            name += f" ({op.display_name})"
        rows.append(
            (
                name,
                f"{op.episodes_done}/{result.episodes_planned}",
                _number(op.mean_return),
                _number(op.std_return),
                _number(op.mean_length, 1),
                f"{op.llm.fallbacks}/{op.llm.actions}" if op.llm is not None else "-",
                "1" if op.failed else "0",
            )
        )
    out = [format_table(header, rows, right=range(1, len(header)), rule=True)]
    for op in result.operators.values():
        if op.llm is not None and op.llm.fallbacks:
            out.append(f"llm {op.operator_id}: {op.llm.describe()}; first error: "
                       f"{op.llm.first_error}")
    for failure in result.failures:
        out.append(f"failed: {failure.message}")
    return "\n".join(out)
