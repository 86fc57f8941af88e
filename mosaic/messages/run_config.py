"""A run's configuration as typed records: what orchestration, conductors and actors are given.

:meth:`mosaic.experiment.Experiment.run_config` builds a :class:`RunConfig` from a validated
experiment file; the components of the run read its fields, never keys of a dict. The records
are :class:`~mosaic.messages.Record` types, so they travel inside messages (the codec encodes
them like any other record) and are validated when built and when decoded.
:meth:`RunConfig.to_dict` gives the same configuration as plain data, for the store.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from mosaic.messages._base import Record
from mosaic.messages.names import rollout_uid

__all__ = [
    "AgentPlan",
    "CheckpointPaths",
    "ComponentSpec",
    "EnvironmentPlan",
    "LoadSpec",
    "PlacementName",
    "RayRequest",
    "RecordSteps",
    "RunConfig",
    "RunTimeouts",
    "SearchPlan",
    "SearchTrial",
    "Seeding",
    "SelfPlayPlan",
    "TerminationSpec",
    "TransportName",
    "VideoPlan",
    "WrapperPlan",
]

#: Where a component runs: a thread of the mosaic process, a process of its own, or a Ray actor
#: on a node of a Ray cluster (see mosaic.runtime.ray_placement).
PlacementName = Literal["thread", "process", "ray"]
#: How process-placed components are reached; thread-placed ones always use inproc.
TransportName = Literal["ipc", "tcp"]
#: What the store keeps of an environment's episodes: every step and every episode (``all``),
#: the episode summaries only (``episodes``), or neither (``none``: the run's totals only).
RecordSteps = Literal["all", "episodes", "none"]
#: How the copies of an environment with ``copies:`` are held.
VectorMode = Literal["sync", "async", "native"]
#: When the copies of ``copies:`` are seeded: every episode with a seed of its own
#: (``episode``), or once, at their first reset, each copy then drawing its next episodes from
#: its own generator (``once``, as Gymnasium's vector environments do).
Seeding = Literal["episode", "once"]


@dataclass(frozen=True, slots=True)
class ComponentSpec(Record):
    """A brain or a muscle to build: its class path and its parameters.

    ``params`` are the agent's ``params`` overridden key by key (shallowly) by the brain's or
    muscle's own.
    """

    class_path: str
    params: dict[str, Any]


@dataclass(frozen=True, slots=True)
class LoadSpec(Record):
    """Where an agent continues from: a checkpoint of ``phase`` (see the file's ``load:``).

    ``agent``, ``run`` and ``experiment`` default to the agent itself, the latest run and this
    experiment.
    """

    phase: str
    agent: str | None = None
    run: str | None = None
    experiment: str | None = None


@dataclass(frozen=True, slots=True)
class CheckpointPaths(Record):
    """Where a brain saves its state at the end of the phase (``None``: nowhere, as in a test
    phase), and what it loads first (if any)."""

    save: str | None
    load: str | None = None


@dataclass(frozen=True, slots=True)
class EnvironmentPosition(Record):
    """Where an environment's episode loop stands: the number of its next training episode,
    and the evaluation rounds and evaluation episodes it has run; and, for a run that continues
    its own phase (``--resume`` from a periodic checkpoint), the first episode of that phase
    (None: the phase starts at ``episode``, as a phase that continues an earlier one does).

    An environment with ``copies:`` (or ``rollouts:``) numbers each copy's episodes apart:
    ``copy_episodes`` holds each copy's next episode, in the order of the copies (empty: a
    per-player loop, or a position saved before copies kept theirs), and ``episode`` is then
    the first number none of them has taken. A copy it does not name starts at ``episode``."""

    episode: int = 0
    evaluation_round: int = 0
    evaluations: int = 0
    first_episode: int | None = None
    copy_episodes: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ResumePoint(Record):
    """Where a continued run picks up: the saved run's digest chain at its last episode end
    (hex; empty: start a new chain) and each environment's position then (by uid; one not
    named starts at episode 0)."""

    digest: str = ""
    positions: dict[str, EnvironmentPosition] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WrapperPlan(Record):
    """A Gymnasium wrapper to apply: its class's import path and its keyword arguments."""

    class_path: str
    params: dict[str, Any]


@dataclass(frozen=True, slots=True)
class VideoPlan(Record):
    """Episodes of an environment to record as MP4 videos (Gymnasium's ``RecordVideo``).

    ``folder`` is where the videos go: the root of every run's folder in a run's config, the
    run's own folder (``<root>/<run uid>``) in an environment's start request. An episode is
    recorded when its number (the run's training episodes of the environment, from 0) is a
    multiple of ``every`` or is in ``episodes``; evaluation episodes are not recorded.
    """

    folder: str
    every: int | None = None
    episodes: tuple[int, ...] = ()

    def wants(self, episode: int) -> bool:
        """Whether training episode ``episode`` is recorded."""
        return (self.every is not None and episode % self.every == 0) or episode in self.episodes


