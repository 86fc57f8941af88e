"""What runs on a Ray cluster ask of it, against what its nodes have: a request that no single
node can meet is an input error before anything starts, not a wait without end.

Ray queues a task or actor whose request no node can meet and says so only in ``ray status``
(and in driver output, which :func:`mosaic.runtime.ray_support.connect` turns off): without this
check the command waited in silence (662 s in the issue, a run of 2 CPUs on 1-CPU nodes). A
request that some node could meet but none has free now waits on the cluster's queue, up to
``executor.ray.queue_timeout_s`` (see :mod:`mosaic.orchestration.ray_runs`).

The nodes are those alive when the command joins: an autoscaler that would add a larger node
is not asked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING

from mosaic.conductors.run_context import planned_processes
from mosaic.core.errors import ClusterTooSmall
from mosaic.messages import RayRequest, RunConfig

if TYPE_CHECKING:
    from mosaic.experiment import Experiment

__all__ = ["check_fits", "describe_amounts", "describe_run_request", "nodes_of", "ray_components",
           "run_cpus", "shortfall"]

#: Ray's name of the CPU resource.
CPU = "CPU"

Resources = Mapping[str, float]


def run_cpus(config: RunConfig, cpus_per_component: float) -> float:
    """The CPUs a run of ``config`` asks for as a Ray task: ``cpus_per_component`` for itself
    and for each process it starts."""
    return cpus_per_component * (1 + len(planned_processes(config)))


def describe_run_request(config: RunConfig, cpus_per_component: float) -> str:
    """What a run's task asks, and why: ``2 CPUs (1 per process it starts: the run and 1
    component process)``."""
    processes = len(planned_processes(config))
    started = "the run" + (f" and {processes} component process{'es' if processes != 1 else ''}"
                           if processes else " only")
    return (f"{describe_amounts({CPU: run_cpus(config, cpus_per_component)})} "
            f"({_number(cpus_per_component)} per process it starts: {started})")


def ray_components(config: RunConfig) -> list[tuple[str, str]]:
    """(kind, uid) of every component the run's config places in a Ray actor."""
    found = [("environment", env.uid) for env in config.environments if env.placement == "ray"]
    for agent in config.agents:
        found += [(kind, agent.uid) for kind, placement in
                  (("brain", agent.brain_placement), ("muscle", agent.muscle_placement))
                  if placement == "ray"]
    return found


def describe_amounts(resources: Resources) -> str:
    """``2 CPUs and 0.01 of 'gpu_node'`` (amounts of zero left out: Ray asks nothing for them)."""
    parts = [f"{_number(amount)} CPU{'' if amount == 1 else 's'}" if name == CPU
             else f"{_number(amount)} of {name!r}"
             for name, amount in _asked(resources).items()]
    return " and ".join(parts) or "nothing"


def shortfall(request: Resources, nodes: Iterable[Resources]) -> str | None:
    """``None`` if one of ``nodes`` (each its total resources) has all of ``request``; else
    what the nodes offer instead, in words (``the largest node has 1 CPU``)."""
    asked = _asked(request)
    nodes = list(nodes)
    if not nodes:
        return "the cluster has no alive node"
    if any(all(node.get(name, 0.0) >= amount for name, amount in asked.items())
           for node in nodes):
        return None
    said = []
    for name, amount in asked.items():
        most = max(node.get(name, 0.0) for node in nodes)
        if most >= amount:
            continue
        if name == CPU:
            said.append(f"the largest node has {describe_amounts({CPU: most})}"
                        if most else "no node has a CPU")
        elif most:
            said.append(f"the most any node has of {name!r} is {_number(most)}")
        else:
            said.append(f"no node has {name!r}")
    if said:
        return "; ".join(said)
    offers = "; ".join(describe_amounts({name: node.get(name, 0.0) for name in asked})
                       for node in nodes)
    return f"no node has all of it at once (the nodes have: {offers})"


def nodes_of(ray: ModuleType) -> list[dict[str, float]]:
    """The total resources of each alive node of the cluster ``ray`` joined."""
    return [{name: float(amount) for name, amount in node.get("Resources", {}).items()}
            for node in ray.nodes() if node.get("Alive")]


def check_fits(ray: ModuleType, experiment: Experiment, *, runs: bool) -> None:
    """Raise :class:`ClusterTooSmall` if some run of ``experiment`` (with ``runs``: as a Ray
    task, see :class:`~mosaic.orchestration.ray_runs.RayRuns`), or one of its ``placement:
    ray`` components, asks more than any single alive node of the joined cluster has.

    The message names each such request, why it is that large, and what the nodes have. Every
    sweep point and phase is checked (the seeds of a point ask the same). Asks the cluster once
    (``ray.nodes()``); call it after joining, before any run starts.
    """
    settings = experiment.executor.ray
    per_component = settings.cpus_per_component if settings is not None else 1.0
    requests: dict[str, Resources] = {}
    for index in range(0, experiment.run_count, experiment.runs):
        phases = experiment.phase_names(index)
        for phase_index, phase in enumerate(phases):
            config = experiment.run_config(index, phase_index)
            where = f" in phase {phase!r}" if len(phases) > 1 else ""
            if runs:
                requests.setdefault(
                    f"a run{where} asks {describe_run_request(config, per_component)}",
                    {CPU: run_cpus(config, per_component)})
            component = config.ray or RayRequest()
            for kind, uid in ray_components(config):
                request = {CPU: component.cpus, **component.resources}
                requests.setdefault(f"the {kind} {uid!r}{where} (placement: ray) asks "
                                    f"{describe_amounts(request)}", request)
    if not requests:
        return
    nodes = nodes_of(ray)
    problems = [f"{what}, but {short}" for what, request in requests.items()
                if (short := shortfall(request, nodes)) is not None]
    if problems:
        raise ClusterTooSmall(
            f"the Ray cluster cannot run this experiment: {'; '.join(problems)} (it would "
            "wait on the cluster's queue for ever: lower executor.ray.cpus_per_component, "
            "component_cpus or component_resources, or add a node that has it)")


def _asked(resources: Resources) -> dict[str, float]:
    return {name: float(amount) for name, amount in resources.items() if amount > 0}


def _number(amount: float) -> str:
    return f"{amount:g}"
