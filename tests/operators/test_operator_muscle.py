"""OperatorMuscle: in-process operators, real worker subprocesses, and how failures surface."""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from mosaic.agents import MuscleContext, Slot
from mosaic.core.errors import ConfigError, MosaicError
from mosaic.experiment import load_experiment
from mosaic.operators import OperatorError, OperatorMuscle

from .llm_server import LLMTestServer, Reply

pytestmark = pytest.mark.timeout(60)

#: A worker that speaks the protocol in agent mode (always action 0) until select_action number
#: ``N`` (argv[2]); then, by argv[1]: ``crash`` (stderr line, exit 3), ``hang`` (no reply, ever) or
#: ``garbage`` (a line that is not JSON).
FAKE_WORKER = '''\
import json, sys, time
mode, limit = sys.argv[1], int(sys.argv[2])
selects = 0
def reply(command, kind, **fields):
    sys.stdout.write(json.dumps({"type": kind, "id": command.get("id"), **fields}) + "\\n")
    sys.stdout.flush()
for line in sys.stdin:
    command = json.loads(line)
    cmd = command["cmd"]
    if cmd == "stop":
        reply(command, "stopped")
        break
    if cmd == "init_agent":
        reply(command, "agent_ready", player_id=command["player_id"])
    elif cmd == "reset":
        reply(command, "ready", run_id="", env_id="", seed=command.get("seed"),
              observation_shape=None)
    elif cmd == "select_action":
        selects += 1
        if selects >= limit and mode == "crash":
            sys.stderr.write("fatal: the fake worker gave up\\n")
            sys.exit(3)
        if selects >= limit and mode == "hang":
            while True:
                time.sleep(0.05)
        if selects >= limit and mode == "garbage":
            sys.stdout.write("this is not JSON\\n")
            sys.stdout.flush()
            continue
        reply(command, "action_selected", action=0)
'''


def fake_worker(folder: Path, mode: str, limit: int) -> list[str]:
    """The argv of :data:`FAKE_WORKER`, written to ``folder``."""
    script = folder / "fake_worker.py"
    script.write_text(FAKE_WORKER)
    return [sys.executable, str(script), mode, str(limit)]


# --- helpers -------------------------------------------------------------------------------------


def context(params: dict[str, Any], *, seed: int = 7,
            action_space: gymnasium.Space[Any] | None = None,
            observation_space: gymnasium.Space[Any] | None = None,
            slots: tuple[str, ...] = ("agent_0",)) -> MuscleContext:
    action_space = action_space if action_space is not None else spaces.Discrete(4)
    observation_space = (observation_space if observation_space is not None
                         else spaces.Discrete(16))
    return MuscleContext(
        agent="player", muscle="player@lake", environment="lake",
        slots={uid: Slot(uid, observation_space, action_space) for uid in slots},
        seed=seed, params=params)


@pytest.fixture
def muscles(process_tag: str) -> Iterator[Callable[[MuscleContext], OperatorMuscle]]:
    """Set up muscles; every one is torn down at the end, also when the test fails, before
    ``process_tag`` checks that no worker outlived the test."""
    made: list[OperatorMuscle] = []

    def setup(ctx: MuscleContext) -> OperatorMuscle:
        muscle = OperatorMuscle()
        made.append(muscle)
        muscle.setup(ctx)
        return muscle

    yield setup
    for muscle in made:
        muscle.teardown()


def play(muscle: OperatorMuscle, episodes: int, steps: int,
         mask: Any = None, slot: str = "agent_0") -> list[list[Any]]:
    """Actions of ``episodes`` episodes of ``steps`` steps each (observations are step numbers)."""
    played = []
    for _ in range(episodes):
        muscle.reset()
        actions = []
        for step in range(steps):
            actions.append(muscle.act(slot, step, mask))
            muscle.feedback(slot, 1.0, False, step == steps - 1, step + 1)
        played.append(actions)
    return played


# Operators for the in-process tests, named by import path.


def double_the_observation(observation: Any, legal_actions: Any) -> Any:
    """Scripted: the observation times two, or the last legal action when there is a list."""
    return legal_actions[-1] if legal_actions else 2 * int(observation)


