"""The package's façade: what a user writes against resolves, and costs nothing until used."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys

import pytest

import mosaic

pytestmark = pytest.mark.timeout(60)


def test_every_public_name_resolves_to_the_object_of_its_home() -> None:
    for name in mosaic.__all__:
        value = getattr(mosaic, name)
        if name != "__version__":
            assert value is getattr(importlib.import_module(mosaic._HOMES[name]), name)
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        mosaic.Nope  # noqa: B018


def test_the_facade_names_what_a_user_writes_against() -> None:
    assert issubclass(mosaic.RandomMuscle, mosaic.Muscle)
    assert issubclass(mosaic.NoOpBrain, mosaic.Brain)
    assert issubclass(mosaic.ConfigError, mosaic.MosaicError)
    assert callable(mosaic.load_experiment) and callable(mosaic.open_store)


def heavy_modules_after(imports: str, heavy: tuple[str, ...]) -> list[str]:
    """The packages of ``heavy`` that a fresh interpreter has loaded after ``imports``."""
    code = (f"import sys\n{imports}\n"
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({heavy!r})))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=50, check=True).stdout
    return list(ast.literal_eval(out.strip()))


def test_importing_mosaic_loads_no_heavy_dependency() -> None:
    assert heavy_modules_after("import mosaic",
                               ("pydantic", "sqlalchemy", "zmq", "gymnasium", "yaml")) == []


def test_the_step_loops_do_without_the_stores_database_library() -> None:
    """A run's episode loops count each agent's return with the store's definition, and the
    controller names each run's video folder: both once loaded SQLAlchemy (about 0.2 s) into
    every process that runs a controller."""
    imports = ("import mosaic.stepping.player_episodes, mosaic.stepping.copy_episodes, "
               "mosaic.orchestration.simulation_controller")
    assert heavy_modules_after(imports, ("sqlalchemy",)) == []
