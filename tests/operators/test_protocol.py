"""The wire protocol: encoding, validation, PNG frames, and the worker runtime in-process."""

from __future__ import annotations

import base64
import io
import json
import sys
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from mosaic.operators import protocol as p
from mosaic.operators.worker.runtime import BasePolicy, InteractiveRuntime, noop_action

pytestmark = pytest.mark.timeout(30)


# --- encoding -------------------------------------------------------------------------------------


def test_encode_line_turns_numpy_into_plain_json() -> None:
    line = p.encode_line({
        "type": "step", "action": np.int64(3), "reward": np.float32(0.5),
        "terminated": np.bool_(True), "obs": np.arange(6, dtype=np.uint8).reshape(2, 3),
        "pair": (1, 2),
    })
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    decoded = json.loads(line)
    assert decoded == {"type": "step", "action": 3, "reward": 0.5, "terminated": True,
                       "obs": [[0, 1, 2], [3, 4, 5]], "pair": [1, 2]}
    assert type(decoded["action"]) is int and type(decoded["terminated"]) is bool


def test_encode_line_keeps_one_line_and_utf8() -> None:
    line = p.encode_line({"type": "error", "message": "zwei\nZeilen, größer"})
    assert line.count(b"\n") == 1
    assert json.loads(line.decode("utf-8"))["message"] == "zwei\nZeilen, größer"
    assert "größer".encode() in line  # UTF-8, not \\u escapes


@pytest.mark.parametrize("value", [b"bytes", {1, 2}, object(), np.array(["a"]),
                                   np.array([object()])])
def test_encode_line_refuses_what_json_cannot_hold(value: Any) -> None:
    with pytest.raises(p.ProtocolError):
        p.encode_line({"type": "pong", "value": value})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(observation=json_values,
       legal=st.none() | st.lists(st.integers(0, 50), max_size=8),
       request_id=st.none() | st.integers(0, 2**40) | st.text(max_size=10))
def test_select_action_commands_round_trip(observation: Any, legal: Any, request_id: Any) -> None:
    command: dict[str, Any] = {"cmd": "select_action", "observation": observation}
    if legal is not None:
        command["legal_actions"] = legal
    if request_id is not None:
        command["id"] = request_id
    assert p.parse_command(p.encode_line(command)) == command


# --- command validation ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", [
    {"cmd": "reset", "seed": 42},
    {"cmd": "reset", "seed": None},
    {"cmd": "reset"},
    {"cmd": "step", "id": 7},
    {"cmd": "stop", "id": "abc"},
    {"cmd": "ping"},
    {"cmd": "init_agent", "player_id": "player_0", "env_name": "pettingzoo", "task": "chess_v6",
     "settings": {"n_actions": 4}},
    {"cmd": "select_action", "observation": {"board": [[0, 1]], "action_mask": [0, 1]},
     "action_mask": [0, 1], "player_id": "white", "info": {"turn": 3}},
])
def test_valid_commands_parse(command: dict[str, Any]) -> None:
    assert p.parse_command(json.dumps(command)) == command


@pytest.mark.parametrize("line, fragment", [
    (b"not json", "not valid JSON"),
    (b"[1, 2]", "JSON object"),
    (b"\xff\xfe", "UTF-8"),
    (b'{"seed": 1}', "'cmd'"),
    (b'{"cmd": "reset", "seed": "42"}', "seed"),
    (b'{"cmd": "reset", "seed": true}', "seed"),
    (b'{"cmd": "step", "id": 1.5}', "'id'"),
    (b'{"cmd": "init_agent"}', "player_id"),
    (b'{"cmd": "select_action"}', "observation"),
    (b'{"cmd": "select_action", "observation": 0, "legal_actions": [1, "2"]}', "legal_actions"),
    (b'{"cmd": "select_action", "observation": 0, "legal_actions": [1], "action_mask": [1]}',
     "not both"),
])
def test_invalid_commands_raise_protocol_errors(line: bytes, fragment: str) -> None:
    with pytest.raises(p.ProtocolError, match=fragment):
        p.parse_command(line)


def test_unknown_command_is_its_own_error() -> None:
    with pytest.raises(p.UnknownCommand) as caught:
        p.parse_command('{"cmd": "dance", "id": 3}')
    assert caught.value.cmd == "dance"


# --- reply validation -----------------------------------------------------------------------------

