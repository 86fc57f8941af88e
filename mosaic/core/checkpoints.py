"""Brain checkpoints: NumPy ``.npz`` files beside the results store (never pickle).

Layout: ``<store stem>-checkpoints/<experiment>/<run>/<phase>/<agent>.npz`` next to the store
file, where ``<run>`` is the run's uid without its phase suffix. A later phase of the same run,
or a later experiment, finds a checkpoint by experiment, phase, agent and (optionally) run.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from mosaic.core.errors import MosaicError


class CheckpointError(MosaicError):
    """A checkpoint could not be found, read or written."""


def checkpoint_root(store_path: str | Path) -> Path:
    """The folder holding the checkpoints of the runs recorded in ``store_path``."""
    store = Path(store_path)
    return store.parent / f"{store.stem}-checkpoints"


def checkpoint_path(root: Path, experiment: str, run: str, phase: str, agent: str) -> Path:
    """Where ``agent``'s brain state at the end of ``phase`` of ``run`` is saved."""
    return root / experiment / run / phase / f"{agent}.npz"


def find_checkpoint(root: Path, experiment: str, phase: str, agent: str,
                    run: str | None = None) -> Path:
    """The checkpoint of ``agent`` after ``phase``: of ``run`` (uid or unique prefix) if given,
    else of the newest run of ``experiment`` that saved one. Raises :class:`CheckpointError`."""
    folder = root / experiment
    candidates = sorted(folder.glob(f"*/{phase}/{agent}.npz"), key=lambda p: p.stat().st_mtime)
    if run is not None:
        candidates = [p for p in candidates if p.parents[1].name.startswith(run)]
        runs = {p.parents[1].name for p in candidates}
        if len(runs) > 1:
            raise CheckpointError(f"run {run!r} is ambiguous: {sorted(runs)}")
    if not candidates:
        which = f"run {run!r} of " if run else ""
        raise CheckpointError(
            f"no checkpoint of agent {agent!r} after phase {phase!r} in {which}experiment "
            f"{experiment!r} (looked in {folder})")
    return candidates[-1]


def save_state(path: str | Path, state: dict[str, np.ndarray]) -> None:
    """Write ``state`` to ``path`` atomically: a reader never sees half a file."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    arrays = {name: np.asarray(value) for name, value in state.items()}
    for name, value in arrays.items():
        if value.dtype == object:
            raise CheckpointError(f"checkpoint entry {name!r} is an object array; only plain "
                                  "NumPy data can be saved")
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.stem}-",
                                         suffix=".npz")
    try:
        with os.fdopen(handle, "wb") as stream:
            np.savez(stream, **arrays)  # type: ignore[arg-type]  # NumPy's stubs: **kwds: bool
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def load_state(path: str | Path) -> dict[str, np.ndarray]:
    """Read a checkpoint written by :func:`save_state` (``allow_pickle=False``)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except (OSError, ValueError) as error:
        raise CheckpointError(f"cannot read checkpoint {path}: {error}") from error
