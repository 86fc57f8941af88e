"""The soak benchmark's short variant: a multi-agent run in processes neither grows nor loses steps.

``benchmarks/soak.py`` runs 1,000,000 steps; here the same experiment and criteria run for
20,000 steps (about 15 s), and a muscle that leaks on purpose shows that the soak can fail.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.e2e.cli import REPO

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

CI_STEPS = 20_000
# A short run settles in less time than the full one is given; 10% of 20,000 steps is ~1.5 s.
MIN_WARMUP_S = 3.0
EXPECTED_ROLES = {"mosaic experiment-start", "zygote", "environment rps", "muscle alice@rps",
                  "muscle bob@rps"}


def load_soak() -> ModuleType:
    """benchmarks/ is not a package: load soak.py from its file."""
    name = "mosaic_benchmarks_soak"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / "soak.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while it loads
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_a_short_soak_keeps_memory_descriptors_and_steps(tmp_path: Path,
                                                         process_tag: str) -> None:
    soak = load_soak()
    # Samples every 0.25 s: a quick machine steps the soak in about 8 s, which at 0.5 s left
    # fewer than 10 samples after warm-up.
    result = soak.soak(CI_STEPS, min_warmup_s=MIN_WARMUP_S, interval=0.25, timeout=45,
                       folder=tmp_path)
    table = soak.format_result(result)
    assert result.ok, f"{table}\n{result.stderr_tail}"
    # Every process was watched: the mosaic process, its zygote, the environment and both
    # muscles.
    assert {p.role for p in result.processes} == EXPECTED_ROLES, table
    assert result.samples_after_warmup >= 10, table
    assert result.run_steps == CI_STEPS
    assert result.rows_by_player == {"player_0": CI_STEPS, "player_1": CI_STEPS}


def test_the_soak_names_a_process_that_leaks(tmp_path: Path, process_tag: str) -> None:
    soak = load_soak()
    leaky = ("{class: tests.fixtures.leaky:LeakyMuscle, "
             "params: {bytes_per_act: 4096, acts_per_fd: 500}}")
    # A short warm-up leaves most of the leak after it, however fast this machine steps.
    result = soak.soak(10_000, min_warmup_s=1.0, timeout=40, alice_muscle=leaky,
                       folder=tmp_path)
    table = soak.format_result(result)
    assert not result.ok
    memory = [f for f in result.failures if f.startswith("memory:")]
    descriptors = [f for f in result.failures if f.startswith("file descriptors:")]
    # Only the leaking muscle is blamed, for both of its leaks; no step was lost.
    assert len(memory) == 1 and "muscle alice@rps" in memory[0], table
    assert len(descriptors) == 1 and "muscle alice@rps" in descriptors[0], table
    assert not [f for f in result.failures
                if f.startswith(("steps", "processes", "too short"))], table
    assert result.run_steps == 10_000, table
