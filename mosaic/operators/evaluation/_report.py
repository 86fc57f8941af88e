"""The comparison table Script mode prints at the end of a run."""

from __future__ import annotations

import math

from mosaic.core.text_table import format_table
from mosaic.operators.evaluation._results import ScriptResult, fallback_share


def _number(value: float, digits: int = 2) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def format_comparison_table(result: ScriptResult) -> str:
    """A plain-text table: operator, episodes done, mean and std return, mean length,
    fallbacks (``fallbacks/actions`` for operators whose replies account for them, LLM or BDI,
    else ``-``), failures.

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
                fallback_share(op) or "-",
                "1" if op.failed else "0",
            )
        )
    out = [format_table(header, rows, right=range(1, len(header)), rule=True)]
    for op in result.operators.values():
        for tally in op.tallies:
            if tally.fallbacks:
                out.append(f"{tally.kind} {op.operator_id}: {tally.describe()}; first error: "
                           f"{tally.first_error}")
    for failure in result.failures:
        out.append(f"failed: {failure.message}")
    return "\n".join(out)