@dataclass(frozen=True, slots=True)
class EnvironmentPlan(Record):
    """One environment of a run.

    ``kind`` is ``"gymnasium"``, ``"pettingzoo"`` or ``"import"`` (see
    :func:`~mosaic.core.imports.parse_env_reference`); ``placement`` is resolved (``"thread"``
    or ``"process"``); ``policy_mapping`` is the file's mapping, or ``None`` when the file has
    none, which happens only with exactly one agent and means "every env agent id maps to it";
    ``record_steps`` is the environment's own setting, ``None`` for the run's (see
    :meth:`RunConfig.records`); ``copies`` (``None``: one environment) and ``vector_mode``
    say how many copies step together in one vector environment, and how it holds them;
    ``seeding`` when the copies are seeded (see :data:`Seeding`);
    ``rollouts`` (``None``: the per-step loop) how many rollout workers step ``copies`` copies
    each where they are placed; ``wrappers`` wrap the environment (each copy), innermost
    first; ``store_info`` names the info keys stored with each step; ``record_video`` which
    episodes are recorded as videos, and where (``None``: none).
    """

    uid: str
    env: str
    kind: str
    params: dict[str, Any]
    placement: PlacementName
    policy_mapping: dict[str, str] | None
    record_steps: RecordSteps | None = None
    copies: int | None = None
    vector_mode: VectorMode = "sync"
    wrappers: tuple[WrapperPlan, ...] = ()
    store_info: tuple[str, ...] = ()
    rollouts: int | None = None
    record_video: VideoPlan | None = None
    seeding: Seeding = "episode"

    def rollout_workers(self) -> list[str]:
        """The uids of the environment's rollout workers (none without ``rollouts``)."""
        return [rollout_uid(self.uid, worker) for worker in range(self.rollouts or 0)]


@dataclass(frozen=True, slots=True)
class SelfPlayPlan(Record):
    """An agent that plays frozen snapshots of agent ``of``: every ``snapshot_every`` of its
    episodes (the first included) it takes ``of``'s brain's current weights (``Brain.sync``)
    into a pool of the last ``pool_size``, and each episode it plays one drawn by ``sample``:
    ``latest``, ``uniform`` over the pool, or ``mix`` (the latest with probability
    ``latest_share``, else uniform over the pool)."""

    of: str
    snapshot_every: int
    pool_size: int
    sample: str = "uniform"
    latest_share: float = 0.5


@dataclass(frozen=True, slots=True)
class AgentPlan(Record):
    """One agent of a run: its brain and muscle, where each runs, and its checkpoints.

    ``checkpoints`` is set by the executor before the run starts (``None`` until then).
    A self-play agent (``self_play``) has ``of``'s muscle, placed as ``of``'s, acting in
    ``mode: test``, and a NoOpBrain.
    """

    uid: str
    brain: ComponentSpec
    muscle: ComponentSpec
    brain_placement: PlacementName
    muscle_placement: PlacementName
    load: LoadSpec | None = None
    checkpoint_every: int = 0
    checkpoints: CheckpointPaths | None = None
    self_play: SelfPlayPlan | None = None

    def acts_in(self, environment: EnvironmentPlan, agent_count: int) -> bool:
        """True if this agent acts in ``environment`` (of a run with ``agent_count`` agents)."""
        mapping = environment.policy_mapping
        return agent_count == 1 if mapping is None else self.uid in mapping.values()


@dataclass(frozen=True, slots=True)
class RunTimeouts(Record):
    """Seconds allowed for: starting and setting up one component; one update; one shutdown;
    the silence of a component process before it counts as hung (see mosaic.runtime.heartbeat).
    """

    setup: float = 30.0
    step: float = 60.0
    shutdown: float = 5.0
    heartbeat: float = 2.5


@dataclass(frozen=True, slots=True)
class TerminationSpec(Record):
    """When a phase ends early: the mean return of the last ``window`` episodes reaches
    ``reward_threshold``, or ``condition`` (an import path of ``fn(stats) -> bool``) says so."""

    reward_threshold: float | None = None
    window: int = 100
    condition: str | None = None


