"""Kinds of operator that installed packages add through the ``mosaic.operators`` entry points:
listed by ``mosaic operators``, checked in files, and run by ``mosaic evaluate``."""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from mosaic.operators.api.kinds import BUILTIN_KINDS, operator_kinds
from tests.e2e.cli import run_mosaic

pytestmark = pytest.mark.timeout(90)

#: A worker module as a package would ship it: mosaic's worker runtime, a settings model, and
#: a policy that always takes the action its settings name.
CONSTANT_WORKER = '''\
"""Always the action of settings.action."""
import sys
from argparse import ArgumentParser

from pydantic import BaseModel, ConfigDict, Field

from mosaic.operators.worker.runtime import BasePolicy, add_runtime_arguments, run_worker

class ConstantSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: int = Field(ge=0)

SETTINGS_MODEL = ConstantSettings

class Constant(BasePolicy):
    reproducible = True

    def __init__(self, action):
        self.action = action

    def select_action(self, observation, legal_actions=None, action_space=None):
        return self.action

if __name__ == "__main__":
    parser = ArgumentParser()
    add_runtime_arguments(parser)
    args = parser.parse_args()
    settings = ConstantSettings.model_validate(args.settings)
    sys.exit(run_worker("constant_worker", args, lambda: Constant(settings.action)))
'''


def install_plugin(folder: Path, entry_points: str) -> Path:
    """A distribution ``mosaic-constant 1.0`` in ``folder`` (its dist-info and its module), as
    pip installs one; put ``folder`` on the path to see it."""
    info = folder / "mosaic_constant-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mosaic-constant\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    (folder / "constant_worker.py").write_text(CONSTANT_WORKER)
    return folder


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = install_plugin(tmp_path / "site", """\
        [mosaic.operators]
        constant = constant_worker
        random = constant_worker
        broken = constant_worker:Constant
        """)
    monkeypatch.syspath_prepend(str(folder))
    operator_kinds.cache_clear()
    yield folder
    operator_kinds.cache_clear()


def with_plugin(folder: Path) -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])}


def test_an_entry_point_adds_a_kind_and_cannot_replace_or_misname_one(
        plugin: Path, caplog: pytest.LogCaptureFixture) -> None:
    kinds = operator_kinds()
    assert list(kinds)[:len(BUILTIN_KINDS)] == list(BUILTIN_KINDS)
    constant = kinds["constant"]
    assert (constant.worker_module, constant.origin) == ("constant_worker", "mosaic-constant 1.0")
    assert not constant.builtin
    settings_model = constant.settings_model()
    assert settings_model is not None and settings_model.__name__ == "ConstantSettings"
    assert kinds["random"].builtin  # mosaic's own stays
    assert "broken" not in kinds  # an object, not a module
    warned = caplog.text
    assert "'random' of mosaic-constant 1.0: mosaic already has one" in warned
    assert "'broken' of mosaic-constant 1.0: its entry point 'constant_worker:Constant'" in warned


def test_mosaic_operators_lists_mosaics_kinds_and_a_packages(plugin: Path) -> None:
    result = run_mosaic("operators", **with_plugin(plugin))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["TYPE", "WORKER", "FROM", "WHAT"]
    names = [line.split()[0] for line in lines[1:]]
    assert names == [*BUILTIN_KINDS, "constant"]
    assert lines[-1].split()[:4] == ["constant", "constant_worker", "mosaic-constant", "1.0"]


def evaluation(tmp_path: Path, settings: dict[str, object], kind: str = "constant") -> Path:
    path = tmp_path / "evaluation.yml"
    path.write_text(yaml.safe_dump({
        "uid": "plug-in", "seeds": [3], "episodes": 2,
        "operators": [{"id": "always-left", "type": kind, "env": "CartPole-v1",
                       "settings": settings}],
        "telemetry": str(tmp_path / "telemetry.jsonl")}, sort_keys=False))
    return path


@pytest.mark.e2e
def test_mosaic_evaluate_runs_a_packages_kind_with_its_settings(plugin: Path,
                                                                tmp_path: Path) -> None:
    path = evaluation(tmp_path, {"action": 1})
    result = run_mosaic("evaluate", str(path), "--store", str(tmp_path / "results.sqlite"),
                        "--quiet", timeout=80, **with_plugin(plugin))
    assert result.returncode == 0, result.stdout + result.stderr
    records = [json.loads(line) for line in (tmp_path / "telemetry.jsonl").read_text().splitlines()]
    actions = {r["action"] for r in records if r["kind"] == "step"}
    assert actions == {1}  # the settings reached the worker
    assert len([r for r in records if r["kind"] == "episode"]) == 2


@pytest.mark.e2e
@pytest.mark.parametrize(("kind", "settings", "expected"), [
    ("constant", {"action": -1}, "operators[0].settings.action: "),
    ("constant", {"acton": 1}, "operators[0].settings.acton: "),
    ("constnt", {}, "operators[0].type: expected one of random, passive, scripted, rl, llm, "
                    "bdi, human, command, constant, got the text 'constnt' "
                    "(hint: did you mean 'constant'?)"),
])
def test_a_bad_type_or_setting_of_a_packages_kind_is_refused_at_the_key(
        plugin: Path, tmp_path: Path, kind: str, settings: dict[str, object],
        expected: str) -> None:
    path = evaluation(tmp_path, settings, kind)
    result = run_mosaic("evaluate", str(path), "--store", str(tmp_path / "results.sqlite"),
                        **with_plugin(plugin))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert expected in result.stderr, result.stderr
    assert not (tmp_path / "telemetry.jsonl").exists()


def test_a_built_in_type_reads_its_settings_model_s_fields_and_warns_of_the_rest(
        caplog: pytest.LogCaptureFixture) -> None:
    """The launcher knows each type's settings from its model, not from a list of its own."""
    import logging

    from mosaic.operators.api.config import OperatorConfig
    from mosaic.operators.api.llm_routing import LLM_WORKERS
    from mosaic.operators.api.settings import SETTINGS_MODELS
    from mosaic.operators.driver.launcher import OperatorLauncher

    config = OperatorConfig.single_agent(
        "p", "passive", "passive_worker", "Passive", "gymnasium", "CartPole-v1",
        settings={"noop_action": 1, "render_every": 2, "seed": 3, "noop_acton": 1})
    with caplog.at_level(logging.WARNING, logger="mosaic.operators.driver.launcher"):
        argv = OperatorLauncher().build_command(config, "run")
    assert argv[argv.index("--noop-action") + 1] == "1"
    [warning] = [r.getMessage() for r in caplog.records]
    assert "ignores settings ['noop_acton']" in warning
    assert "'noop_action'" in warning and "'render_every'" in warning
    worker = SETTINGS_MODELS["llm"].model_fields["worker"]
    assert set(getattr(worker.annotation, "__args__", ())) == {"auto", *LLM_WORKERS}