class Recorder:
    """An operator that records every call it receives and answers ``answers`` in turn."""

    made: ClassVar[list[Recorder]] = []

    def __init__(self, action_space: gymnasium.Space[Any], seed: int, operator_id: str, *,
                 answers: list[Any] | None = None, label: str = "") -> None:
        self.action_space = action_space
        self.seed = seed
        self._id = operator_id
        self.answers = list(answers or [1])
        self.label = label
        self.calls: list[tuple[Any, ...]] = []
        self.selects = 0
        Recorder.made.append(self)

    @property
    def id(self) -> str:
        return self._id

    @property
    def name(self) -> str:
        return f"recorder {self.label}"

    def select_action(self, observation: Any, legal_actions: Any = None) -> Any:
        self.calls.append(("select_action", observation, legal_actions))
        self.selects += 1
        return self.answers[(self.selects - 1) % len(self.answers)]

    def reset(self, seed: int | None = None) -> None:
        self.calls.append(("reset", seed))

    def on_step_result(self, observation: Any, action: Any, reward: float, terminated: bool,
                       truncated: bool) -> None:
        self.calls.append(("on_step_result", observation, action, reward, terminated, truncated))

    def on_episode_end(self, summary: Any) -> None:
        self.calls.append(("on_episode_end", summary.episode_index, summary.total_reward,
                           summary.steps))


class Exploding(Recorder):
    def select_action(self, observation: Any, legal_actions: Any = None) -> Any:
        raise RuntimeError("the operator's model is not loaded")


def not_an_operator() -> object:
    return object()


RECORDER = f"{__name__}:Recorder"


# --- in-process operators ------------------------------------------------------------------------


def test_random_shorthand_is_reproducible_from_the_muscle_seed(muscles: Callable) -> None:
    first = play(muscles(context({"operator": {"class": "random"}}, seed=3)), 3, 30)
    again = play(muscles(context({"operator": {"class": "random"}}, seed=3)), 3, 30)
    other = play(muscles(context({"operator": "random"}, seed=4)), 3, 30)
    assert first == again
    assert first != other
    assert {a for episode in first for a in episode} == {0, 1, 2, 3}
    assert all(isinstance(a, int) for episode in first for a in episode)
    # Each episode is reset on a new seed, so episodes differ.
    assert first[0] != first[1]


def test_the_action_mask_becomes_the_legal_actions(muscles: Callable) -> None:
    muscle = muscles(context({"operator": {"class": "random"}}))
    [actions] = play(muscle, 1, 40, mask=np.array([0, 1, 0, 1], dtype=np.int8))
    assert set(actions) == {1, 3}
    scripted = muscles(context({"operator": {
        "class": "scripted", "function": f"{__name__}:double_the_observation"}}))
    scripted.reset()
    assert scripted.act("agent_0", 1, np.array([1, 1, 1, 0], dtype=np.int8)) == 2
    assert scripted.act("agent_0", 1, None) == 2
    assert scripted.act("agent_0", 0, None) == 0


def test_a_discrete_space_with_a_start_offsets_the_mask(muscles: Callable) -> None:
    muscle = muscles(context({"operator": {"class": RECORDER, "params": {"answers": [11]}}},
                             action_space=spaces.Discrete(3, start=10)))
    muscle.reset()
    assert muscle.act("agent_0", 0, np.array([0, 1, 1])) == 11
    assert Recorder.made[-1].calls[-1] == ("select_action", 0, [11, 12])


def test_scripted_shorthand_follows_its_function(muscles: Callable) -> None:
    muscle = muscles(context({"operator": {
        "class": "scripted", "function": f"{__name__}:double_the_observation"}},
        action_space=spaces.Discrete(10)))
    assert play(muscle, 1, 5) == [[0, 2, 4, 6, 8]]


@pytest.mark.parametrize(("space", "mask", "params", "expected"), [
    (spaces.Discrete(3), None, {}, 0),
    (spaces.Discrete(3), np.array([0, 1, 1]), {}, 1),
    (spaces.Discrete(3), None, {"noop_action": 2}, 2),
    (spaces.Box(-1.0, 1.0, (2,), np.float32), None, {}, [0.0, 0.0]),
])
def test_none_from_the_operator_is_the_documented_noop(
    muscles: Callable, space: gymnasium.Space[Any], mask: Any, params: dict[str, Any],
    expected: Any,
) -> None:
    muscle = muscles(context({"operator": {"class": "passive"}, **params}, action_space=space))
    muscle.reset()
    action = muscle.act("agent_0", 0, mask)
    assert space.contains(action)
    assert np.array_equal(action, expected)


