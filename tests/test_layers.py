"""mosaic's layers, as declared in pyproject.toml ([tool.importlinter]), hold in the code.

The check is import-linter's: it reads the imports of every module (type-checking ones
included) and fails when a lower layer imports a higher one or sibling packages import each
other in a circle. The second test proves that the check can fail.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.timeout(60)


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=cwd, capture_output=True,
                          text=True, timeout=50)


def test_no_layer_imports_one_above_it_and_no_package_imports_in_a_circle() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 2 kept, 0 broken." in result.stdout


def test_the_check_fails_when_a_core_helper_imports_the_cli(tmp_path: Path) -> None:
    for name in ("mosaic", "workers"):
        shutil.copytree(ROOT / name, tmp_path / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    with (tmp_path / "mosaic" / "core" / "seeding.py").open("a") as seeding:
        seeding.write("\nimport mosaic.cli.main  # a layer violation\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "mosaic.core.seeding -> mosaic.cli.main" in result.stdout
