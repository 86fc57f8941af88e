"""Learning curves drawn with matplotlib, without pyplot: no global state and no display.

The figure is built on the Agg canvas directly, so nothing depends on the backend matplotlib
would pick (or on ``MPLBACKEND``), and a headless machine draws the same PNG as a desktop.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mosaic.core.extras import require
from mosaic.results._curves import Curves

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["DPI", "SIZE", "build_figure", "save_figure"]

#: Figure size in inches and resolution: an 800 x 450 pixel PNG.
SIZE = (8.0, 4.5)
DPI = 100


def build_figure(curves: Curves) -> Figure:
    """One axes with a line per curve, its band filled in the line's colour, and a legend.

    Raises MissingExtra without matplotlib.
    """
    require("matplotlib", "plotting")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=SIZE, dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for curve in curves.curves:
        (line,) = axes.plot(curve.x, curve.y, label=curve.label, linewidth=1.5)
        if curve.low is not None and curve.high is not None:
            axes.fill_between(curve.x, curve.low, curve.high, color=line.get_color(),
                              alpha=0.25, linewidth=0)
    axes.set_xlabel(curves.x_label)
    axes.set_ylabel(curves.y_label)
    axes.grid(True, alpha=0.3)
    axes.legend(loc="best", fontsize="small")
    return figure


def save_figure(figure: Figure, path: str | Path) -> Path:
    """Write ``figure`` as a PNG at ``path`` and return the path; OSError if it cannot."""
    target = Path(path)
    figure.savefig(target, format="png", dpi=DPI)
    return target