def test_a_factory_gets_params_and_what_its_signature_names(muscles: Callable) -> None:
    Recorder.made.clear()
    space = spaces.Discrete(4)
    params = {"operator": {"class": RECORDER, "id": "rec", "params": {"answers": [3, 2],
                                                                      "label": "x"}}}
    muscle = muscles(context(params, action_space=space))
    [recorder] = Recorder.made
    assert recorder.action_space is space and recorder.label == "x" and recorder.id == "rec"
    assert isinstance(recorder.seed, int)
    assert muscle.operators == {"agent_0": recorder}
    assert play(muscle, 2, 2) == [[3, 2], [3, 2]]
    calls = recorder.calls
    assert [c[0] for c in calls] == ["reset", "select_action", "on_step_result",
                                     "select_action", "on_step_result", "on_episode_end"] * 2
    # on_step_result gets the action it chose and the environment's answer to it.
    assert calls[2] == ("on_step_result", 1, 3, 1.0, False, False)
    assert calls[4] == ("on_step_result", 2, 2, 1.0, False, True)
    assert calls[5] == ("on_episode_end", 0, 2.0, 2) and calls[11] == ("on_episode_end", 1, 2.0, 2)
    # The episode seeds come from the muscle's own seed: the same seed gives the same ones.
    seeds = [c[1] for c in calls if c[0] == "reset"]
    again = muscles(context(params, action_space=space))
    play(again, 2, 2)
    assert [c[1] for c in Recorder.made[-1].calls if c[0] == "reset"] == seeds
    assert seeds[0] != seeds[1]


def test_several_slots_get_an_operator_each(muscles: Callable) -> None:
    Recorder.made.clear()
    muscle = muscles(context({"operator": {"class": RECORDER}}, slots=("p0", "p1")))
    assert sorted(op.id for op in muscle.operators.values()) == ["player.p0", "player.p1"]
    assert len({op.seed for op in Recorder.made}) == 2


def test_an_operator_that_raises_fails_with_its_name_and_cause(muscles: Callable) -> None:
    muscle = muscles(context({"operator": {"class": f"{__name__}:Exploding", "id": "boom"}}))
    muscle.reset()
    with pytest.raises(OperatorError) as raised:
        muscle.act("agent_0", 0)
    message = str(raised.value)
    assert "operator 'boom'" in message and "the operator's model is not loaded" in message
    assert "RuntimeError" in message and "agent_0" in message
    assert raised.value.operator_id == "boom"


@pytest.mark.parametrize("answer", [7, -1, True, "left", 1.5])
def test_an_action_outside_the_space_is_an_operator_error(muscles: Callable, answer: Any) -> None:
    muscle = muscles(context({"operator": {"class": RECORDER, "params": {"answers": [answer]}}}))
    muscle.reset()
    with pytest.raises(OperatorError, match="not in the action space Discrete"):
        muscle.act("agent_0", 0)


@pytest.mark.parametrize(("operator", "key", "fragment"), [
    (None, "", "expected a mapping with 'class' or 'type', got an empty value"),
    ({"class": "random", "type": "llm"}, "", "exactly one of 'class' (an in-process"),
    ({"class": "randm"}, ".class", "expected random, passive, scripted or an import path"),
    ({"class": "scripted"}, ".function", "required key is missing for class 'scripted'"),
    ({"class": "random", "function": "a.b:c"}, ".function", "goes with class 'scripted' only"),
    ({"class": "random", "colour": "red"}, ".colour", "unknown key 'colour'"),
    ({"class": "random", "params": {"p": 1}}, ".params", "'random' operator takes no params"),
    ({"type": "gpt"}, ".type", "expected one of random, passive, scripted, rl, llm"),
    ({"type": "command"}, ".command", "required key is missing for type 'command'"),
    ({"type": "llm", "command": "python worker.py"}, ".command", "as a list, got the text"),
    ({"type": "random", "settings": {"n_actions": 4}}, ".settings.n_actions",
     "unknown key 'n_actions' (hint: the muscle tells the worker the number of actions"),
])
def test_bad_params_are_reported_by_key(muscles: Callable, operator: Any, key: str,
                                        fragment: str) -> None:
    with pytest.raises(MosaicError) as raised:
        muscles(context({"operator": operator}))
    assert str(raised.value).startswith(f"OperatorMuscle player@lake: params.operator{key}: ")
    assert fragment in str(raised.value)
    assert not isinstance(raised.value, OperatorError)  # nothing was started


