"""The comparison table Script mode prints at the end of a run."""

from __future__ import annotations

import math
from collections.abc import Sequence

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
    rows = [header]
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
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        cells = [row[0].ljust(widths[0])]
        cells += [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        return "  ".join(cells).rstrip()

    out = [line(rows[0]), "  ".join("-" * w for w in widths)]
    out += [line(row) for row in rows[1:]]
    for op in result.operators.values():
        if op.llm is not None and op.llm.fallbacks:
            out.append(f"llm {op.operator_id}: {op.llm.describe()}; first error: "
                       f"{op.llm.first_error}")
    for failure in result.failures:
        out.append(f"failed: {failure.message}")
    return "\n".join(out)
