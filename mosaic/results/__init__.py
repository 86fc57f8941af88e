"""Results a researcher reads without SQL: learning curves as PNGs, tables as files.

* :mod:`~mosaic.results._curves`: returns or a metric per run, smoothed, seeds merged;
* :mod:`~mosaic.results.plot`: those curves drawn as a figure and written as a PNG;
* :mod:`~mosaic.results.export`: runs, episodes, steps or metrics as CSV, JSON lines or Parquet.

Each needs the ``results`` extra (pandas, pyarrow, matplotlib); a missing package raises
:class:`~mosaic.core.errors.MissingExtra` naming it, when it is first needed.
"""

from mosaic.results._curves import BANDS, Curve, Curves, load_curves, moving_average
from mosaic.results.export import TABLES, flatten_column, format_for, load_table, write_table
from mosaic.results.plot import build_figure, save_figure

__all__ = [
    "BANDS",
    "TABLES",
    "Curve",
    "Curves",
    "build_figure",
    "flatten_column",
    "format_for",
    "load_curves",
    "load_table",
    "moving_average",
    "save_figure",
    "write_table",
]