VALID_REPLIES = [
    {"type": "ready", "run_id": "r", "env_id": "CartPole-v1", "seed": 42,
     "observation_shape": [4]},
    {"type": "ready", "run_id": "", "env_id": "", "seed": None, "observation_shape": None},
    {"type": "step", "step_index": 0, "action": 1, "reward": 1.0, "terminated": False,
     "truncated": False, "episode_reward": 1.0, "id": 2,
     "render_payload": {"mode": "ansi", "text": "x"}},
    {"type": "episode_end", "total_reward": 0.95, "episode_length": 15, "terminated": True,
     "truncated": False},
    {"type": "agent_ready", "player_id": "player_0"},
    {"type": "action_selected", "action": [0.5, -1], "player_id": None,
     "tokens": {"prompt_tokens": 3}},
    {"type": "pong"},
    {"type": "stopped", "id": "x"},
    {"type": "error", "message": "Failed to load policy: FileNotFoundError"},
]


@pytest.mark.parametrize("reply", VALID_REPLIES)
def test_valid_replies_parse(reply: dict[str, Any]) -> None:
    assert p.parse_response(p.encode_line(reply)) == reply


@pytest.mark.parametrize("reply, fragment", [
    ({"type": "episode_done", "total_reward": 1.0}, "unknown reply type"),
    ({"message": "no type"}, "'type'"),
    ({"type": "ready", "run_id": "r", "env_id": "e", "seed": 1}, "observation_shape"),
    ({"type": "step", "step_index": -1, "action": 0, "reward": 0.0, "terminated": False,
      "truncated": False, "episode_reward": 0.0}, "negative"),
    ({"type": "step", "step_index": 0, "action": 0, "reward": True, "terminated": False,
      "truncated": False, "episode_reward": 0.0}, "reward"),
    ({"type": "step", "step_index": 0, "action": 0, "reward": 0.0, "terminated": 0,
      "truncated": False, "episode_reward": 0.0}, "terminated"),
    ({"type": "step", "step_index": 0, "reward": 0.0, "terminated": False, "truncated": False,
      "episode_reward": 0.0}, "action"),
    ({"type": "episode_end", "total_reward": 1.0, "episode_length": 2.0, "terminated": True,
      "truncated": False}, "episode_length"),
    ({"type": "error"}, "message"),
    ({"type": "agent_ready", "player_id": 0}, "player_id"),
])
def test_invalid_replies_raise_protocol_errors(reply: dict[str, Any], fragment: str) -> None:
    with pytest.raises(p.ProtocolError, match=fragment):
        p.parse_response(json.dumps(reply))


# --- PNG frames -----------------------------------------------------------------------------------


def decode_png(data: bytes) -> np.ndarray:
    """``data`` read by Pillow, which checks the signature and every chunk's CRC."""
    from PIL import Image

    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(io.BytesIO(data), formats=["PNG"]) as image:
        image.load()
        assert image.mode in ("L", "RGB", "RGBA")  # 8 bits a channel
        return np.asarray(image)


@pytest.mark.parametrize("shape", [(5, 7, 3), (3, 2, 4), (4, 6)])
def test_png_round_trips(shape: tuple[int, ...]) -> None:
    frame = np.random.default_rng(0).integers(0, 256, shape, dtype=np.uint8)
    assert np.array_equal(decode_png(p.encode_png(frame)), frame)


def test_rgb_payload_is_a_base64_png_not_a_nested_list() -> None:
    frame = np.zeros((64, 48, 3), np.uint8)
    frame[10:20, 5:9] = (255, 0, 0)
    payload = p.rgb_payload(frame)
    assert payload["mode"] == "rgb_png_base64"
    assert (payload["width"], payload["height"]) == (48, 64)
    assert np.array_equal(decode_png(base64.b64decode(payload["png"])), frame)
    assert len(p.encode_line(payload)) < 1000  # compressed, versus ~30 kB as JSON lists


def test_png_refuses_other_shapes() -> None:
    with pytest.raises(ValueError):
        p.encode_png(np.zeros((2, 2, 2), np.uint8))


def test_a_cartpole_frame_round_trips_through_pillow_at_every_level() -> None:
    env = gym.make("CartPole-v1", render_mode="rgb_array")
    try:
        env.reset(seed=0)
        frame = env.render()
    finally:
        env.close()
    fast, small = p.encode_png(frame, level=1), p.encode_png(frame, level=9)
    assert np.array_equal(decode_png(fast), frame) and np.array_equal(decode_png(small), frame)
    assert len(small) < len(fast)


def test_frames_that_are_not_uint8_are_clipped() -> None:
    frame = np.array([[-5.0, 0.4], [254.6, 300.0]])
    assert decode_png(p.encode_png(frame)).tolist() == [[0, 0], [254, 255]]


