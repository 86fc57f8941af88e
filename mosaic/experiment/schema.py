"""The experiment file's schema, as frozen pydantic models.

The models validate strictly: a value of the wrong type is an error, never coerced (``"10"`` is
not an integer, ``1.5`` is not an integer, ``yes`` is not a string), except that an integer is
accepted where a number of seconds is expected. Unknown keys are errors everywhere.

Beyond types, validation imports what the file names (environments, brain and muscle classes,
see :mod:`mosaic.core.imports`) and checks the references between sections (unique uids,
policy mappings, the tcp host). Problems found by these checks are raised with
:func:`~mosaic.core.config_problems.raise_problems`, each with its key path relative to where the
error is reported; the one config pipeline (:mod:`mosaic.core.config_problems`) turns them into
:class:`~mosaic.core.errors.ConfigError` lines.

Why one file of this length: it is the experiment file's contract, one model per section in the
order a file is written, with the checks that span sections (uids, mappings, seeds) beside the
models they read; a reader looking up a key finds it here and nowhere else.
"""

from __future__ import annotations

import copy
import dataclasses
import ipaddress
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, cast

import numpy as np
import yaml
from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    field_validator,
    model_validator,
)

from mosaic.agents import Brain, Mode, Muscle, NoOpBrain
from mosaic.core.checkpoints import checkpoint_root
from mosaic.core.config_problems import (
    Loc,
    Problem,
    StrictModel,
    describe_value,
    did_you_mean,
    raise_if_any,
    raise_problems,
    text_key_problem,
    validate,
)
from mosaic.core.errors import ConfigError, MissingExtra
from mosaic.core.extras import VIDEO, require
from mosaic.core.imports import (
    EnvKind,
    ImportPathError,
    import_object,
    parse_env_reference,
    resolve_class,
    resolve_env,
)
from mosaic.core.store_url import is_database_url, mask
from mosaic.experiment.sweep import SEARCH_STUDY, SearchSweep, SweepConfig
from mosaic.experiment.wrappers import WrapperSpec, parse_wrappers
from mosaic.messages.run_config import (
    AgentPlan,
    ComponentSpec,
    EnvironmentPlan,
    PlacementName,
    RayRequest,
    RecordSteps,
    RunConfig,
    RunTimeouts,
    SearchPlan,
    Seeding,
    SelfPlayPlan,
    TerminationSpec,
    TransportName,
    VectorMode,
    VideoPlan,
    WrapperPlan,
)
from mosaic.messages.run_config import LoadSpec as LoadRecord
from mosaic.tracking.targets import mlflow_uri, require_sink, tensorboard_folder

__all__ = [
    "AgentConfig",
    "AgentPlacement",
    "BrainSpec",
    "EnvironmentConfig",
    "Experiment",
    "ExperimentFile",
    "MuscleSpec",
    "Placement",
    "RecordVideoConfig",
    "SelfPlayConfig",
    "StoreConfig",
    "SweepPoint",
    "Timeouts",
    "TrackingConfig",
    "Transport",
]

#: Where a component runs: a thread of the mosaic process, or a process of its own.
Placement = PlacementName
#: How process-placed components are reached; thread-placed ones always use inproc.
Transport = TransportName

UID_PATTERN = r"^[A-Za-z0-9_.-]+$"
MAX_SEED = 2**63 - 1
"""The largest experiment seed: stores keep it as a signed 64-bit integer."""
MAX_RUNS = 100_000
"""The most runs one experiment may have; validation derives and compares every run seed."""
GYMNASIUM_AGENT = "agent_0"
"""The one env agent id of a Gymnasium environment."""
DEFAULT_PHASE = "main"
"""The name of the only phase of an experiment without ``phases``."""
DEFAULT_EVALUATE_EPISODES = 5
"""How many evaluation episodes follow every ``evaluate_every`` training episodes by default."""


def _plain_problems(value: Any, loc: Loc) -> list[Problem]:
    if value is None or isinstance(value, str | bool | int | float):
        return []
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _plain_problems(item, (*loc, i))]
    if isinstance(value, dict):
        problems = []
        for key, item in value.items():
            if not isinstance(key, str):
                problems.append(text_key_problem(loc, key))
            else:
                problems.extend(_plain_problems(item, (*loc, key)))
        return problems
    return [
        Problem(
            loc,
            "expected plain data (text, number, boolean, empty, list or mapping), "
            f"got {describe_value(value)}",
            "quote the value to keep it as text",
        )
    ]


def _check_plain(value: dict[str, Any]) -> dict[str, Any]:
    raise_if_any(_plain_problems(value, ()))
    return value


Params = Annotated[dict[str, Any], AfterValidator(_check_plain)]
Uid = Annotated[str, Field(pattern=UID_PATTERN)]
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]

RECORD_STEPS_CHOICES = ("all", "episodes", "none")
# Before the three settings existed the key was a boolean: true kept every step, false only the
# episode summaries. Files written then keep their meaning.
_RECORD_STEPS_BOOLEANS: dict[bool, RecordSteps] = {True: "all", False: "episodes"}


def _record_steps(value: Any) -> RecordSteps:
    if isinstance(value, bool):
        return _RECORD_STEPS_BOOLEANS[value]
    if isinstance(value, str) and value in RECORD_STEPS_CHOICES:
        return cast(RecordSteps, value)
    hint = ""
    if isinstance(value, str):
        hint = did_you_mean(value.lower(), RECORD_STEPS_CHOICES, cutoff=0.5)
        if value.lower() in ("true", "false"):
            hint = "write true or false without quotes, or all, episodes or none"
    raise_problems(
        Problem(
            (),
            f"expected all, episodes or none, got {describe_value(value)}",
            hint or "write all (every step and episode), episodes (episode summaries only) or "
            "none (only the run's totals)",
        )
    )


RecordStepsSetting = Annotated[RecordSteps, BeforeValidator(_record_steps)]
#: The most copies one environment entry may step together.
MAX_COPIES = 4096
#: The most rollout workers one environment entry may have.
MAX_ROLLOUTS = 256
#: Where the operators' muscles live: they keep the per-step loop (a rollout worker steps no
#: operator or human).
OPERATOR_MUSCLES = "mosaic.operators"


class _ComponentSpec(StrictModel):
    class_: str = Field(alias="class", description="a class path such as 'package.module:Class'")
    params: Params = Field(default_factory=dict, description="a mapping of parameters")

    base: ClassVar[type]

    @model_validator(mode="before")
    @classmethod
    def _from_path(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"class": data}
        if not isinstance(data, dict):
            raise_problems(Problem((), f"expected {cls.expected}, got {describe_value(data)}"))
        return data

    @field_validator("class_")
    @classmethod
    def _importable(cls, path: str) -> str:
        try:
            resolve_class(path, cls.base)
        except ImportPathError as error:
            hint = error.hint
            other = Muscle if cls.base is Brain else Brain
            if error.reason == "type" and _subclasses(path, other):
                where = "muscle" if other is Muscle else "brain"
                hint = f"this is a {other.__name__}; it belongs under '{where}:'"
            raise_problems(Problem((), error.message, hint))
        return path

    @property
    def class_path(self) -> str:
        """The class path, as written."""
        return self.class_