def test_bad_params_are_worded_as_when_the_experiment_file_is_loaded(
    muscles: Callable, tmp_path: Path,
) -> None:
    path = tmp_path / "experiment.yml"
    path.write_text(
        "uid: bad\n"
        "environments: [{uid: lake, env: 'gymnasium:FrozenLake-v1'}]\n"
        "agents:\n"
        "  - uid: player\n"
        "    muscle:\n"
        "      class: mosaic.operators:OperatorMuscle\n"
        "      params: {operator: {type: lmm}, timeout: 0}\n")
    with pytest.raises(ConfigError) as loading:
        load_experiment(path)
    with pytest.raises(MosaicError) as setting_up:
        muscles(context({"operator": {"type": "lmm"}, "timeout": 0}))
    at_load = [f"{p.location.removeprefix('agents[0].muscle.')}: {p.message} (hint: {p.hint})"
               if p.hint else f"{p.location.removeprefix('agents[0].muscle.')}: {p.message}"
               for p in loading.value.problems]
    assert str(setting_up.value).splitlines() == [
        f"OperatorMuscle player@lake: {problem}" for problem in at_load]
    assert "did you mean 'llm'?" in str(setting_up.value)


@pytest.mark.parametrize(("params", "fragment"), [
    ({"operator": {"class": f"{__name__}:not_an_operator"}}, "not an Operator"),
    ({"operator": {"class": f"{__name__}:Nowhere"}}, "has no attribute 'Nowhere'"),
    ({"operator": {"class": "scripted", "function": "no_such_module:fn"}}, "no_such_module"),
])
def test_an_operator_that_cannot_be_built_fails_at_setup(
    muscles: Callable, params: dict[str, Any], fragment: str,
) -> None:
    with pytest.raises(OperatorError, match="failed to start") as raised:
        muscles(context(params))
    assert fragment in str(raised.value)


@pytest.mark.parametrize("timeout", [0, -1.5, True, "10", None])
def test_a_bad_timeout_is_rejected(muscles: Callable, timeout: Any) -> None:
    with pytest.raises(MosaicError, match=r"params\.timeout: expected a number of seconds > 0"):
        muscles(context({"operator": "random", "timeout": timeout}))


def test_keys_the_muscle_does_not_know_are_left_to_the_brain(muscles: Callable) -> None:
    muscle = muscles(context({"operator": "random", "learning_rate": 0.1, "layers": [64, 64]}))
    assert [op.id for op in muscle.operators.values()] == ["player"]


def test_every_public_name_of_the_package_resolves() -> None:
    import mosaic.operators as package

    for name in package.__all__:  # each is the object its home module exports
        home = importlib.import_module(package._HOMES[name])
        assert name in home.__all__ and getattr(package, name) is getattr(home, name)
    assert package.OperatorMuscle is OperatorMuscle
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        package.Nope  # noqa: B018


