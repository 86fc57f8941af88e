"""Agent checkpoints: NumPy ``.npz`` files beside the results store (never pickle).

Layout: ``<store stem>-checkpoints/<experiment>/<run>/<phase>/<agent>.npz`` next to the store
file, where ``<run>`` is the run's uid without its phase suffix. A later phase of the same run,
or a later experiment, finds a checkpoint by experiment, phase, agent and (optionally) run.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
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


def previous_checkpoint(path: str | Path) -> Path:
    """Where the periodic checkpoint before the one at ``path`` is kept (``<agent>.previous.npz``
    beside it): a run resumed after its command died continues from the latest of the two that
    the store has every record of."""
    target = Path(path)
    return target.with_name(f"{target.stem}.previous{target.suffix}")


def checkpoint_name(path: str | Path) -> str:
    """The name a checkpoint file has in the store: its file name (``<agent>.npz``,
    ``<agent>.previous.npz``), the run and phase being the store's run."""
    return Path(path).name


def saved_episodes(data: bytes) -> int:
    """The ``episodes`` of the checkpoint file ``data`` (0 if none, or not readable)."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            name = f"{RUN}episodes"
            return int(arrays[name]) if name in arrays.files else 0
    except (OSError, ValueError):
        return 0


def find_checkpoint(root: Path, experiment: str, phase: str, agent: str,
                    run: str | None = None, besides: str | None = None) -> Path:
    """The checkpoint of ``agent`` after ``phase``: of ``run`` (uid or unique prefix) if given,
    else of the newest run of ``experiment`` that saved one, never of the run ``besides``
    (the run that loads it, whose own checkpoints a resumed run may have left there). Raises
    :class:`CheckpointError`."""
    folder = root / experiment
    candidates = sorted((path for path in folder.glob(f"*/{phase}/{agent}.npz")
                         if path.parents[1].name != besides),
                        key=lambda p: p.stat().st_mtime)
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
    arrays = {name: np.asarray(value) for name, value in state.items()}
    for name, value in arrays.items():
        if value.dtype == object:
            raise CheckpointError(f"checkpoint entry {name!r} is an object array; only plain "
                                  "NumPy data can be saved")
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]  # NumPy's stubs: **kwds: bool
    save_bytes(path, buffer.getvalue())


def save_bytes(path: str | Path, data: bytes) -> None:
    """Write the checkpoint file ``data`` (its bytes, as stored) to ``path`` atomically."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.stem}-",
                                         suffix=".npz")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
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


# -- the layout of one checkpoint file ----------------------------------------------------------
# One file per agent and phase holds, side by side:
# * the greedy policy in the format of mosaic.agents.policies (``format``, ``version``, ``q`` or
#   ``W0``, ``b0``, ...), so a learner's ``load_checkpoint`` and the RL worker read it as is;
# * ``brain/state/<name>``: what Brain.state() returned, and ``brain/rng``: its generator;
# * ``muscle/<uid>/state/<name>`` and ``muscle/<uid>/rng``: the same for each of its muscles;
# * ``run/digest`` and ``run/<environment>/position``: where the run that saved it stood, and
#   ``run/<environment>/copy_episodes``: each copy's next episode, for an environment with copies;
# * ``run/episodes``: of a checkpoint saved every N episodes, the episodes its muscle had begun.
# ``/`` never occurs in a uid, so the parts cannot be confused.

BRAIN, MUSCLE, RUN = "brain/", "muscle/", "run/"
_STATE, _RNG = "state/", "rng"
_COPY_EPISODES = "copy_episodes"


def rng_state(rng: np.random.Generator) -> np.ndarray:
    """The state of ``rng``'s bit generator as a 0-d string array (JSON keeps its 128-bit
    integers exact)."""
    return np.array(json.dumps(rng.bit_generator.state, default=_plain))


def _plain(value: object) -> object:
    """A bit generator's state array (MT19937's key) as a list, for JSON."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} in a generator's state")


def restore_rng(rng: np.random.Generator, saved: np.ndarray) -> None:
    """Put ``rng`` back into the state :func:`rng_state` saved; CheckpointError if it is not
    one, or of another kind of bit generator."""
    try:
        state = json.loads(str(saved))
        rng.bit_generator.state = state
    except (ValueError, TypeError, KeyError) as error:
        raise CheckpointError(f"cannot restore a random generator from {str(saved)[:80]!r}: "
                              f"{error}") from error


def learner_arrays(state: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A brain's or muscle's ``state`` and generator as one flat mapping (``state/<name>``,
    ``rng``): how a muscle's part travels to its brain and sits in the file."""
    arrays = {f"{_STATE}{name}": np.asarray(value) for name, value in state.items()}
    arrays[_RNG] = rng_state(rng)
    return arrays