def _subclasses(path: str, base: type) -> bool:
    try:
        resolve_class(path, base)
    except ImportPathError:
        return False
    return True


class BrainSpec(_ComponentSpec):
    """A brain: a :class:`~mosaic.agents.Brain` subclass and its own parameters."""

    base: ClassVar[type] = Brain
    expected: ClassVar[str] = (
        "a brain class path such as 'mosaic.agents:NoOpBrain', or a mapping with 'class' and "
        "'params'"
    )


class MuscleSpec(_ComponentSpec):
    """A muscle: a :class:`~mosaic.agents.Muscle` subclass and its own parameters."""

    base: ClassVar[type] = Muscle
    expected: ClassVar[str] = (
        "a muscle class path such as 'mosaic.agents:RandomMuscle', or a mapping with 'class' and "
        "'params'"
    )


class AgentPlacement(StrictModel):
    """Where an agent's brain and muscle run; ``None`` means the experiment's ``placement``."""

    expected: ClassVar[str] = (
        "'thread', 'process' or 'ray', or a mapping such as {brain: thread, muscle: process}"
    )

    brain: Placement | None = Field(default=None, description="'thread', 'process' or 'ray'")
    muscle: Placement | None = Field(default=None, description="'thread', 'process' or 'ray'")

    @model_validator(mode="before")
    @classmethod
    def _from_one(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"brain": data, "muscle": data}
        if not isinstance(data, dict):
            raise_problems(Problem((), f"expected {cls.expected}, got {describe_value(data)}"))
        return data


class RecordVideoConfig(StrictModel):
    """``record_video:`` of an environment: which training episodes are recorded as MP4
    videos, and where (see :class:`~mosaic.messages.VideoPlan`)."""

    expected: ClassVar[str] = ("a mapping such as {every: 10}, {episodes: [0, 5]} or both, "
                               "optionally with folder")

    every: Annotated[int, Field(ge=1)] | None = Field(
        default=None, description="a whole number from 1: N records episodes 0, N, 2N, ... "
        "(1: every episode)")
    episodes: Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1)] | None = Field(
        default=None, description="a list of episode numbers from 0, e.g. [0, 5]")
    folder: str | None = Field(
        default=None, description="a folder for the videos, relative to this file, one "
        "subfolder per run (default: beside the store)")

    @model_validator(mode="before")
    @classmethod
    def _a_mapping(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise_problems(Problem((), f"expected {cls.expected}, got {describe_value(data)}"))
        return data

    @model_validator(mode="after")
    def _says_which(self) -> RecordVideoConfig:
        if self.every is None and self.episodes is None:
            raise_problems(Problem((), "record_video needs every or episodes",
                                   "write {every: 10} (episodes 0, 10, 20, ...) or "
                                   "{episodes: [0, 5]}"))
        if self.folder is not None and not self.folder.strip():
            raise_problems(Problem(("folder",), "expected a folder, got an empty text",
                                   "leave the key out to keep the videos beside the store"))
        return self


class EnvironmentConfig(StrictModel):
    """One environment of the experiment."""

    expected: ClassVar[str] = "a mapping with at least 'uid' and 'env'"

    uid: Uid = Field(
        description="an environment uid made of letters, digits, '_', '.' and '-', unique among "
        "environments and agents"
    )
    env: str = Field(
        description="'gymnasium:<registered id>', 'pettingzoo:<family>.<module>' or "
        "'package.module:Attr'"
    )
    params: Params = Field(default_factory=dict, description="a mapping of keyword arguments")
    placement: Placement | None = Field(default=None, description="'thread', 'process' or 'ray'")
    policy_mapping: Annotated[dict[str, str], Field(min_length=1)] | None = Field(
        default=None,
        description="a mapping from env agent ids to agent uids, e.g. {agent_0: random}",
    )
    record_steps: RecordStepsSetting | None = Field(
        default=None,
        description="all, episodes or none (default: the store's record_steps)",
    )
    copies: Annotated[int, Field(ge=1, le=MAX_COPIES)] | None = Field(
        default=None,
        description=f"a number of copies from 1 to {MAX_COPIES}, stepped together in one "
        "vector environment",
    )
    rollouts: Annotated[int, Field(ge=1, le=MAX_ROLLOUTS)] | None = Field(
        default=None,
        description=f"a number of rollout workers from 1 to {MAX_ROLLOUTS}, each stepping the "
        "copies: copies of the environment where it is placed, with no message per step",
    )
    vector_mode: VectorMode = Field(
        default="sync",
        description="how the copies are held: sync (one thread), async (a process each) or "
        "native (the environment's own vector implementation)",
    )
    seeding: Seeding = Field(
        default="episode",
        description="when the copies are seeded: episode (every episode with a seed of its own, "
        "so that any episode can be replayed alone) or once (at their first reset; faster)",
    )
    wrappers: list[WrapperSpec] = Field(
        default_factory=list,
        description="a list of Gymnasium wrappers, each a name or {name: {parameters}}",
    )
    store_info: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)] | None = (
        Field(default=None, description="a list of info keys to store with each step, e.g. "
              "[is_success]")
    )
    record_video: RecordVideoConfig | None = Field(
        default=None, description=RecordVideoConfig.expected + " (needs mosaic[video])")

    @field_validator("wrappers", mode="before")
    @classmethod
    def _wrappers(cls, value: Any) -> Any:
        if isinstance(value, list) and all(isinstance(item, WrapperSpec) for item in value):
            return value
        specs, problems = parse_wrappers(value)
        raise_if_any(problems)
        return specs

    @model_validator(mode="after")
    def _copies_fit(self) -> EnvironmentConfig:
        if self.copies is not None and self.kind == "pettingzoo":
            raise_problems(Problem(("copies",), "copies: takes Gymnasium environments; a "
                                   "PettingZoo environment's agents already act side by side",
                                   "remove copies, or list the environment several times"))
        if self.rollouts is not None and self.kind == "pettingzoo":
            raise_problems(Problem(("rollouts",), "rollouts: takes Gymnasium environments; a "
                                   "PettingZoo environment keeps the per-step loop",
                                   "remove rollouts"))
        if self.vector_mode != "sync" and not self.vectorised:
            raise_problems(Problem(("vector_mode",), "vector_mode applies to copies",
                                   "add copies: N, or remove vector_mode"))
        if self.vector_mode == "native" and self.kind != "gymnasium":
            raise_problems(Problem(("vector_mode",), "vector_mode: native needs a registered "
                                   "Gymnasium id ('gymnasium:<id>')",
                                   "use sync or async"))
        if self.wrappers and self.kind == "pettingzoo":
            raise_problems(Problem(("wrappers",), "wrappers: takes Gymnasium wrappers, which "
                                   "wrap Gymnasium environments, not PettingZoo ones",
                                   "wrap the environment in a factory of your own "
                                   "(env: package.module:make), or remove wrappers"))
        if self.seeding != "episode" and not self.vectorised:
            raise_problems(Problem(("seeding",), "seeding applies to copies: an environment "
                                   "without copies or rollouts seeds every episode",
                                   "add copies: N, or remove seeding"))
        if self.seeding != "episode" and self.vector_mode == "native":
            raise_problems(Problem(("seeding",), "vector_mode: native seeds its copies itself, "
                                   "once", "remove seeding"))
        if self.wrappers and self.vector_mode == "native":
            raise_problems(Problem(("wrappers",), "wrappers: wrap each copy, and vector_mode: "
                                   "native makes the copies without them",
                                   "use vector_mode sync or async"))
        if self.record_video is not None:
            self._video_fits()
        return self

    def _video_fits(self) -> None:
        if self.kind == "pettingzoo":
            raise_problems(Problem(("record_video",), "record_video records Gymnasium "
                                   "environments (Gymnasium's RecordVideo), not PettingZoo ones",
                                   "remove record_video"))
        if self.vectorised:
            raise_problems(Problem(("record_video",), "record_video records one environment "
                                   "instance; copies: and rollouts: step several at once",
                                   "remove copies and rollouts, or record_video"))
        try:
            require("moviepy", "record_video (Gymnasium's RecordVideo)", VIDEO)
        except MissingExtra as error:
            raise_problems(Problem(("record_video",), str(error)))

    @field_validator("env")
    @classmethod
    def _resolvable(cls, env: str) -> str:
        try:
            resolve_env(env)
        except ImportPathError as error:
            raise_problems(Problem((), error.message, error.hint))
        return env

    @property
    def vectorised(self) -> bool:
        """Whether the environment steps as a vector of copies: it has ``copies:``, or
        ``rollouts:`` (each worker's copies, one when ``copies:`` is not given)."""
        return self.copies is not None or self.rollouts is not None

    @property
    def kind(self) -> EnvKind:
        """How ``env`` names the environment: ``gymnasium``, ``pettingzoo`` or ``import``."""
        return parse_env_reference(self.env)[0]