def test_without_pillow_a_frame_names_the_images_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from mosaic.core.errors import MissingExtra
    from mosaic.operators.worker.runtime import make_env

    monkeypatch.setitem(sys.modules, "PIL", None)  # what an install without Pillow imports
    with pytest.raises(MissingExtra, match=r"PNG needs Pillow.*pip install 'mosaic\[images\]'"):
        p.rgb_payload(np.zeros((4, 4, 3), np.uint8))
    with pytest.raises(MissingExtra, match=r"mosaic\[images\]"):  # at start, not at a frame
        make_env("FrozenLake-v1", render_every=1)  # auto: it renders images
    make_env("FrozenLake-v1", render_every=1, render_mode="ansi").close()  # text: no Pillow


# --- the runtime, in-process ----------------------------------------------------------------------


class ListPolicy(BasePolicy):
    """Plays a fixed list of actions; records what it was given."""

    reproducible = True

    def __init__(self, actions: list[Any], fail_at: int | None = None) -> None:
        self.actions = actions
        self.fail_at = fail_at
        self.calls = 0
        self.seeds: list[int | None] = []
        self.results: list[tuple[Any, float, bool, bool]] = []

    def reset(self, seed: int | None) -> None:
        self.seeds.append(seed)
        self.calls = 0

    def select_action(self, observation: Any, legal_actions: Any = None,
                      action_space: Any = None) -> Any:
        self.calls += 1
        if self.fail_at is not None and self.calls == self.fail_at:
            raise RuntimeError("policy exploded")
        return self.actions[(self.calls - 1) % len(self.actions)]

    def on_step_result(self, observation: Any, action: Any, reward: float, terminated: bool,
                       truncated: bool) -> None:
        self.results.append((action, reward, terminated, truncated))


def serve(runtime_kwargs: dict[str, Any], commands: list[Any]) -> tuple[int, list[dict[str, Any]]]:
    lines = b"".join(c if isinstance(c, bytes) else p.encode_line(c) for c in commands)
    out = io.BytesIO()
    runtime = InteractiveRuntime(stdin=io.BytesIO(lines), stdout=out, **runtime_kwargs)
    code = runtime.serve()
    return code, [json.loads(line) for line in out.getvalue().splitlines()]


# Right, down, right, down, down, right... reaches the goal of the 4x4 map in 6 steps.
TO_GOAL = [1, 1, 2, 1, 2, 2]


def frozen_lake(**kwargs: Any) -> gym.Env:
    return gym.make("FrozenLake-v1", is_slippery=False, **kwargs)


def test_runtime_reset_step_episode_end_order() -> None:
    policy = ListPolicy(TO_GOAL)
    commands: list[Any] = [{"cmd": "reset", "seed": 5, "id": "r"}]
    commands += [{"cmd": "step", "id": i} for i in range(6)]
    commands += [{"cmd": "step", "id": 99}, {"cmd": "stop", "id": "s"},
                 {"cmd": "ping", "id": "never"}]
    code, replies = serve({"policy": policy, "env": frozen_lake(), "env_id": "FrozenLake-v1",
                           "run_id": "run-1"}, commands)
    assert code == 0
    assert replies[0] == {"type": "ready", "run_id": "run-1", "env_id": "FrozenLake-v1",
                          "seed": 5, "observation_shape": [], "reproducible": True, "id": "r"}
    steps = replies[1:7]
    assert [s["type"] for s in steps] == ["step"] * 6
    assert [s["step_index"] for s in steps] == list(range(6))
    assert [s["id"] for s in steps] == list(range(6))
    assert [s["action"] for s in steps] == TO_GOAL
    assert steps[-1]["terminated"] and steps[-1]["reward"] == 1.0
    assert replies[7] == {"type": "episode_end", "total_reward": 1.0, "episode_length": 6,
                          "terminated": True, "truncated": False, "id": 5}
    assert replies[8]["type"] == "error" and "send reset" in replies[8]["message"]
    assert replies[8]["id"] == 99
    assert replies[9] == {"type": "stopped", "id": "s"}
    assert len(replies) == 10  # nothing is read after stop
    assert policy.seeds == [5] and policy.results[-1] == (2, 1.0, True, False)


def test_runtime_answers_bad_lines_and_errors_and_keeps_going() -> None:
    policy = ListPolicy([0], fail_at=2)
    commands = [b"garbage\n", b'{"cmd": "fly", "id": 4}\n', b'{"cmd": "step", "id": 5}\n',
                {"cmd": "reset", "seed": 1}, {"cmd": "step", "id": 6}, {"cmd": "step", "id": 7},
                {"cmd": "step", "id": 8}, b'{"cmd": "reset", "seed": "x", "id": 9}\n',
                {"cmd": "ping", "id": 10}]
    code, replies = serve({"policy": policy, "env": frozen_lake()}, commands)
    assert code == 0  # EOF after the ping
    kinds = [(r["type"], r.get("id")) for r in replies]
    assert kinds == [("error", None), ("error", 4), ("error", 5), ("ready", None), ("step", 6),
                     ("error", 7), ("step", 8), ("error", 9), ("pong", 10)]
    assert "policy exploded" in replies[5]["message"]
    assert replies[6]["step_index"] == 1  # the failed step was not counted