def restore_learner(arrays: Mapping[str, np.ndarray], rng: np.random.Generator
                    ) -> dict[str, np.ndarray]:
    """The state in ``arrays`` (from :func:`learner_arrays`); ``rng`` is put back in place."""
    if _RNG in arrays:
        restore_rng(rng, arrays[_RNG])
    return {name[len(_STATE):]: value for name, value in arrays.items()
            if name.startswith(_STATE)}


@dataclass
class Checkpoint:
    """One agent's checkpoint, in parts (see the layout above).

    ``brain`` and each of ``muscles`` (by muscle uid) are :func:`learner_arrays` mappings;
    ``digest`` is the run's digest chain at its last episode end (hex; empty: unknown) and
    ``positions`` where each environment's loop stood then: (the number of its next training
    episode, the evaluation rounds and the evaluation episodes it had run), and
    ``copy_episodes`` each copy's next episode, for an environment with copies (a file written
    before copies kept theirs has none). ``episodes`` is, for a checkpoint saved every N
    episodes (``checkpoint_every``), how many episodes its muscle had begun when it was saved
    (0: saved at the end of a phase, or unknown).
    """

    policy: dict[str, np.ndarray] = field(default_factory=dict)
    brain: dict[str, np.ndarray] = field(default_factory=dict)
    muscles: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    digest: str = ""
    positions: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    episodes: int = 0
    copy_episodes: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def arrays(self) -> dict[str, np.ndarray]:
        """The flat mapping written to the file."""
        arrays = dict(self.policy)
        arrays.update({f"{BRAIN}{name}": value for name, value in self.brain.items()})
        for uid, part in self.muscles.items():
            arrays.update({f"{MUSCLE}{uid}/{name}": value for name, value in part.items()})
        if self.digest:
            arrays[f"{RUN}digest"] = np.array(self.digest)
        for uid, at in self.positions.items():
            arrays[f"{RUN}{uid}/position"] = np.array(at, dtype=np.int64)
        for uid, copies in self.copy_episodes.items():
            arrays[f"{RUN}{uid}/{_COPY_EPISODES}"] = np.array(copies, dtype=np.int64)
        if self.episodes:
            arrays[f"{RUN}episodes"] = np.array(self.episodes, dtype=np.int64)
        return arrays

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> Checkpoint:
        """The parts of a file's mapping. A file of an older layout (the brain's state alone,
        unprefixed) reads as that brain state."""
        if not any(name.startswith(BRAIN) for name in arrays):
            return cls(brain={f"{_STATE}{name}": value for name, value in arrays.items()})
        checkpoint = cls()
        for name, value in arrays.items():
            if name.startswith(BRAIN):
                checkpoint.brain[name[len(BRAIN):]] = value
            elif name.startswith(MUSCLE):
                uid, _, rest = name[len(MUSCLE):].partition("/")
                checkpoint.muscles.setdefault(uid, {})[rest] = value
            elif name == f"{RUN}digest":
                checkpoint.digest = str(value)
            elif name == f"{RUN}episodes":
                checkpoint.episodes = int(value)
            elif name.startswith(RUN) and name.endswith("/position"):
                episode, round_, evaluations = (int(v) for v in np.asarray(value).reshape(3))
                checkpoint.positions[name[len(RUN):-len("/position")]] = (
                    episode, round_, evaluations)
            elif name.startswith(RUN) and name.endswith(f"/{_COPY_EPISODES}"):
                checkpoint.copy_episodes[name[len(RUN):-len(_COPY_EPISODES) - 1]] = tuple(
                    int(v) for v in np.asarray(value).reshape(-1))
            else:
                checkpoint.policy[name] = value
        return checkpoint


def write_checkpoint(path: str | Path, checkpoint: Checkpoint) -> None:
    """Write ``checkpoint`` to ``path`` atomically (:func:`save_state`)."""
    save_state(path, checkpoint.arrays())


def read_checkpoint(path: str | Path) -> Checkpoint:
    """Read a checkpoint written by :func:`write_checkpoint` (CheckpointError if unreadable)."""
    return Checkpoint.from_arrays(load_state(path))