@dataclass(frozen=True, slots=True)
class SearchTrial(Record):
    """A point of a search that ended before the run's wave began (see :class:`SearchPlan`):
    its trial ``number``, how it ended (``complete``, ``pruned`` or ``fail``), its ``value``
    (complete ones), what its runs reported at each episode end (``steps`` and ``values``,
    the mean over its runs), and what the pruner noted of it (``notes``: Hyperband's rungs)."""

    number: int
    state: Literal["complete", "pruned", "fail"]
    value: float | None = None
    steps: tuple[int, ...] = ()
    values: tuple[float, ...] = ()
    notes: dict[str, float] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SearchPlan(Record):
    """A run of a point of a search (``sweep: {search: ...}``): what it reports at each episode
    end (``metric``: ``return``, the mean return of its recent episodes, or a metric its
    learners log), and the pruner (``pruner``, ``options``) that decides from that, and the
    ``trials`` that ended before the run's wave, whether the run (trial ``trial`` of study
    ``study``, ``direction``) ends there. The decision depends on these only, never on timing.
    """

    metric: str
    direction: Literal["maximize", "minimize"]
    pruner: str
    options: dict[str, Any]
    study: str
    trial: int
    trials: tuple[SearchTrial, ...] = ()


@dataclass(frozen=True, slots=True)
class RayRequest(Record):
    """What each ``placement: ray`` component of a run asks of the Ray cluster: ``cpus`` and
    custom ``resources`` (a node's label, e.g. ``{"gpu_node": 0.01}``, to land on that node)."""

    cpus: float = 1.0
    resources: dict[str, float] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RunConfig(Record):
    """Everything one run needs in one phase.

    ``seed`` is this run's seed (derived from ``experiment_seed`` and ``run_index``);
    ``max_steps`` ``None`` means the environment's own limit; ``default_agent`` is the one
    agent's uid when the run has exactly one agent; ``mode``, ``episodes``, ``max_steps``,
    ``termination``, ``environments`` and ``agents`` are the phase's. With ``evaluate_every``
    N, every N training episodes of each environment are followed by ``evaluate_episodes``
    greedy evaluation episodes (``None``: none). ``resume`` is set by the executor for a
    training phase that loads a checkpoint saved with a position: its episodes continue the
    saved run's numbering and digest chain.
    """

    experiment: str
    run_index: int
    phase: str
    phase_index: int
    phases: int
    seed: int
    experiment_seed: int
    episodes: int
    max_steps: int | None
    termination: TerminationSpec | None
    mode: Literal["train", "test"]
    transport: TransportName
    host: str
    cpu_affinity: str | int
    record_steps: RecordSteps
    store_path: str
    timeouts: RunTimeouts
    default_agent: str | None
    environments: tuple[EnvironmentPlan, ...]
    agents: tuple[AgentPlan, ...]
    evaluate_every: int | None = None
    evaluate_episodes: int = 5
    resume: ResumePoint | None = None
    #: What ``placement: ray`` components ask of the cluster (``None``: the defaults).
    ray: RayRequest | None = None
    #: The run is a point of a search: what it reports and what prunes it (``None``: not one).
    search: SearchPlan | None = None

    def records(self, environment: EnvironmentPlan) -> RecordSteps:
        """What the store keeps of ``environment``: its own ``record_steps``, else the run's."""
        return environment.record_steps or self.record_steps

    def placements(self) -> set[str]:
        """Every placement a component of the run has."""
        found: set[str] = {env.placement for env in self.environments}
        for agent in self.agents:
            found |= {agent.brain_placement, agent.muscle_placement}
        return found

    def component_count(self) -> int:
        """How many components the run sets up: each environment (or rollout worker), and
        each brain and muscle."""
        return (sum(env.rollouts or 1 for env in self.environments) + 2 * len(self.agents))

    def to_dict(self) -> dict[str, Any]:
        """The configuration as plain data (str, int, float, bool, None, lists and dicts).

        This is the layout the store keeps in ``experiments.config``: an agent's brain and
        muscle are ``{"class", "params"}`` and its placement ``{"brain", "muscle"}``.
        """
        plain: dict[str, Any] = {field.name: _plain(getattr(self, field.name))
                                 for field in dataclasses.fields(self)}
        plain["agents"] = [_agent_dict(agent) for agent in self.agents]
        if self.ray is None:
            del plain["ray"]
        if self.search is None:
            del plain["search"]
        return plain


def _agent_dict(agent: AgentPlan) -> dict[str, Any]:
    plain: dict[str, Any] = {
        "uid": agent.uid,
        "brain": {"class": agent.brain.class_path, "params": _plain(agent.brain.params)},
        "muscle": {"class": agent.muscle.class_path, "params": _plain(agent.muscle.params)},
        "placement": {"brain": agent.brain_placement, "muscle": agent.muscle_placement},
        "load": _plain(agent.load),
        "checkpoint_every": agent.checkpoint_every,
    }
    if agent.self_play is not None:
        plain["self_play"] = _plain(agent.self_play)
    if agent.checkpoints is not None:
        plain["checkpoint"] = _plain(agent.checkpoints)
    return plain


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: _plain(getattr(value, field.name))
                for field in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value
