"""Tables of runs, episodes, steps or metrics as CSV, JSON lines or Parquet files.

Cells hold plain values. A step's observation and action become columns by one rule: a scalar
is one column; an array (or list or tuple) of numbers whose shape is the same in every row and
that has at most :data:`SMALL_ARRAY` elements is one column per element (``observation_0``,
``observation_1``, ... in row-major order); anything else (images, dicts, ragged lists) is one
column of JSON text. A step's stored info (``store_info``) becomes one ``info_<key>`` column per
key, each by the same rule. A run's stored config and an episode's returns per agent follow the same
rule (``config`` as JSON text; ``return_<agent>`` columns come from the store).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

import numpy as np

from mosaic.core.extras import require
from mosaic.store import Store

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "FORMATS",
    "SMALL_ARRAY",
    "TABLES",
    "Format",
    "flatten_column",
    "format_for",
    "load_table",
    "write_table",
]

Format = Literal["csv", "jsonl", "parquet"]
TABLES = ("runs", "episodes", "steps", "metrics")
#: File suffixes and the format they imply.
FORMATS: dict[str, Format] = {
    ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".pq": "parquet",
}
#: Arrays of at most this many elements, of one shape in every row, get a column per element.
SMALL_ARRAY = 16


def format_for(out: str | Path | None, given: str | None) -> Format:
    """The format asked for, else the one ``out``'s suffix implies, else CSV.

    Raises ValueError for a suffix that implies none, or Parquet without a file.
    """
    chosen: str | None = given
    if chosen is None and out is not None:
        suffix = Path(out).suffix.lower()
        chosen = FORMATS.get(suffix)
        if chosen is None:
            raise ValueError(f"cannot tell the format from {str(out)!r}: give --format "
                             f"(csv, jsonl or parquet) or a suffix ({', '.join(FORMATS)})")
    chosen = chosen or "csv"
    if chosen == "parquet" and out is None:
        raise ValueError("Parquet is binary: give --out FILE")
    return chosen  # type: ignore[return-value]


def load_table(
    store: Store, what: str, runs: Sequence[str | int] = (), experiment: str | None = None
) -> pd.DataFrame:
    """Table ``what`` (one of :data:`TABLES`) of the selected runs, with plain cells only.

    Raises StoreError for an unknown run or experiment, MissingExtra without pandas.
    """
    if what == "runs":
        frame = store.runs_frame(*runs, experiment=experiment)
        frame["config"] = [_json(config) for config in frame["config"]]
        return frame
    if what == "episodes":
        return store.episodes_frame(*runs, experiment=experiment)
    if what == "metrics":
        return store.metrics_frame(*runs, experiment=experiment)
    if what == "steps":
        frame = _info_columns(store.steps_frame(*runs, experiment=experiment))
        for column in ("observation", "action",
                       *(c for c in frame.columns if c.startswith("info_"))):
            frame = flatten_column(frame, column)
        return frame
    raise ValueError(f"no table {what!r}; tables: {', '.join(TABLES)}")


def _info_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its ``info`` column (dicts of the stored keys) as one column per key."""
    pd = require("pandas", "a table of steps")
    cells = frame["info"].tolist()
    keys = list(dict.fromkeys(key for cell in cells if cell for key in cell))
    columns = pd.DataFrame({f"info_{key}": [None if not cell else cell.get(key)
                                            for cell in cells] for key in keys},
                           index=frame.index)
    return pd.concat([frame.drop(columns="info"), columns], axis=1)


def flatten_column(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """``frame`` with ``column`` made plain by the module's rule, its new columns in its place."""
    pd = require("pandas", "a table of steps")
    cells = frame[column].tolist()
    present = [cell for cell in cells if cell is not None]
    if all(_is_scalar(cell) for cell in present):
        replacement = pd.DataFrame({column: [_scalar(cell) for cell in cells]}, index=frame.index)
    else:
        shape = _common_shape(present)
        if shape is not None and int(np.prod(shape)) <= SMALL_ARRAY:
            width = int(np.prod(shape))
            rows = [[None] * width if cell is None else np.asarray(cell).ravel().tolist()
                    for cell in cells]
            replacement = pd.DataFrame(rows, columns=[f"{column}_{i}" for i in range(width)],
                                       index=frame.index)
        else:
            replacement = pd.DataFrame({column: [None if cell is None else _json(cell)
                                                 for cell in cells]}, index=frame.index)
    at = list(frame.columns).index(column)
    before, after = frame.iloc[:, :at], frame.iloc[:, at + 1:]
    return pd.concat([before, replacement, after], axis=1)


def write_table(frame: pd.DataFrame, fmt: Format, out: str | Path | None,
                stream: TextIO | None = None) -> None:
    """Write ``frame`` as ``fmt`` to file ``out``, or to ``stream`` (stdout) without one.

    Raises OSError when the file cannot be written, MissingExtra for Parquet without pyarrow.
    """
    if fmt == "parquet":
        require("pyarrow", "Parquet export")
        if out is None:
            raise ValueError("Parquet is binary: give --out FILE")
        frame.to_parquet(Path(out), index=False)
        return
    target: Any = Path(out) if out is not None else (stream or sys.stdout)
    if fmt == "csv":
        frame.to_csv(target, index=False)
    else:
        text = frame.to_json(orient="records", lines=True, date_format="iso")
        if isinstance(target, Path):
            target.write_text(text + ("\n" if text and not text.endswith("\n") else ""))
        else:
            target.write(text + ("\n" if text and not text.endswith("\n") else ""))


def _is_scalar(cell: Any) -> bool:
    return isinstance(cell, (bool, int, float, str, np.generic)) or (
        isinstance(cell, np.ndarray) and cell.ndim == 0
    )


def _scalar(cell: Any) -> Any:
    if isinstance(cell, (np.generic, np.ndarray)):
        return cell.item()
    return cell


def _common_shape(cells: list[Any]) -> tuple[int, ...] | None:
    """The shape all ``cells`` share as numeric arrays, or None if they do not share one."""
    shape: tuple[int, ...] | None = None
    for cell in cells:
        if not isinstance(cell, (np.ndarray, list, tuple)):
            return None
        try:
            array = np.asarray(cell)
        except ValueError:  # ragged
            return None
        if array.dtype.kind not in "biuf" or (shape is not None and array.shape != shape):
            return None
        shape = array.shape
    return shape


def _json(value: Any) -> str:
    return json.dumps(value, default=_plain, sort_keys=True)


def _plain(value: Any) -> Any:
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    if isinstance(value, (tuple, set, frozenset)):
        return list(value)
    if isinstance(value, bytes):
        return value.hex()
    return str(value)
