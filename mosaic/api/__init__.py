"""mosaic from Python: run an experiment and read its results.

:func:`run` runs an experiment file, a loaded :class:`~mosaic.experiment.Experiment` or a
mapping with a file's content, with overrides of its keys, through the same orchestration,
store and ordered shutdown as ``mosaic experiment-start``, and returns :class:`Results`.

The names load on first use, as the package façade's do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mosaic.core.lazy import lazy_names

if TYPE_CHECKING:
    from mosaic.api.results import Results, RunRecord
    from mosaic.api.runner import run

_HOMES = {
    "run": "mosaic.api.runner",
    **dict.fromkeys(("Results", "RunRecord"), "mosaic.api.results"),
}

__all__ = ["Results", "RunRecord", "run"]


__getattr__, __dir__ = lazy_names(__name__, _HOMES, __all__)