def test_importing_the_muscle_does_not_load_pydantic_or_script_mode() -> None:
    code = (
        "import sys\n"
        "from mosaic.core.imports import import_object\n"
        "import_object('mosaic.operators:OperatorMuscle')\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('pydantic', 'yaml', 'sqlalchemy')"
        " or m.startswith(('mosaic.operators.script', 'mosaic.operators.manual'))]\n"
        "print(heavy)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=30, check=True)
    assert result.stdout.strip() == "[]"


# --- worker operators ----------------------------------------------------------------------------


def test_a_random_worker_plays_reproducibly_and_is_stopped(
    muscles: Callable,
) -> None:
    params = {"operator": {"type": "random", "id": "dice"}}
    first = muscles(context(params, seed=5))
    [worker] = first.operators.values()
    pid = worker.handle.pid
    actions = play(first, 2, 25)
    again = play(muscles(context(params, seed=5)), 2, 25)
    other = play(muscles(context(params, seed=6)), 2, 25)
    assert actions == again and actions != other
    assert {a for episode in actions for a in episode} == {0, 1, 2, 3}  # n_actions reached it
    [masked] = play(first, 1, 30, mask=np.array([1, 0, 0, 1], dtype=np.int8))
    assert set(masked) == {0, 3}
    first.teardown()
    assert worker.handle.exit_code == 0 and worker.handle.stop_outcome == "stopped"
    assert not Path(f"/proc/{pid}").exists()


@pytest.fixture
def llm_server() -> Iterator[LLMTestServer]:
    with LLMTestServer(default=Reply("I choose 2")) as server:
        yield server


def test_an_llm_worker_chooses_and_falls_back_on_bad_replies(
    muscles: Callable, llm_server: LLMTestServer,
) -> None:
    llm_server.add(Reply("<think>left?</think> I pick 3"), Reply(raw=b"this is not json"),
                   Reply("server on fire", status=500), Reply("Action 1, obviously"))
    muscle = muscles(context({
        "operator": {"type": "llm", "id": "llm", "task": "FrozenLake-v1", "settings": {
            "base_url": llm_server.base_url, "model": "test-model", "fallback": "first-legal",
            "max_retries": 0,  # one scripted reply per action
            "action_names": ["left", "down", "right", "up"]}},
        "timeout": 10}))
    muscle.reset()
    mask = np.array([0, 1, 1, 1], dtype=np.int8)
    actions = [muscle.act("agent_0", 6, mask) for _ in range(4)]
    # 3 from the model, then the first legal action twice (malformed body, HTTP 500), then 1.
    assert actions == [3, 1, 1, 1]
    assert muscle.act("agent_0", 6, None) == 2  # the default reply; all of Discrete(4) is legal
    assert len(llm_server.requests) == 5
    body = llm_server.requests[0]
    assert body["model"] == "test-model"
    assert "FrozenLake-v1" in body["messages"][0]["content"]
    prompt = body["messages"][-1]["content"]
    assert "You are agent_0" in prompt and "Observation: 6" in prompt
    assert "Legal actions: 1 (down), 2 (right), 3 (up)" in prompt
    assert ("Legal actions: 0 (left), 1 (down), 2 (right), 3 (up)"
            in llm_server.requests[4]["messages"][-1]["content"])


def test_a_slow_endpoint_gets_the_fallback_before_the_muscle_times_out(
    muscles: Callable,
) -> None:
    with LLMTestServer(default=Reply("1", delay=5.0)) as server:
        muscle = muscles(context({
            "operator": {"type": "llm", "settings": {
                "base_url": server.base_url, "model": "m", "fallback": "first-legal"}},
            "timeout": 2}))
        muscle.reset()
        assert muscle.act("agent_0", 0, np.array([0, 0, 1, 1])) == 2


@pytest.mark.parametrize(("mode", "cause"), [
    ("crash", "exited with code 3; stderr: fatal: the fake worker gave up"),
    ("hang", "sent no reply within 1.00 s"),
    ("garbage", "malformed reply"),
])
def test_a_failing_worker_is_an_operator_error_naming_it(
    muscles: Callable, tmp_path: Path, mode: str, cause: str,
) -> None:
    muscle = muscles(context({
        "operator": {"type": "command", "id": "flaky", "command": fake_worker(tmp_path, mode, 3)},
        "timeout": 1, "stop_timeout": 1}))
    muscle.reset()
    assert [muscle.act("agent_0", 0) for _ in range(2)] == [0, 0]
    with pytest.raises(OperatorError) as raised:
        muscle.act("agent_0", 0)
    message = str(raised.value)
    assert message.startswith("operator 'flaky' (command worker, pid ")
    assert "failed to select an action for slot 'agent_0'" in message and cause in message
    # teardown (by the fixture) stops the worker; process_tag checks that none is left.


def test_a_worker_that_does_not_start_leaves_nothing_behind(
    tmp_path: Path, process_tag: str,
) -> None:
    hang = Path(__file__).parent / "misbehaving" / "hang.py"
    muscle = OperatorMuscle()
    expected = r"'silent\.p0' .* failed to start: .*no reply within 0\.50"
    with pytest.raises(OperatorError, match=expected):
        muscle.setup(context({
            "operator": {"type": "command", "id": "silent", "command": [sys.executable, str(hang)]},
            "start_timeout": 0.5, "stop_timeout": 1}, slots=("p0", "p1")))
    # setup stopped both workers itself: teardown is not called after a failed setup.


def test_a_worker_that_cannot_be_launched_is_an_operator_error(muscles: Callable) -> None:
    with pytest.raises(OperatorError, match=r"'ghost' .* failed to start: could not start"):
        muscles(context({"operator": {"type": "command", "id": "ghost",
                                      "command": ["/nonexistent/worker"]}}))
