"""No pickle anywhere: not in mosaic's code or workers, not when a checkpoint is read.

Unpickling runs code named by the data; a checkpoint or a frame from elsewhere must never be
able to do that.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import numpy as np
import pytest

from mosaic.agents.policies import PolicyFileError, load_policy
from mosaic.core.checkpoints import CheckpointError, load_state, save_state

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted([*ROOT.glob("mosaic/**/*.py"), *ROOT.glob("workers/**/*.py")])
#: Modules that unpickle (or run code from data) by design.
PICKLING_MODULES = {"pickle", "_pickle", "cPickle", "dill", "cloudpickle", "shelve", "marshal",
                    "joblib", "copyreg"}


def _imported_modules(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def _numpy_loads_allowing_pickle(tree: ast.AST) -> list[int]:
    """Lines of ``np.load``/``numpy.load`` calls without a literal ``allow_pickle=False``."""
    lines = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "load" and isinstance(node.func.value, ast.Name)
                and node.func.value.id in ("np", "numpy")):
            safe = any(k.arg == "allow_pickle" and isinstance(k.value, ast.Constant)
                       and k.value.value is False for k in node.keywords)
            if not safe:
                lines.append(node.lineno)
    return lines


def _pickle_names(tree: ast.AST) -> list[int]:
    """Lines naming something pickle-ish (``pickle.loads``, ``read_pickle``...) in code."""
    lines = []
    for node in ast.walk(tree):
        name = node.id if isinstance(node, ast.Name) else (
            node.attr if isinstance(node, ast.Attribute) else None)
        if name is not None and "pickle" in name.lower():
            lines.append(node.lineno)
    return lines


def test_the_scan_covers_mosaic_and_the_workers() -> None:
    assert ROOT / "mosaic" / "core" / "checkpoints.py" in SOURCES
    assert ROOT / "workers" / "rl_worker.py" in SOURCES
    assert ROOT / "mosaic" / "transport" / "security.py" in SOURCES


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_source_file_pickles(path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    assert not _imported_modules(tree) & PICKLING_MODULES
    assert _pickle_names(tree) == []
    assert _numpy_loads_allowing_pickle(tree) == []


def test_the_scan_finds_what_it_looks_for() -> None:
    tree = ast.parse("import pickle as p\nimport numpy as np\nnp.load('x')\n"
                     "np.load('y', allow_pickle=True)\nnp.load('z', allow_pickle=False)\n"
                     "frame.read_pickle('f')\n")
    assert _imported_modules(tree) & PICKLING_MODULES == {"pickle"}
    assert _numpy_loads_allowing_pickle(tree) == [3, 4]
    assert _pickle_names(tree) == [6]


class Payload:
    """Unpickling this creates a folder: proof that code from the file ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.mkdir, (str(self.marker),)


def _booby_trapped(path: Path, marker: Path, **arrays: np.ndarray) -> Path:
    trap = np.empty(1, dtype=object)
    trap[0] = Payload(marker)
    np.savez(path, trap=trap, **arrays)  # numpy pickles object arrays on save
    return path


def test_a_checkpoint_holding_pickled_objects_is_refused_unopened(tmp_path: Path) -> None:
    marker = tmp_path / "code-ran"
    path = _booby_trapped(tmp_path / "brain.npz", marker, count=np.arange(3))
    with pytest.raises(CheckpointError, match="cannot read checkpoint"):
        load_state(path)
    assert not marker.exists()


def test_a_checkpoint_of_objects_is_never_written(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="object array"):
        save_state(tmp_path / "brain.npz", {"weights": np.array([{"a": 1}], dtype=object)})
    assert not (tmp_path / "brain.npz").exists()
    save_state(tmp_path / "brain.npz", {"weights": np.arange(4.0)})
    np.testing.assert_array_equal(load_state(tmp_path / "brain.npz")["weights"], np.arange(4.0))


def test_a_policy_file_holding_pickled_objects_is_refused_unopened(tmp_path: Path) -> None:
    marker = tmp_path / "code-ran"
    path = _booby_trapped(tmp_path / "policy.npz", marker, format=np.array("q_table"),
                          q=np.zeros((2, 2)))
    with pytest.raises(PolicyFileError):
        load_policy(path)
    assert not marker.exists()