class LoadSpec(StrictModel):
    """Where an agent continues from: a phase's checkpoint of a run or experiment (in a
    training phase its brain, its muscles and the run's position; in a test phase its brain).

    ``agent`` defaults to the loading agent's own uid; without ``run``, the newest run of
    ``experiment`` (default: this experiment) that saved that phase is used.
    """

    expected: ClassVar[str] = "a mapping with 'phase' and optionally 'agent', 'run', 'experiment'"

    phase: Uid = Field(description="a phase name")
    agent: Uid | None = Field(default=None, description="an agent uid")
    run: str | None = Field(default=None, description="a run uid or a unique prefix of one")
    experiment: Uid | None = Field(default=None, description="an experiment uid")


class SelfPlayConfig(StrictModel):
    """An agent that plays frozen snapshots of another agent's brain (``self_play:``)."""

    expected: ClassVar[str] = ("a mapping with 'of' and 'snapshot_every', and optionally "
                               "'pool_size', 'sample' and 'latest_share'")

    of: Uid = Field(description="the uid of the agent whose snapshots this one plays")
    snapshot_every: int = Field(ge=1, description="a whole number >= 1 (episodes)")
    pool_size: int = Field(default=5, ge=1, description="a whole number >= 1 (snapshots kept)")
    sample: Literal["latest", "uniform", "mix"] = Field(
        default="uniform", description="'latest', 'uniform' or 'mix'")
    latest_share: float = Field(default=0.5, ge=0.0, le=1.0,
                                description="a number in [0, 1] (with sample: mix)")


#: What a self-play agent takes from the agent it plays, and so may not set itself.
_SELF_PLAY_TAKES = ("brain", "muscle", "params", "placement", "load", "checkpoint_every")


class AgentConfig(StrictModel):
    """One agent: a brain that learns and a muscle that acts; or, with ``self_play``, frozen
    snapshots of another agent, played by that agent's muscle."""

    expected: ClassVar[str] = "a mapping with at least 'uid' and 'muscle'"

    uid: Uid = Field(
        description="an agent uid made of letters, digits, '_', '.' and '-', unique among "
        "environments and agents"
    )
    brain: BrainSpec = Field(
        default_factory=lambda: BrainSpec.model_validate("mosaic.agents:NoOpBrain"),
        description=BrainSpec.expected,
    )
    muscle: MuscleSpec | None = Field(default=None, description=MuscleSpec.expected)
    params: Params = Field(default_factory=dict, description="a mapping of parameters")
    placement: AgentPlacement = Field(default=AgentPlacement(), description=AgentPlacement.expected)
    load: LoadSpec | None = Field(default=None, description=LoadSpec.expected)
    checkpoint_every: int = Field(
        default=0, ge=0, description="a whole number >= 0 (episodes; 0: only at phase end)"
    )
    self_play: SelfPlayConfig | None = Field(default=None, description=SelfPlayConfig.expected)

    @model_validator(mode="after")
    def _learner_params(self) -> AgentConfig:
        if self.self_play is not None:
            raise_if_any([
                Problem((key,), f"a self_play agent takes its {key} from agent "
                        f"'{self.self_play.of}'", f"remove {key} here")
                for key in _SELF_PLAY_TAKES if key in self.model_fields_set])
        elif self.muscle is None:
            raise_problems(Problem(("muscle",), "required key is missing; expected "
                                   f"{MuscleSpec.expected}",
                                   "or give the agent self_play: {of: <agent>, "
                                   "snapshot_every: N} to play snapshots of another agent"))
        raise_if_any(_learner_params_problems(self))
        return self


def _learner_params_problems(agent: AgentConfig) -> list[Problem]:
    """The brain's and the muscle's params, each checked with its class's ``params_model`` if it
    has one.

    Each gets the agent's ``params`` with its own over them; each problem is placed where its key
    is written (under ``brain.params`` or ``muscle.params``, unless only the agent's ``params``
    has it), and a problem that both find in the agent's ``params`` is reported once.
    """
    found: dict[tuple[Loc, str], Problem] = {}
    parts: tuple[tuple[str, _ComponentSpec | None], ...] = (
        ("brain", agent.brain), ("muscle", agent.muscle))
    for part, spec in parts:
        if spec is None:
            continue  # a self-play agent's muscle is checked where it is the other agent's
        learner = resolve_class(spec.class_path, spec.base)  # checked by the spec already
        model = learner.params_model() if issubclass(learner, Brain | Muscle) else None
        if model is None:
            continue
        own = spec.params
        _, problems = validate(model, {**agent.params, **own})
        for problem in problems:
            key = problem.loc[0] if problem.loc else None
            written = ("params",) if key in agent.params and key not in own else (part, "params")
            loc = (*written, *problem.loc)
            found.setdefault((loc, problem.message), dataclasses.replace(problem, loc=loc))
    return list(found.values())


