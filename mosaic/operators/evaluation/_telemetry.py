"""An evaluation's telemetry: the JSONL file a run writes, and where that file goes.

The record kinds are listed in :mod:`mosaic.operators.evaluation.script`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mosaic.operators.evaluation._lanes import Lane
    from mosaic.operators.evaluation._models import EvaluationConfig

#: Receives every ``episode`` and ``failure`` record as it is written (never ``step`` records).
ProgressCallback = Callable[[Mapping[str, Any]], None]

DEFAULT_TELEMETRY_DIR = "mosaic-telemetry"


class Telemetry:
    """A JSONL file (or none, when ``path`` is None), written through Python's buffer and
    flushed at episode boundaries. ``progress`` sees every episode and failure record."""

    def __init__(self, path: Path | None, progress: ProgressCallback | None = None) -> None:
        self.path = path
        self._file: IO[str] | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("w", encoding="utf-8")
        self._progress = progress

    def write(self, record: Mapping[str, Any]) -> None:
        if self._file is not None:
            self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
        if self._progress is not None and record.get("kind") in ("episode", "failure"):
            self._progress(record)

    def write_lanes(self, lanes: Sequence[Lane]) -> None:
        """Write what every lane recorded, lane by lane in configuration order."""
        for lane in lanes:
            for record in lane.drain():
                self.write(record)

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def resolve_telemetry_path(
    config: EvaluationConfig, override: str | Path | None = None, *, now: float | None = None
) -> Path:
    """Where the run's JSONL goes: ``override`` (relative to the working directory, as a
    command-line path is), else the file's ``telemetry``, else a directory ``mosaic-telemetry``,
    both relative to the evaluation file's folder (as an experiment's paths are; to the working
    directory for a configuration not read from a file).

    A path ending in ``.jsonl`` is the file itself (overwritten). Anything else is a directory
    that gets a new ``<uid>-<YYYYmmdd-HHMMSS>.jsonl`` per run (with a ``-N`` suffix rather than
    overwriting an existing file).
    """
    if override is not None:
        target = Path(override)
    else:
        target = Path(config.telemetry or DEFAULT_TELEMETRY_DIR).expanduser()
        if config.source != "<memory>":
            target = Path(config.source).parent / target  # an absolute target stays as it is
    if target.suffix == ".jsonl":
        return target
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    candidate = target / f"{config.uid}-{stamp}.jsonl"
    counter = 1
    while candidate.exists():
        candidate = target / f"{config.uid}-{stamp}-{counter}.jsonl"
        counter += 1
    return candidate
