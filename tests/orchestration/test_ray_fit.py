"""What a run on Ray asks, against what the cluster's nodes have (mosaic.orchestration.ray_fit):
a request no single node meets is refused before anything starts, naming both sides.

The cluster is a stand-in for ``ray`` with ``nodes()`` only; tests/e2e/test_ray.py runs the
check through the command on a real cluster.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mosaic.core.errors import ClusterTooSmall
from mosaic.experiment import load_experiment
from mosaic.orchestration.ray_fit import check_fits, shortfall

EXPERIMENT = """\
uid: fit
environments:
  - uid: cartpole
    env: gymnasium:CartPole-v1
    placement: {placement}
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
executor:
  ray: {ray}
"""


def _experiment(tmp_path: Path, placement: str = "thread", ray: str = "{}") -> Any:
    path = tmp_path / "fit.yml"
    path.write_text(EXPERIMENT.format(placement=placement, ray=ray))
    return load_experiment(path)


def _cluster(*nodes: dict[str, float], dead: dict[str, float] | None = None) -> Any:
    listed = [{"Alive": True, "Resources": node} for node in nodes]
    if dead is not None:
        listed.append({"Alive": False, "Resources": dead})
    return SimpleNamespace(nodes=lambda: listed)


def test_a_request_one_node_meets_fits() -> None:
    assert shortfall({"CPU": 2, "gpu": 0.5}, [{"CPU": 1}, {"CPU": 4, "gpu": 1}]) is None
    assert shortfall({"CPU": 0, "gpu": 0}, [{"CPU": 1}]) is None  # Ray asks nothing for zero


def test_what_the_nodes_lack_is_said() -> None:
    assert shortfall({"CPU": 2}, [{"CPU": 1}, {"CPU": 1}]) == "the largest node has 1 CPU"
    assert shortfall({"CPU": 1, "gpu": 1}, [{"CPU": 1}]) == "no node has 'gpu'"
    assert shortfall({"gpu": 2}, [{"gpu": 1}]) == "the most any node has of 'gpu' is 1"
    # Each is somewhere, but not both on one node.
    assert shortfall({"CPU": 2, "gpu": 1}, [{"CPU": 4}, {"CPU": 1, "gpu": 1}]) == (
        "no node has all of it at once (the nodes have: 4 CPUs; 1 CPU and 1 of 'gpu')")
    assert shortfall({"CPU": 1}, []) == "the cluster has no alive node"


def test_a_run_larger_than_every_node_names_its_cpus_and_the_largest_node(
        tmp_path: Path) -> None:
    experiment = _experiment(tmp_path, placement="process")
    # A dead node of 8 CPUs counts for nothing.
    with pytest.raises(ClusterTooSmall) as raised:
        check_fits(_cluster({"CPU": 1}, {"CPU": 1}, dead={"CPU": 8}), experiment, runs=True)
    message = str(raised.value)
    assert ("a run asks 2 CPUs (1 per process it starts: the run and 1 component process), "
            "but the largest node has 1 CPU") in message
    assert "cpus_per_component" in message  # what to change
    check_fits(_cluster({"CPU": 1}, {"CPU": 2}), experiment, runs=True)
    # Runs that stay with the command ask the cluster nothing.
    check_fits(_cluster({"CPU": 1}), experiment, runs=False)


def test_a_ray_component_asking_what_no_node_has_is_named(tmp_path: Path) -> None:
    experiment = _experiment(tmp_path, placement="ray",
                             ray="{runs: false, component_resources: {gpu_box: 0.01}}")
    with pytest.raises(ClusterTooSmall, match=re.escape(
            "the environment 'cartpole' (placement: ray) asks 1 CPU and 0.01 of 'gpu_box', but "
            "no node has 'gpu_box'")):
        check_fits(_cluster({"CPU": 4}), experiment, runs=False)
    check_fits(_cluster({"CPU": 4}, {"CPU": 1, "gpu_box": 1}), experiment, runs=False)