class TerminationConfig(StrictModel):
    """When a phase stops early, besides its episode count and the environments' own ends.

    ``reward_threshold``: stop once the mean return of the last ``window`` episodes reaches it.
    ``condition``: a function ``package.module:fn(stats) -> bool`` called after each episode
    with a mapping (``episodes``, ``steps``, ``returns``: every episode's return so far,
    ``last_return``, ``environment``); true stops the phase.
    """

    expected: ClassVar[str] = "a mapping with 'reward_threshold' and/or 'condition'"

    reward_threshold: float | None = Field(default=None, description="a number")
    window: int = Field(default=100, ge=1, description="a whole number >= 1 (episodes)")
    condition: str | None = Field(default=None, description="an import path package.module:fn")

    @field_validator("condition")
    @classmethod
    def _callable(cls, path: str | None) -> str | None:
        if path is None:
            return None
        try:
            target = import_object(path)
        except ImportPathError as error:
            raise_problems(Problem((), error.message, error.hint))
        if not callable(target):
            raise_problems(Problem((), f"'{path}' is not callable",
                           "name a function taking the episode statistics and returning a bool"))
        return path


class PhaseConfig(StrictModel):
    """One phase of a run's schedule; what it does not set, it inherits from the phase before."""

    expected: ClassVar[str] = "a mapping with at least 'name'"

    name: Uid = Field(description="a phase name made of letters, digits, '_', '.' and '-'")
    mode: Mode | None = Field(default=None, description="'train' or 'test'")
    episodes: int | None = Field(default=None, ge=1, description="a whole number >= 1")
    max_steps: int | None = Field(default=None, ge=1, description="a whole number >= 1")
    environments: Annotated[list[EnvironmentConfig], Field(min_length=1)] | None = Field(
        default=None, description="a list of environments"
    )
    agents: Annotated[list[AgentConfig], Field(min_length=1)] | None = Field(
        default=None, description="a list of agents"
    )
    termination: TerminationConfig | None = Field(
        default=None, description=TerminationConfig.expected
    )
    evaluate_every: int | None = Field(
        default=None, ge=1, description="a whole number >= 1 (training episodes)"
    )
    evaluate_episodes: int | None = Field(
        default=None, ge=1, description="a whole number >= 1 (evaluation episodes)"
    )


class StoreConfig(StrictModel):
    """Where results go: a SQLite file (``path``) or a PostgreSQL database (``url``), not both."""

    path: str | None = Field(
        default=None,
        description="a file path for the SQLite store, or empty for '<file stem>.sqlite'",
    )
    url: str | None = Field(
        default=None,
        description="a database URL such as postgresql://user:password@host:port/database",
    )
    record_steps: RecordStepsSetting = Field(
        default="all",
        description="all, episodes or none (true and false still mean all and episodes)",
    )
    outage_s: float = Field(
        default=60.0, gt=0, le=86_400,
        description="seconds (> 0) the store may refuse every write before the runs fail",
    )

    @field_validator("path")
    @classmethod
    def _a_file_path(cls, path: str | None) -> str | None:
        if path is not None and not path.strip():
            raise_problems(
                Problem((), "expected a file path, got an empty text", "leave the key out"))
        if path is not None and "://" in path:
            raise_problems(
                Problem(
                    (),
                    f"expected a file path, got the URL {mask(path)!r}",
                    "a database URL goes in store.url",
                )
            )
        return path

    @field_validator("url")
    @classmethod
    def _a_url(cls, url: str | None) -> str | None:
        if url is not None and not is_database_url(url):
            raise_problems(
                Problem(
                    (),
                    f"expected a database URL such as postgresql://user@host/db, "
                    f"got {describe_value(url)}",
                    "a SQLite file's path goes in store.path",
                )
            )
        return url

    @model_validator(mode="after")
    def _path_or_url(self) -> StoreConfig:
        if self.path is not None and self.url is not None:
            raise_problems(
                Problem(
                    (),
                    "store.path and store.url are both set; the store is a SQLite file "
                    "(store.path) or a database (store.url), not both",
                    "remove one of the two keys",
                )
            )
        return self


class Timeouts(StrictModel):
    """Time limits in seconds; each must be a positive number."""

    setup: Seconds = Field(default=30.0, description="a number of seconds > 0")
    step: Seconds = Field(default=60.0, description="a number of seconds > 0")
    shutdown: Seconds = Field(default=5.0, description="a number of seconds > 0")
    heartbeat: Seconds = Field(default=2.5, description="a number of seconds > 0")


CpuCount = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class RayExecutorConfig(StrictModel):
    """Runs on a Ray cluster: where it is, and what each run and ``placement: ray`` component
    asks of it (see mosaic.orchestration.ray_runs and mosaic.runtime.ray_placement)."""

    expected: ClassVar[str] = (
        "a mapping such as {address: auto, cpus_per_component: 1, component_cpus: 1, "
        "component_resources: {my_node: 0.01}}"
    )

    address: str = Field(default="auto", min_length=1,
                         description="'auto' or a Ray address such as 10.0.0.1:6379")
    runs: bool = Field(default=True, description="true (each run a Ray task) or false (runs "
                       "stay with the command; only placement: ray components use the cluster)")
    cpus_per_component: CpuCount = Field(
        default=1.0, description="a number of CPUs >= 0 (per process a run starts, its own "
        "included)")
    component_cpus: CpuCount = Field(default=1.0, description="a number of CPUs >= 0")
    component_resources: dict[str, CpuCount] = Field(
        default_factory=dict, description="a mapping of Ray resource names to amounts >= 0")
    queue_timeout_s: float = Field(
        default=300.0, gt=0, allow_inf_nan=False,
        description="a number of seconds > 0 (how long a run may wait on the cluster's queue "
        "for a node with its CPUs free before it fails)")


class ExecutorConfig(StrictModel):
    """Where the runs run: on this machine (no key), or on a Ray cluster (``ray``)."""

    expected: ClassVar[str] = "a mapping such as {ray: {address: auto}, max_failures: 2}"

    ray: RayExecutorConfig | None = Field(default=None, description=RayExecutorConfig.expected)
    max_failures: int = Field(
        default=0, ge=0, le=100,
        description="a whole number from 0 to 100 (attempts again after a part crashed)")


