"""The message classes: their exact schema, validation, registry, and a round trip of each."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any, Literal

import msgpack  # type: ignore[import-untyped]
import numpy as np
import pytest
from gymnasium import spaces

from mosaic import messages
from mosaic.core.errors import CodecError, MessageFieldError, UnknownMessageType
from mosaic.core.spaces import space_from_dict, space_to_dict
from mosaic.messages import (
    ActuatorSpec,
    EnvironmentStartResponse,
    EnvironmentUpdateResponse,
    ExperimentShutdownResponse,
    ExperimentStartResponse,
    Message,
    Notice,
    Record,
    Request,
    Response,
    SensorSpec,
    decode_message,
    encode_message,
    lookup,
    pack,
    registered,
    unpack,
)

from .test_codec import assert_identical

# The schema other components are written against: class -> (kind, field names in order).
SCHEMA: dict[str, tuple[type, tuple[str, ...]]] = {
    "SensorSpec": (Record, ("uid", "space")),
    "ActuatorSpec": (Record, ("uid", "space")),
    "ErrorResponse": (Response, ("request", "error_type", "error")),
    "PingRequest": (Request, ()),
    "PongResponse": (Response, ("uid",)),
    "ExperimentStartRequest": (
        Request,
        ("experiment_uid", "run_uid", "run_index", "seed", "config", "notify_endpoint"),
    ),
    "ExperimentStartResponse": (Response, ("run_uid", "ok", "error")),
    "ExperimentRunFinishedNotice": (Notice, ("run_uid", "status", "error")),
    "ExperimentRunShutdownRequest": (Request, ("run_uid", "reason")),
    "ExperimentShutdownResponse": (
        Response,
        ("run_uid", "status", "error", "episodes", "steps", "killed"),
    ),
    "SimulationStartRequest": (Request, ("run_uid", "seed", "config", "governor_endpoint")),
    "SimulationStartResponse": (Response, ("run_uid", "ok", "error")),
    "SimulationFinishedNotice": (Notice, ("run_uid", "status", "error", "episodes", "steps")),
    "SimulationStopRequest": (Request, ("run_uid", "reason")),
    "SimulationStopResponse": (Response, ("run_uid", "episodes", "steps", "killed")),
    "EnvironmentSetupRequest": (Request, ("run_uid", "environment_uid", "placement", "rollout")),
    "EnvironmentSetupResponse": (Response, ("environment_uid", "endpoint")),
    "EnvironmentStartRequest": (Request, ("environment_uid", "env", "params", "seed", "copies",
                                          "vector_mode", "max_steps", "wrappers", "video",
                                          "seeding")),
    "EnvironmentStartResponse": (Response, ("environment_uid", "sensors", "actuators", "copies",
                                            "reseeds")),
    "EnvironmentResetRequest": (Request, ("seed", "episode")),
    "EnvironmentResetResponse": (Response, ("observations", "acting", "legal_actions", "infos")),
    "EnvironmentUpdateRequest": (Request, ("actions",)),
    "EnvironmentUpdateResponse": (
        Response,
        ("observations", "rewards", "terminated", "truncated", "acting", "legal_actions",
         "infos"),
    ),
    "EnvironmentShutdownRequest": (Request, ("environment_uid",)),
    "EnvironmentShutdownResponse": (Response, ("environment_uid",)),
    "AgentSetupRequest": (
        Request,
        ("run_uid", "agent_uid", "config", "muscles", "seed", "mode", "evaluate", "observers"),
    ),
    "AgentSetupResponse": (Response, ("agent_uid", "muscle_endpoints")),
    "BrainSetupRequest": (
        Request,
        ("agent_uid", "brain_uid", "brain", "sensors", "actuators", "seed", "mode", "muscles",
         "checkpoints", "observers", "groups"),
    ),
    "BrainSetupResponse": (Response, ("brain_uid",)),
    "MuscleSetupRequest": (
        Request,
        (
            "agent_uid",
            "muscle_uid",
            "environment_uid",
            "muscle",
            "sensors",
            "actuators",
            "seed",
            "mode",
            "brain_endpoint",
            "brain_timeout",
            "checkpoint_every",
            "copies",
            "evaluate",
            "self_play",
            "snapshot_endpoint",
        ),
    ),
    "MuscleSetupResponse": (Response, ("muscle_uid",)),
    "AgentUpdateRequest": (
        Request,
        ("step", "observations", "rewards", "terminated", "truncated", "acting", "legal_actions",
         "infos"),
    ),
    "AgentEvaluateRequest": (
        Request,
        ("step", "observations", "rewards", "terminated", "truncated", "acting", "legal_actions",
         "infos"),
    ),
    "AgentUpdateResponse": (Response, ("actions", "metrics", "snapshot")),
    "MuscleUpdateRequest": (Request, ("muscle_uid", "experience")),
    "MuscleUpdateResponse": (Response, ("update", "metrics", "restore")),
    "MuscleShutdownRequest": (Request, ("muscle_uid",)),
    "MuscleShutdownResponse": (Response, ("muscle_uid", "metrics")),
    "BrainShutdownRequest": (Request, ("muscle_uid", "muscle_state")),
    "BrainShutdownResponse": (Response, ("brain_uid", "remaining", "metrics")),
    "BrainCheckpointRequest": (Request, ("muscle_uid", "episodes", "muscle_state")),
    "BrainCheckpointResponse": (Response, ("brain_uid", "path", "metrics")),
    "BrainSyncRequest": (Request, ("muscle_uid",)),
    "EnvironmentConductorShutdownRequest": (Request, ("run_uid",)),
    "EnvironmentConductorShutdownResponse": (Response, ("run_uid", "killed")),
    "AgentConductorShutdownRequest": (Request, ("run_uid",)),
    "AgentConductorShutdownResponse": (Response, ("run_uid", "killed")),
    # The step loop of an environment with copies: one message per batch.
    "BatchOutcome": (Record, ("observations", "rewards", "terminated", "truncated", "acted",
                              "starts", "final_observations", "legal_actions", "info",
                              "final_info")),
    "VectorResetRequest": (Request, ("seeds",)),
    "VectorStepRequest": (Request, ("actions", "next_seeds")),
    "VectorStepResponse": (Response, ("outcome",)),
    "AgentBatchRequest": (Request, ("outcome",)),
    "AgentBatchResponse": (Response, ("actions", "metrics")),
    # A metric a brain or muscle reported, on its replies.
    "Metric": (Record, ("source", "name", "value", "at")),
    # A run's configuration, carried by the start and set-up messages.
    "MusclePlan": (Record, ("environment", "sensors", "actuators", "seed", "copies", "host")),
    "ComponentSpec": (Record, ("class_path", "params")),
    "LoadSpec": (Record, ("phase", "agent", "run", "experiment")),
    "CheckpointPaths": (Record, ("save", "load")),
    "EnvironmentPosition": (Record, ("episode", "evaluation_round", "evaluations",
                                     "first_episode", "copy_episodes")),
    "ResumePoint": (Record, ("digest", "positions")),
    "EnvironmentPlan": (Record, ("uid", "env", "kind", "params", "placement", "policy_mapping",
                                 "record_steps", "copies", "vector_mode", "wrappers",
                                 "store_info", "rollouts", "record_video", "seeding")),
    "WrapperPlan": (Record, ("class_path", "params")),
    "VideoPlan": (Record, ("folder", "every", "episodes")),
    "AgentPlan": (Record, ("uid", "brain", "muscle", "brain_placement", "muscle_placement",
                           "load", "checkpoint_every", "checkpoints", "self_play")),
    "SelfPlayPlan": (Record, ("of", "snapshot_every", "pool_size", "sample", "latest_share")),
    "RunTimeouts": (Record, ("setup", "step", "shutdown", "heartbeat")),
    "TerminationSpec": (Record, ("reward_threshold", "window", "condition")),
    "RunConfig": (Record, ("experiment", "run_index", "phase", "phase_index", "phases", "seed",
                           "experiment_seed", "episodes", "max_steps", "termination", "mode",
                           "transport", "host", "cpu_affinity", "record_steps", "store_path",
                           "timeouts", "default_agent", "environments", "agents",
                           "evaluate_every", "evaluate_episodes", "resume", "ray", "search")),
    "RayRequest": (Record, ("cpus", "resources")),
    "SearchPlan": (Record, ("metric", "direction", "pruner", "options", "study", "trial",
                            "trials")),
    "SearchTrial": (Record, ("number", "state", "value", "steps", "values", "notes")),
    "RunRecordsRequest": (Request, ("run_uid", "node", "records", "progress")),
    "RunRecordsResponse": (Response, ("run_uid", "cancel")),
    "RolloutHost": (Record, ("worker", "endpoint", "placement", "group")),
    "RolloutRunRequest": (Request, ("environment_uid", "run_id", "seed", "index", "first_copy",
                                    "episodes", "max_steps", "agent_uid", "steps",
                                    "episodes_recorded", "store_info", "resume")),
    "RolloutRunResponse": (Response, ("worker",)),
    "RolloutCollectRequest": (Request, ("worker",)),
    "RolloutStopRequest": (Request, ("worker",)),
    "RolloutCollectResponse": (Response, ("worker", "records", "steps", "returns", "finished",
                                          "digest", "error", "copy_episodes")),
}

MOSAIC_CLASSES = {
    tag: cls for tag, cls in registered().items() if cls.__module__.startswith("mosaic.messages.")
}


def test_every_class_of_the_schema_exists_with_its_fields_in_order() -> None:
    assert set(MOSAIC_CLASSES) == set(SCHEMA)
    for tag, (kind, names) in SCHEMA.items():
        cls = getattr(messages, tag)
        assert issubclass(cls, kind), tag
        assert tuple(field.name for field in dataclasses.fields(cls)) == names, tag


def test_package_exports_every_class_and_the_codec() -> None:
    exported = set(messages.__all__)
    assert set(SCHEMA) <= exported
    assert {"Record", "Request", "Response", "Notice", "Message"} <= exported
    assert {"pack", "unpack", "encode_message", "decode_message"} <= exported
    assert all(hasattr(messages, name) for name in messages.__all__)


@pytest.mark.parametrize("tag", sorted(SCHEMA))
def test_every_class_is_a_documented_frozen_slots_dataclass(tag: str) -> None:
    cls = MOSAIC_CLASSES[tag]
    assert cls.__dataclass_params__.frozen  # type: ignore[union-attr]
    assert "__slots__" in cls.__dict__
    assert cls.__doc__ and cls.__doc__.strip()
    assert lookup(tag) is cls


def test_defaults() -> None:
    assert ExperimentStartResponse("r", True).error is None
    assert ExperimentShutdownResponse("r", "done", None, 1, 2).killed == ()
    assert messages.SimulationStopResponse("r", 1, 2).killed == ()
    assert messages.ExperimentRunFinishedNotice("r", "done").error is None


# -- a round trip of every class ---------------------------------------------------------------

_SPACE = space_to_dict(spaces.Box(-1.0, 1.0, (3,)))


def _sample(annotation: Any) -> Any:
    """A valid, non-trivial value for a field annotation."""
    if annotation is str:
        return "slot_0"
    if annotation is int:
        return 2**70  # also beyond 64 bits
    if annotation is bool:
        return True
    if annotation is float:
        return 0.25
    if annotation is Any:
        return {"obs": np.arange(3, dtype=np.float32), "t": (1, np.int64(2)), "n": None}
    if annotation is SensorSpec:
        return SensorSpec("slot_0", _SPACE)
    if annotation is ActuatorSpec:
        return ActuatorSpec("slot_0", space_to_dict(spaces.Discrete(4)))
    if isinstance(annotation, type) and issubclass(annotation, Record):
        return _instance(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return args[-1]
    if origin is dict:
        return {"slot_0": _sample(args[1])}
    if origin is tuple:
        return (_sample(args[0]), _sample(args[0]))
    if type(None) in args:  # X | None: the non-None side is the harder case
        return _sample(next(arg for arg in args if arg is not type(None)))
    if args:  # a union of other types: its last option
        return _sample(args[-1])
    raise AssertionError(f"no sample for {annotation!r}")


def _instance(cls: type) -> Any:
    hints = typing.get_type_hints(cls)
    return cls(**{field.name: _sample(hints[field.name]) for field in dataclasses.fields(cls)})


@pytest.mark.parametrize("tag", sorted(SCHEMA))
def test_every_message_and_record_roundtrips(tag: str) -> None:
    cls = MOSAIC_CLASSES[tag]
    instance = _instance(cls)
    if issubclass(cls, Message):
        correlation_id, decoded = decode_message(encode_message(instance, 17))
        assert correlation_id == 17
    else:
        decoded = unpack(pack(instance))
    assert_identical(instance, decoded)


def test_sensor_spaces_survive_the_wire() -> None:
    box = spaces.Box(np.array([0.0, -np.inf]), np.array([1.0, np.inf]), dtype=np.float64)
    message = EnvironmentStartResponse(
        "env", (SensorSpec("a", space_to_dict(box)),), (ActuatorSpec("a", space_to_dict(box)),)
    )
    _, decoded = decode_message(encode_message(message))
    assert space_from_dict(decoded.sensors[0].space) == box  # type: ignore[attr-defined]


def test_is_terminal() -> None:
    def step(terminated: bool, truncated: bool) -> EnvironmentUpdateResponse:
        return EnvironmentUpdateResponse({}, {}, terminated, truncated, (), {})

    assert not step(False, False).is_terminal
    assert step(True, False).is_terminal
    assert step(False, True).is_terminal


# -- validation --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ValidationProbe(Record):
    """Every supported annotation, for these tests only."""

    text: str
    count: int
    ratio: float
    flag: bool
    blob: bytes
    anything: Any
    maybe: int | None
    either: int | str
    mapping: dict[str, Any]
    items: list[int]
    names: tuple[str, ...]
    specs: tuple[SensorSpec, ...]
    pair: tuple[int, str]
    nested: tuple[tuple[int, ...], ...]
    mode: Literal["train", "test"]
    spec: SensorSpec


def _probe(**changes: Any) -> ValidationProbe:
    values: dict[str, Any] = {
        "text": "t",
        "count": 1,
        "ratio": 0.5,
        "flag": False,
        "blob": b"b",
        "anything": object(),
        "maybe": None,
        "either": "s",
        "mapping": {},
        "items": [1],
        "names": ("a",),
        "specs": (),
        "pair": (1, "x"),
        "nested": ((1,),),
        "mode": "train",
        "spec": SensorSpec("s", {}),
    }
    values.update(changes)
    return ValidationProbe(**values)


def test_valid_values_are_accepted_and_lists_become_tuples() -> None:
    probe = _probe(
        ratio=2, names=["a", "b"], specs=[SensorSpec("s", {})], pair=[1, "x"], nested=[[1, 2], []]
    )
    assert probe.ratio == 2
    assert probe.names == ("a", "b")
    assert type(probe.specs) is tuple and type(probe.pair) is tuple
    assert probe.nested == ((1, 2), ())
    assert type(probe.nested[0]) is tuple


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("text", 1, "str"),
        ("count", True, "int"),  # bool is not an int here
        ("count", 1.0, "int"),
        ("count", np.int64(1), "int"),
        ("ratio", "0.5", "float"),
        ("ratio", False, "float"),
        ("flag", 0, "bool"),
        ("blob", "b", "bytes"),
        ("maybe", "1", "int | None"),
        ("either", 1.5, "int | str"),
        ("mapping", [("a", 1)], "dict"),
        ("items", (1,), "list"),
        ("names", "ab", r"tuple\[str, \.\.\.\]"),
        ("names", ("a", 1), r"tuple\[str, \.\.\.\]"),
        ("specs", (ActuatorSpec("a", {}),), "SensorSpec"),
        ("pair", (1, 2), r"tuple\[int, str\]"),
        ("pair", (1, "x", 3), r"tuple\[int, str\]"),
        ("nested", ((1, "x"),), "tuple"),
        ("mode", "eval", "Literal"),
        ("spec", {"uid": "s", "space": {}}, "SensorSpec"),
    ],
)
def test_wrong_values_raise_field_error_naming_class_field_and_types(
    field: str, value: Any, expected: str
) -> None:
    with pytest.raises(
        MessageFieldError, match=rf"ValidationProbe\.{field}: expected .*{expected}"
    ):
        _probe(**{field: value})


def test_messages_are_frozen() -> None:
    message = messages.PongResponse("a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.uid = "b"  # type: ignore[misc]


# -- registry ----------------------------------------------------------------------------------


def test_duplicate_tag_raises_when_the_class_is_defined() -> None:
    with pytest.raises(TypeError, match="PingRequest"):

        @dataclass(frozen=True, slots=True)
        class PingRequest(Request):  # the clash with mosaic's PingRequest is the point
            """A second class under a taken tag."""

    assert lookup("PingRequest") is messages.PingRequest


def test_lookup_of_unknown_tag() -> None:
    with pytest.raises(UnknownMessageType, match="NoSuchTag"):
        lookup("NoSuchTag")


@dataclass(slots=True)
class NotFrozenProbe(Record):
    """Declared without frozen=True: unusable, and said so."""

    x: int


def test_a_class_that_is_not_frozen_is_refused_on_use() -> None:
    with pytest.raises(TypeError, match="frozen=True, slots=True"):
        NotFrozenProbe(1)
    instance = object.__new__(NotFrozenProbe)
    with pytest.raises(CodecError, match="frozen=True, slots=True"):
        pack(instance)
    # Even then, decoding raises nothing but a CodecError.
    frame = msgpack.packb([msgpack.ExtType(17, b"NotFrozenProbe"), {"x": 1}])
    with pytest.raises(UnknownMessageType, match="frozen=True, slots=True"):
        unpack(frame)