def test_runtime_max_steps_truncates_and_renders_ansi() -> None:
    env = frozen_lake(render_mode="ansi")
    commands = [{"cmd": "reset", "seed": 0}] + [{"cmd": "step"}] * 3
    _code, replies = serve({"policy": ListPolicy([0]), "env": env, "max_steps": 3,
                            "render_every": 2, "send_observations": True}, commands)
    assert replies[0]["render_payload"]["mode"] == "ansi"
    assert "S" in replies[0]["render_payload"]["text"] and replies[0]["observation"] == 0
    steps = [r for r in replies if r["type"] == "step"]
    assert ["render_payload" in s for s in steps] == [True, False, True]  # every 2nd and last
    assert [s["truncated"] for s in steps] == [False, False, True]
    assert replies[-1] == {"type": "episode_end", "total_reward": 0.0, "episode_length": 3,
                           "terminated": False, "truncated": True}


class RGBEnv(gym.Env):
    """A tiny environment whose frames are RGB arrays."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"]}
    render_mode = "rgb_array"
    observation_space = spaces.Discrete(1)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[int, dict]:
        super().reset(seed=seed)
        self.t = 0
        return 0, {"action_mask": np.array([0, 1], np.int8)}

    def step(self, action: int) -> tuple[int, float, bool, bool, dict]:
        self.t += 1
        return 0, 0.5, self.t >= 2, False, {"action_mask": np.array([1, 0], np.int8)}

    def render(self) -> np.ndarray:
        frame = np.zeros((8, 10, 3), np.uint8)
        frame[:, : self.t + 1] = 200
        return frame


def test_runtime_sends_png_frames_and_honours_action_masks() -> None:
    seen: list[Any] = []

    class Recorder(BasePolicy):
        def select_action(self, observation: Any, legal_actions: Any = None,
                          action_space: Any = None) -> Any:
            seen.append(legal_actions)
            return legal_actions[0]

    commands = [{"cmd": "reset", "seed": 0}, {"cmd": "step"}, {"cmd": "step"}]
    _, replies = serve({"policy": Recorder(), "env": RGBEnv(), "render_every": 1}, commands)
    assert seen == [[1], [0]]
    frame = decode_png(base64.b64decode(replies[2]["render_payload"]["png"]))
    assert frame.shape == (8, 10, 3) and frame[0, 2, 0] == 200 and frame[0, 3, 0] == 0
    assert replies[-1]["type"] == "episode_end" and replies[-1]["total_reward"] == 1.0


def test_runtime_rejects_an_illegal_action_from_the_policy() -> None:
    commands = [{"cmd": "select_action", "observation": [1, 2], "legal_actions": [1, 2],
                 "id": 1},
                {"cmd": "select_action", "observation": {"action_mask": [0, 0, 1]}, "id": 2}]
    _, replies = serve({"policy": ListPolicy([0, 2])}, commands)
    assert replies[0]["type"] == "error" and "not a legal action" in replies[0]["message"]
    assert replies[1] == {"type": "action_selected", "action": 2, "player_id": None, "id": 2}


def test_agent_mode_init_and_seed() -> None:
    policy = ListPolicy([3])
    commands = [{"cmd": "init_agent", "player_id": "p1", "settings": {"n_actions": 4, "seed": 9}},
                {"cmd": "select_action", "observation": 0},
                {"cmd": "step", "id": 1}, {"cmd": "reset", "seed": 2}]
    _, replies = serve({"policy": policy}, commands)
    assert replies[0] == {"type": "agent_ready", "player_id": "p1", "reproducible": True}
    assert replies[1] == {"type": "action_selected", "action": 3, "player_id": "p1"}
    assert replies[2]["type"] == "error" and "no environment" in replies[2]["message"]
    assert replies[3]["type"] == "ready" and replies[3]["observation_shape"] is None
    assert policy.seeds == [9, 2]


def test_noop_action_per_space() -> None:
    assert noop_action(spaces.Discrete(3, start=-1)) == -1
    assert noop_action(None, [2, 3]) == 2 and noop_action(None, [3, 0]) == 0
    box = noop_action(spaces.Box(low=np.array([1.0, -1.0], np.float32),
                                   high=np.array([2.0, 1.0], np.float32)))
    assert box.tolist() == [1.0, 0.0]
    assert noop_action(spaces.MultiBinary(3)).tolist() == [0, 0, 0]
    with pytest.raises(ValueError):
        noop_action(None)