class TrackingConfig(StrictModel):
    """Where each run is logged besides the store, as it runs (see :mod:`mosaic.tracking`):
    its episode returns and learner metrics, against its env steps."""

    expected: ClassVar[str] = "a mapping such as {tensorboard: tb, mlflow: http://host:5000}"

    tensorboard: str | None = Field(
        default=None,
        description="a folder for TensorBoard's event files, one subfolder per run, relative "
        "to this file (needs mosaic[tensorboard])",
    )
    mlflow: str | None = Field(
        default=None,
        description="an MLflow tracking URI (http://host:5000, file:mlruns) or a folder, "
        "relative to this file (needs mosaic[mlflow]); one MLflow run per run",
    )

    @field_validator("tensorboard", "mlflow")
    @classmethod
    def _not_empty(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise_problems(Problem((), "expected a folder or URI, got an empty text",
                                   "leave the key out to log nothing there"))
        return value


class ExperimentFile(StrictModel):
    """An experiment file's content, validated: exactly the keys the YAML may hold.

    The model validator also checks references between sections; see the module docstring.
    """

    expected: ClassVar[str] = "a mapping with at least 'uid', 'environments' and 'agents'"

    uid: Uid = Field(description="an experiment id made of letters, digits, '_', '.' and '-'")
    seed: int = Field(
        default=0, ge=0, le=MAX_SEED, description=f"a whole number from 0 to {MAX_SEED}"
    )
    runs: int = Field(
        default=1, ge=1, le=MAX_RUNS, description=f"a whole number from 1 to {MAX_RUNS}"
    )
    episodes: int = Field(default=1, ge=1, description="a whole number >= 1")
    max_steps: int | None = Field(default=None, ge=1, description="a whole number >= 1")
    mode: Mode = Field(default="train", description="'train' or 'test'")
    placement: Placement = Field(default="thread", description="'thread', 'process' or 'ray'")
    transport: Transport = Field(default="ipc", description="'ipc' or 'tcp'")
    host: str = Field(default="127.0.0.1", description="an IP address such as 127.0.0.1")
    curve_keys: str | None = Field(
        default=None,
        description="a folder written by 'mosaic keys generate', relative to this file",
    )
    cpu_affinity: Literal["auto", "none"] | Annotated[int, Field(ge=0)] = Field(
        default="none", description="'none', 'auto' or a CPU number >= 0"
    )
    environments: Annotated[list[EnvironmentConfig], Field(min_length=1)] = Field(
        description="a list of environments"
    )
    agents: Annotated[list[AgentConfig], Field(min_length=1)] = Field(
        description="a list of agents"
    )
    store: StoreConfig = Field(default=StoreConfig(), description="a mapping")
    timeouts: Timeouts = Field(default=Timeouts(), description="a mapping")
    termination: TerminationConfig | None = Field(
        default=None, description=TerminationConfig.expected
    )
    evaluate_every: int | None = Field(
        default=None, ge=1, description="a whole number >= 1 (training episodes)"
    )
    evaluate_episodes: int | None = Field(
        default=None, ge=1, description="a whole number >= 1 (evaluation episodes)"
    )
    phases: Annotated[list[PhaseConfig], Field(min_length=1)] | None = Field(
        default=None, description="a list of phases"
    )
    sweep: SweepConfig | None = Field(default=None, description=SweepConfig.expected)
    executor: ExecutorConfig = Field(default=ExecutorConfig(), description=ExecutorConfig.expected)
    tracking: TrackingConfig = Field(default=TrackingConfig(), description=TrackingConfig.expected)

    @field_validator("host")
    @classmethod
    def _an_address(cls, host: str) -> str:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            hint = "did you mean '127.0.0.1'?" if host == "localhost" else ""
            raise_problems(Problem((), f"expected an IP address, got {host!r}", hint))
        return host

    @field_validator("curve_keys")
    @classmethod
    def _a_folder_path(cls, path: str | None) -> str | None:
        if path is not None and not path.strip():
            raise_problems(Problem((), "expected a folder path, got an empty text",
                           f"{_how_to_generate()}, or leave the key out"))
        return path

    @model_validator(mode="after")
    def _references(self) -> ExperimentFile:
        raise_if_any(_reference_problems(self))
        return self


def _reference_problems(experiment: ExperimentFile) -> list[Problem]:
    """Check what sections say about each other, also in every phase; return every problem."""
    problems = _section_problems(experiment.environments, experiment.agents, ())
    if experiment.phases:
        names: dict[str, int] = {}
        environments, agents = experiment.environments, experiment.agents
        for index, phase in enumerate(experiment.phases):
            if phase.name in names:
                problems.append(Problem(("phases", index, "name"),
                                        f"phase name '{phase.name}' is already used by "
                                        f"phases[{names[phase.name]}]",
                                        "phase names must be unique"))
            names.setdefault(phase.name, index)
            if phase.environments is None and phase.agents is None:
                continue
            environments = phase.environments or environments
            agents = phase.agents or agents
            problems.extend(_section_problems(environments, agents, ("phases", index)))
    problems.extend(_evaluation_problems(experiment))
    problems.extend(_run_problems(experiment))
    return problems


def _evaluation_problems(experiment: ExperimentFile) -> list[Problem]:
    """``evaluate_every`` and ``evaluate_episodes``, checked in every phase with what it
    inherits. A test phase does not evaluate: one that inherits ``evaluate_every`` ignores it,
    one that sets it is an error; so is ``evaluate_episodes`` without ``evaluate_every``, and
    evaluation of an environment with ``copies:`` (not supported yet)."""
    problems: list[Problem] = []
    phases = experiment.phases or []
    every_anywhere = experiment.evaluate_every is not None or any(
        phase.evaluate_every is not None for phase in phases)
    if experiment.evaluate_episodes is not None and not every_anywhere:
        problems.append(_episodes_without_every(()))
    levels: list[tuple[Loc, ExperimentFile | PhaseConfig]] = (
        [(("phases", index), phase) for index, phase in enumerate(phases)] if phases
        else [((), experiment)])
    every_at: Loc | None = ("evaluate_every",) if experiment.evaluate_every is not None else None
    mode, environments = experiment.mode, experiment.environments
    for prefix, level in levels:
        if isinstance(level, PhaseConfig):
            if level.evaluate_every is not None:
                every_at = (*prefix, "evaluate_every")
            mode = level.mode or mode
            environments = level.environments or environments
            if level.evaluate_episodes is not None and every_at is None:
                problems.append(_episodes_without_every(prefix))
        if every_at is None:
            continue
        if mode == "test":
            if every_at[:-1] == prefix:
                problems.append(Problem(every_at, "evaluate_every applies to training; a "
                                        "mode: test phase already acts greedily",
                                        "remove evaluate_every here, or set mode: train"))
            continue
        copied = [environment.uid for environment in environments if environment.vectorised]
        if copied:
            problems.append(Problem(every_at, "evaluation episodes are not supported yet with "
                                    f"copies: or rollouts: (environment '{copied[0]}')",
                                    "remove evaluate_every, or copies and rollouts"))
    return problems


def _episodes_without_every(prefix: Loc) -> Problem:
    return Problem((*prefix, "evaluate_episodes"), "evaluate_episodes needs evaluate_every",
                   "add evaluate_every: N (the training episodes between two evaluations), "
                   "or remove evaluate_episodes")


def _section_problems(
    environments: Sequence[EnvironmentConfig], agents: Sequence[AgentConfig], prefix: Loc
) -> list[Problem]:
    """Unique uids and policy mappings of one set of environments and agents."""
    problems: list[Problem] = []
    owners: dict[str, str] = {}
    sections: tuple[tuple[str, Sequence[EnvironmentConfig | AgentConfig]], ...] = (
        ("environments", environments),
        ("agents", agents),
    )
    for section, items in sections:
        for index, item in enumerate(items):
            where = f"{section}[{index}]"
            if item.uid in owners:
                problems.append(
                    Problem(
                        (*prefix, section, index, "uid"),
                        f"uid '{item.uid}' is already used by {owners[item.uid]}",
                        "uids must be unique among environments and agents",
                    )
                )
            else:
                owners[item.uid] = where
    agent_uids = [agent.uid for agent in agents]
    used: set[str] = set()
    mapping_problems = len(problems)
    for index, environment in enumerate(environments):
        mapping = environment.policy_mapping
        if mapping is None:
            if len(agent_uids) == 1:
                used.add(agent_uids[0])
            else:
                problems.append(
                    Problem(
                        (*prefix, "environments", index, "policy_mapping"),
                        "missing policy_mapping; expected one because the experiment has "
                        f"{len(agent_uids)} agents",
                        "with one agent, every env agent is mapped to it; with more, say which "
                        "agent acts for each env agent id, e.g. policy_mapping: {agent_0: "
                        f"{agent_uids[0]}}}",
                    )
                )
            continue
        for env_agent, agent in mapping.items():
            loc = (*prefix, "environments", index, "policy_mapping", env_agent)
            if agent in agent_uids:
                used.add(agent)
            else:
                problems.append(
                    Problem(
                        loc,
                        f"no agent has uid '{agent}'",
                        _choices_hint(agent, agent_uids, "agents"),
                    )
                )
            if environment.kind == "gymnasium" and env_agent != GYMNASIUM_AGENT:
                problems.append(
                    Problem(
                        loc,
                        f"unknown env agent id '{env_agent}'",
                        f"a Gymnasium environment has one env agent id, '{GYMNASIUM_AGENT}'",
                    )
                )
    problems.extend(_self_play_problems(environments, agents, prefix))
    problems.extend(_rollout_problems(environments, agents, prefix))
    # An agent left unmapped because of another mapping problem is not worth a second line.
    mapped_cleanly = len(problems) == mapping_problems
    for index, agent_uid in enumerate(agent_uids):
        if agent_uid not in used and mapped_cleanly:
            problems.append(
                Problem(
                    (*prefix, "agents", index, "uid"),
                    f"no environment's policy_mapping maps to agent '{agent_uid}'; it never acts",
                    "map an env agent id to it in some environment's policy_mapping, or remove it",
                )
            )
    return problems


def _self_play_problems(
    environments: Sequence[EnvironmentConfig], agents: Sequence[AgentConfig], prefix: Loc
) -> list[Problem]:
    """Each self-play agent plays an agent that learns, in environments without copies."""
    problems: list[Problem] = []
    by_uid = {agent.uid: agent for agent in agents}
    for index, agent in enumerate(agents):
        if agent.self_play is None:
            continue
        loc = (*prefix, "agents", index, "self_play", "of")
        other = by_uid.get(agent.self_play.of)
        if other is None:
            problems.append(Problem(loc, f"no agent has uid '{agent.self_play.of}'",
                                    _choices_hint(agent.self_play.of, list(by_uid), "agents")))
        elif other is agent or other.self_play is not None:
            problems.append(Problem(loc, f"agent '{other.uid}' plays snapshots itself",
                                    "name an agent with a brain and a muscle"))
        for env_index, environment in enumerate(environments):
            mapping = environment.policy_mapping or {}
            if environment.vectorised and agent.uid in mapping.values():
                key = "copies" if environment.copies is not None else "rollouts"
                problems.append(Problem((*prefix, "environments", env_index, key),
                                        f"self-play agent '{agent.uid}' acts here, and "
                                        f"self-play is not supported with {key}",
                                        f"remove {key}"))
    return problems


def _rollout_problems(
    environments: Sequence[EnvironmentConfig], agents: Sequence[AgentConfig], prefix: Loc
) -> list[Problem]:
    """Rollout workers step every environment of a run or none, for learners and scripts:
    operators and humans keep the per-step loop."""
    rolled = [index for index, environment in enumerate(environments)
              if environment.rollouts is not None]
    if not rolled:
        return []
    problems = [Problem((*prefix, "environments", index), "a run with rollout workers steps "
                        "every environment in them; this one has no rollouts:",
                        "add rollouts: N here, or remove rollouts from the others")
                for index, environment in enumerate(environments)
                if environment.rollouts is None]
    for index in rolled:
        environment = environments[index]
        mapping = environment.policy_mapping
        acting = set(mapping.values()) if mapping else {agent.uid for agent in agents}
        for agent in agents:
            muscle = agent.muscle.class_ if agent.muscle is not None else ""
            if agent.uid in acting and muscle.startswith(OPERATOR_MUSCLES):
                problems.append(Problem(
                    (*prefix, "environments", index, "rollouts"),
                    f"agent '{agent.uid}' is an operator ({muscle}), which acts step by step "
                    "through its worker process; rollout workers step learners and scripted "
                    "muscles only", "remove rollouts"))
    return problems


def _run_problems(experiment: ExperimentFile) -> list[Problem]:
    """The tcp host, the CURVE keys and the run seeds."""
    problems: list[Problem] = []
    public = not ipaddress.ip_address(experiment.host).is_loopback
    if experiment.transport == "tcp" and public and experiment.curve_keys is None:
        problems.append(
            Problem(
                ("host",),
                f"{experiment.host} is not a loopback address; listening on it with transport "
                "tcp requires CURVE keys",
                f"{_how_to_generate()}; or use 127.0.0.1",
            )
        )
    if experiment.transport != "tcp" and experiment.curve_keys is not None:
        # ipc sockets are files in a private folder: there is nothing to encrypt or keep out,
        # and keys that silently did nothing would suggest a protection that is not there.
        problems.append(
            Problem(
                ("curve_keys",),
                f"curve_keys secures tcp only, but transport is {experiment.transport}",
                "set transport: tcp, or remove curve_keys",
            )
        )
    first_run: dict[int, int] = {}
    for index in range(experiment.runs):
        run_seed = _run_seed(experiment.seed, index)
        if run_seed in first_run:
            problems.append(
                Problem(
                    ("seed",),
                    f"seed {experiment.seed} gives runs {first_run[run_seed]} and {index} the "
                    "same run seed",
                    "choose another seed",
                )
            )
            break
        first_run[run_seed] = index
    return problems


def _how_to_generate() -> str:
    # Imported when needed: the transport package is heavy, and a file check should be quick.
    from mosaic.transport.keys import HOW_TO_GENERATE

    return HOW_TO_GENERATE


def _choices_hint(value: str, choices: list[str], what: str) -> str:
    return f"{did_you_mean(value, choices)} {what}: {', '.join(choices)}".lstrip()


class SweepPoint(StrictModel):
    """One point of a sweep: its values by key path, and the file's settings with them set."""

    params: dict[str, Any]
    settings: ExperimentFile


#: The line after which :meth:`Experiment.recorded_text` lists the overrides.
OVERRIDES_MARK = "# set over the file (--set):"


def _flow(value: Any) -> str:
    """``value`` as one line of YAML (flow style)."""
    return yaml.safe_dump(value, default_flow_style=True, width=10**6).strip().removesuffix(
        "\n...").strip()


class Experiment(ExperimentFile):
    """A validated experiment, ready to run; frozen.

    Besides the file's keys it holds ``source``, the experiment file (absolute), the results
    store resolved as :func:`~mosaic.experiment.load_experiment` documents, as ``store_path``
    (a SQLite file) or ``store_url`` (a database's URL, password included), exactly one of the
    two, ``curve_keys_dir``, the key folder of ``curve_keys`` (absolute, its keys checked) or
    ``None``, ``points``, the points of its ``sweep`` (none without one), and ``overrides``, the
    key paths set over the file (``--set``, or ``mosaic.run``'s keywords). Build it with
    :func:`~mosaic.experiment.load_experiment`.

    Runs are numbered from 0 to :attr:`run_count` - 1: run ``i`` is point ``i // runs`` of the
    sweep with seed ``i % runs``; without a sweep, run ``i`` is seed ``i``.
    """

    source: Path
    store_path: Path | None = None
    store_url: str | None = None
    curve_keys_dir: Path | None = None
    points: tuple[SweepPoint, ...] = ()
    overrides: dict[str, Any] = Field(default_factory=dict)

    @property
    def run_count(self) -> int:
        """How many runs a command starts: ``runs`` for each point of the sweep (of a search:
        for each point it asks for)."""
        search = self.search
        return self.runs * (search.samples if search is not None else max(1, len(self.points)))

    @property
    def search(self) -> SearchSweep | None:
        """The sweep's ``search``, if it is one. Its points are not known before it runs:
        :attr:`points` holds those asked for so far (none when loaded), and a run of a point
        not asked for yet has the file's own settings."""
        return self.sweep.search if self.sweep is not None else None

    @model_validator(mode="after")
    def _one_store(self) -> Experiment:
        if (self.store_path is None) == (self.store_url is None):
            raise ValueError("an experiment has exactly one of store_path and store_url")
        return self

    def recorded_text(self) -> str:
        """What the store keeps of the experiment for ``--resume``: its file's text, and the
        overrides set over it, as comment lines at the end (see :data:`OVERRIDES_MARK`).
        Raises OSError or UnicodeDecodeError for a file that cannot be read."""
        text = self.source.read_text(encoding="utf-8")
        if not self.overrides:
            return text
        lines = [f"#   {path}={_flow(value)}" for path, value in self.overrides.items()]
        return "\n".join([text.rstrip("\n"), "", OVERRIDES_MARK, *lines, ""])

    @property
    def store_target(self) -> Path | str:
        """What the store writer and reader open: the SQLite file or the database URL."""
        return self.store_url if self.store_url is not None else cast(Path, self.store_path)

    @property
    def store_shown(self) -> str:
        """The store for messages: the file, or the URL with its password hidden."""
        return mask(self.store_target)

    @property
    def checkpoints_dir(self) -> Path:
        """The folder of the brains' checkpoints: beside a SQLite store, and for a database
        where the default store would be (``<file stem>-checkpoints`` next to the file)."""
        return checkpoint_root(self.store_path if self.store_path is not None else self.source)

    @property
    def videos_dir(self) -> Path:
        """The default folder of the runs' videos (``record_video:``), one subfolder per run:
        beside a SQLite store (``<store stem>-videos``), and for a database where the default
        store would be (``<file stem>-videos`` next to the file)."""
        where = self.store_path if self.store_path is not None else self.source
        return where.parent / f"{where.stem}-videos"

    def _video_plan(self, video: RecordVideoConfig | None) -> VideoPlan | None:
        if video is None:
            return None
        folder = self.videos_dir
        if video.folder is not None:  # relative to the file, as every path in it
            folder = (self.source.parent / Path(video.folder).expanduser()).resolve()
        return VideoPlan(str(folder), video.every, tuple(video.episodes or ()))

    @property
    def tensorboard_dir(self) -> Path | None:
        """``tracking.tensorboard``, absolute (a relative folder is in the file's folder)."""
        folder = self.tracking.tensorboard
        return None if folder is None else tensorboard_folder(folder, self.source.parent)

    @property
    def mlflow_uri(self) -> str | None:
        """``tracking.mlflow`` as a tracking URI, a relative folder taken from the file's."""
        uri = self.tracking.mlflow
        return None if uri is None else mlflow_uri(uri, self.source.parent)

    def with_tracking(self, tensorboard: str | None = None,
                      mlflow: str | None = None) -> Experiment:
        """This experiment, logged to TensorBoard under the folder ``tensorboard`` and to MLflow
        at ``mlflow`` (a tracking URI or a folder) instead of where its ``tracking:`` says; a
        ``None`` keeps the file's: the command's ``--tensorboard`` and ``--mlflow``. A relative
        folder is taken from the current folder, as a command-line path is.

        Raises :class:`~mosaic.core.errors.ConfigError`, at ``--tensorboard`` or ``--mlflow``,
        for an empty text and for a sink whose extra is not installed (naming the extra).
        """
        here = Path.cwd()
        update: dict[str, str] = {}
        for option, value in (("tensorboard", tensorboard), ("mlflow", mlflow)):
            if value is None:
                continue
            if not value.strip():
                raise ConfigError(str(self.source), f"--{option}",
                                  "expected a folder or URI, got an empty text")
            try:
                require_sink(option)
            except MissingExtra as error:
                raise ConfigError(str(self.source), f"--{option}", str(error)) from None
            update[option] = (str(tensorboard_folder(value, here)) if option == "tensorboard"
                              else mlflow_uri(value, here))
        if not update:
            return self
        tracking = self.tracking.model_copy(update=update)
        return self.model_copy(update={"tracking": tracking})

    def run_seeds(self) -> list[int]:
        """Return the seed of each run, :attr:`run_count` of them, derived from ``seed``.

        Run ``i``'s seed, with ``k = i % runs``, is
        ``int(numpy.random.SeedSequence(seed, spawn_key=(k,)).generate_state(1, numpy.uint32)[0])``:
        an integer in ``[0, 2**32)``, the same on every machine and NumPy version for the same
        ``seed`` and ``i``, and independent of ``runs`` (adding runs leaves earlier runs' seeds
        unchanged). The seeds of one point are distinct: validation rejects a ``seed`` for which
        two runs would collide (about ``runs**2 / 2**33`` likely), rather than repeat a run
        silently. Every point of a sweep has the same seeds (unless the sweep sets ``seed``).
        """
        return [_run_seed(self._settings(index).seed, index % self.runs)
                for index in range(self.run_count)]

    def run_params(self, run_index: int) -> dict[str, Any]:
        """The sweep's values of run ``run_index``, by key path (empty without a sweep)."""
        self._check_index(run_index)
        point = run_index // self.runs
        return dict(self.points[point].params) if point < len(self.points) else {}

    def phase_names(self, run_index: int = 0) -> list[str]:
        """The names of run ``run_index``'s phases, in order (one, ``main``, without ``phases``)."""
        phases = self._settings(run_index).phases
        return [phase.name for phase in phases] if phases else [DEFAULT_PHASE]

    def placements(self) -> set[str]:
        """Every placement a component has in some run and phase (``thread``, ``process``,
        ``ray``): those of each sweep point's first run, since its seeds do not change them."""
        return {placement
                for index in range(0, self.run_count, self.runs)
                for phase in range(len(self.phase_names(index)))
                for placement in self.run_config(index, phase).placements()}

    def _settings(self, run_index: int) -> ExperimentFile:
        """The file's settings for run ``run_index``: its sweep point's, or the file's own."""
        point = run_index // self.runs
        return self.points[point].settings if point < len(self.points) else self

    def _check_index(self, run_index: int) -> None:
        if isinstance(run_index, bool) or not isinstance(run_index, int | np.integer):
            raise TypeError(f"run_index must be an int, got {type(run_index).__name__}")
        if not 0 <= run_index < self.run_count:
            raise IndexError(f"run_index {run_index} is out of range for {self.run_count} run(s)")

    def run_config(self, run_index: int, phase_index: int = 0) -> RunConfig:
        """Return everything run ``run_index`` needs in phase ``phase_index``, as typed records.

        The records are frozen, and their ``params`` are copies: changing them changes nothing
        here. Placements are resolved (``"thread"`` or ``"process"``); an agent's brain and
        muscle params are the agent's ``params`` overridden key by key (shallowly) by the
        brain's or muscle's own; ``mode``, ``episodes``, ``max_steps``, ``termination``,
        ``evaluate_every``, ``evaluate_episodes``, ``environments`` and ``agents`` are the
        phase's, and every setting is the run's sweep
        point's. See :class:`~mosaic.messages.RunConfig`.

        Raises ``IndexError`` unless ``0 <= run_index < run_count`` and the phase exists.
        """
        self._check_index(run_index)
        run_index = int(run_index)
        settings = self._settings(run_index)
        phase_count = len(self.phase_names(run_index))
        if not 0 <= phase_index < phase_count:
            raise IndexError(f"phase_index {phase_index} is out of range for "
                             f"{phase_count} phase(s)")
        (phase, mode, episodes, max_steps, environments, agents, termination,
         (evaluate_every, evaluate_episodes)) = _phase(settings, phase_index)
        placement = settings.placement
        return RunConfig(
            experiment=self.uid,
            run_index=run_index,
            phase=phase,
            phase_index=phase_index,
            phases=phase_count,
            seed=_run_seed(settings.seed, run_index % self.runs),
            experiment_seed=settings.seed,
            episodes=episodes,
            max_steps=max_steps,
            termination=None if termination is None else TerminationSpec(
                **termination.model_dump()),
            mode=mode,
            transport=settings.transport,
            host=settings.host,
            cpu_affinity=self.cpu_affinity,
            record_steps=settings.store.record_steps,
            store_path=self.store_shown,
            timeouts=RunTimeouts(
                setup=float(settings.timeouts.setup),
                step=float(settings.timeouts.step),
                shutdown=float(settings.timeouts.shutdown),
                heartbeat=float(settings.timeouts.heartbeat),
            ),
            default_agent=agents[0].uid if len(agents) == 1 else None,
            environments=tuple(
                EnvironmentPlan(
                    uid=environment.uid,
                    env=environment.env,
                    kind=environment.kind,
                    params=copy.deepcopy(environment.params),
                    placement=environment.placement or placement,
                    policy_mapping=copy.deepcopy(environment.policy_mapping),
                    record_steps=environment.record_steps,
                    copies=(environment.copies or 1 if environment.rollouts is not None
                            else environment.copies),
                    rollouts=environment.rollouts,
                    vector_mode=environment.vector_mode,
                    seeding=environment.seeding,
                    wrappers=tuple(WrapperPlan(wrapper.class_path, copy.deepcopy(wrapper.params))
                                   for wrapper in environment.wrappers),
                    store_info=tuple(environment.store_info or ()),
                    record_video=self._video_plan(environment.record_video),
                )
                for environment in environments
            ),
            agents=tuple(_agent_plan(agent, agents, placement) for agent in agents),
            evaluate_every=evaluate_every,
            evaluate_episodes=evaluate_episodes,
            ray=None if self.executor.ray is None else RayRequest(
                self.executor.ray.component_cpus, dict(self.executor.ray.component_resources)),
            search=None if self.search is None else SearchPlan(
                self.search.metric, self.search.direction, self.search.pruner_name,
                self.search.pruner_options, SEARCH_STUDY, run_index // self.runs),
        )


def _phase(settings: ExperimentFile, phase_index: int) -> tuple[
        str, Mode, int, int | None, list[EnvironmentConfig], list[AgentConfig],
        TerminationConfig | None, tuple[int | None, int]]:
    """The effective settings of a phase: each inherits what it does not set."""
    name, mode, episodes = DEFAULT_PHASE, settings.mode, settings.episodes
    max_steps, termination = settings.max_steps, settings.termination
    evaluate_every, evaluate_episodes = settings.evaluate_every, settings.evaluate_episodes
    environments, agents = list(settings.environments), list(settings.agents)
    for phase in (settings.phases or [])[: phase_index + 1]:
        name = phase.name
        mode = phase.mode or mode
        episodes = phase.episodes or episodes
        max_steps = phase.max_steps or max_steps
        environments = list(phase.environments or environments)
        agents = list(phase.agents or agents)
        termination = phase.termination or termination
        evaluate_every = phase.evaluate_every or evaluate_every
        evaluate_episodes = phase.evaluate_episodes or evaluate_episodes
    # A test phase acts greedily already: it does not evaluate, even if it inherits the key.
    return (name, mode, episodes, max_steps, environments, agents, termination,
            (evaluate_every if mode == "train" else None,
             evaluate_episodes or DEFAULT_EVALUATE_EPISODES))


def _agent_plan(agent: AgentConfig, agents: Sequence[AgentConfig],
                placement: Placement) -> AgentPlan:
    """The plan of ``agent``; a self-play agent gets the muscle (and its placement) of the
    agent it plays, and a NoOpBrain in a thread."""
    if agent.self_play is not None:
        other = next(a for a in agents if a.uid == agent.self_play.of)  # checked when loaded
        plan = _agent_plan(other, agents, placement)
        return AgentPlan(uid=agent.uid,
                         brain=ComponentSpec("mosaic.agents:NoOpBrain", {}),
                         muscle=plan.muscle, brain_placement="thread",
                         muscle_placement=plan.muscle_placement,
                         self_play=SelfPlayPlan(**agent.self_play.model_dump()))
    if agent.muscle is None:
        raise ValueError(f"agent {agent.uid!r} has neither a muscle nor self_play")
    return AgentPlan(
        uid=agent.uid,
        brain=ComponentSpec(agent.brain.class_path,
                            copy.deepcopy({**agent.params, **agent.brain.params})),
        muscle=ComponentSpec(agent.muscle.class_path,
                             copy.deepcopy({**agent.params, **agent.muscle.params})),
        brain_placement=agent.placement.brain or (
            "thread" if _learns_nothing(agent.brain.class_path) else placement),
        muscle_placement=agent.placement.muscle or placement,
        load=None if agent.load is None else LoadRecord(**agent.load.model_dump()),
        checkpoint_every=agent.checkpoint_every,
    )


def _run_seed(seed: int, run_index: int) -> int:
    state = np.random.SeedSequence(seed, spawn_key=(run_index,)).generate_state(1, np.uint32)
    return int(state[0])


def _learns_nothing(brain: str) -> bool:
    """Whether ``brain`` is the NoOpBrain: it runs in a thread unless the file places it, since a
    process of its own would cost start-up time and memory for a brain that does nothing."""
    return import_object(brain) is NoOpBrain
