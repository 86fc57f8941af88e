"""The experiment schema: defaults, resolution into run configs, seeds, and name resolution."""

from __future__ import annotations

import importlib
import itertools
import json
import re
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from mosaic.agents import Brain, Muscle, NoOpBrain, RandomMuscle
from mosaic.core.errors import ConfigError
from mosaic.core.imports import (
    ImportPathError,
    import_object,
    parse_env_reference,
    resolve_class,
    resolve_env,
)
from mosaic.experiment import Experiment, load_experiment
from mosaic.messages import (
    ComponentSpec,
    RunTimeouts,
    SimulationStartRequest,
    decode_message,
    encode_message,
)

MINIMAL = """\
uid: minimal
environments:
  - uid: cartpole
    env: gymnasium:CartPole-v1
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
"""

_counter = itertools.count()


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str], Path]:
    """Write an experiment file and return its path."""

    def _write(text: str) -> Path:
        path = tmp_path / f"exp{next(_counter)}.yml"
        path.write_text(textwrap.dedent(text))
        return path

    return _write


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], str]]:
    """Write a module of user code on sys.path and return its name; forget it afterwards."""
    names: list[str] = []
    monkeypatch.syspath_prepend(str(tmp_path))

    def _module(source: str) -> str:
        name = f"mosaic_user_module_{next(_counter)}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        importlib.invalidate_caches()
        names.append(name)
        return name

    yield _module
    for name in names:
        sys.modules.pop(name, None)


def _is_plain(value: Any) -> bool:
    if value is None or isinstance(value, str | bool | int | float):
        return type(value) in (type(None), str, bool, int, float)
    if isinstance(value, list) and type(value) is list:
        return all(_is_plain(item) for item in value)
    if isinstance(value, dict) and type(value) is dict:
        return all(isinstance(k, str) and _is_plain(v) for k, v in value.items())
    return False


class TestDefaults:
    def test_defaults_apply(self, write: Callable[[str], Path]) -> None:
        path = write(MINIMAL)
        experiment = load_experiment(path)
        assert (experiment.seed, experiment.runs, experiment.episodes) == (0, 1, 1)
        assert experiment.max_steps is None
        assert (experiment.mode, experiment.placement) == ("train", "thread")
        assert (experiment.transport, experiment.host) == ("ipc", "127.0.0.1")
        assert experiment.store.path is None and experiment.store.record_steps == "all"
        timeouts = experiment.timeouts
        assert (timeouts.setup, timeouts.step, timeouts.shutdown, timeouts.heartbeat) == (
            30.0, 60.0, 5.0, 2.5)
        agent = experiment.agents[0]
        assert agent.brain.class_path == "mosaic.agents:NoOpBrain"
        assert agent.params == {} and agent.muscle.params == {}
        assert experiment.environments[0].params == {}
        assert experiment.store_path == path.resolve().with_suffix(".sqlite")

    def test_experiment_is_frozen(self, write: Callable[[str], Path]) -> None:
        experiment = load_experiment(write(MINIMAL))
        with pytest.raises(ValidationError):
            experiment.runs = 3

    def test_integer_seconds_are_accepted(self, write: Callable[[str], Path]) -> None:
        experiment = load_experiment(write(MINIMAL + "timeouts: {setup: 2, step: 0.5}\n"))
        assert experiment.timeouts.setup == 2.0
        assert isinstance(experiment.timeouts.setup, float)

    @pytest.mark.parametrize(
        ("line", "location"),
        [
            ("episodes: true", "episodes"),
            ("seed: 1.0", "seed"),
            ("timeouts: {step: '5'}", "timeouts.step"),
            ("mode: Train", "mode"),
            ("max_steps: .nan", "max_steps"),
            ("timeouts: {step: .inf}", "timeouts.step"),
        ],
    )
    def test_no_silent_coercion(
        self, write: Callable[[str], Path], line: str, location: str
    ) -> None:
        with pytest.raises(ConfigError) as caught:
            load_experiment(write(MINIMAL + line + "\n"))
        assert [p.location for p in caught.value.problems] == [location]


TWO_AGENTS = """\
uid: two
seed: 7
runs: 3
episodes: 4
max_steps: 100
mode: test
placement: process
transport: tcp
host: 127.0.0.1
environments:
  - uid: first
    env: gymnasium:CartPole-v1
    params: {render_mode: null}
    placement: thread
    policy_mapping: {agent_0: left}
  - uid: second
    env: gymnasium:CartPole-v1
    policy_mapping: {agent_0: right}
agents:
  - uid: left
    params: {lr: 0.1, gamma: 0.9, layers: [64, 64]}
    brain: {class: mosaic.agents:NoOpBrain, params: {lr: 0.5}}
    muscle: mosaic.agents:RandomMuscle
    placement: {muscle: thread}
  - uid: right
    muscle: {class: mosaic.agents:RandomMuscle, params: {eps: 0.2}}
    placement: thread
store: {path: results/two.db, record_steps: false}
timeouts: {setup: 1, step: 2.5, shutdown: 3, heartbeat: 4}
"""


class TestRunConfig:
    @pytest.fixture
    def experiment(self, write: Callable[[str], Path]) -> Experiment:
        return load_experiment(write(TWO_AGENTS))

    def test_as_a_dict_it_is_plain_data_that_survives_json(self, experiment: Experiment) -> None:
        config = experiment.run_config(1).to_dict()
        assert _is_plain(config)
        assert json.loads(json.dumps(config)) == config
        # A NoOpBrain learns nothing: it stays in a thread unless the file places it.
        assert config["agents"][0]["placement"] == {"brain": "thread", "muscle": "thread"}
        assert config["agents"][0]["brain"]["class"] == "mosaic.agents:NoOpBrain"

    def test_a_noop_brain_runs_in_a_process_only_when_the_file_says_so(
            self, write: Callable[[str], Path]) -> None:
        text = TWO_AGENTS.replace("placement: {muscle: thread}",
                                  "placement: {brain: process, muscle: thread}")
        config = load_experiment(write(text)).run_config(1).to_dict()
        assert config["agents"][0]["placement"] == {"brain": "process", "muscle": "thread"}

    def test_it_travels_in_a_message_unchanged(self, experiment: Experiment) -> None:
        config = experiment.run_config(2)
        request = SimulationStartRequest("run", 1, config, "inproc://governor")
        assert decode_message(encode_message(request, 1))[1] == request

    def test_placements_are_resolved_per_component(self, experiment: Experiment) -> None:
        config = experiment.run_config(0)
        assert [env.placement for env in config.environments] == ["thread", "process"]
        left, right = config.agents
        # The run's process placement would reach left's brain, but a NoOpBrain stays in a thread.
        assert (left.brain_placement, left.muscle_placement) == ("thread", "thread")
        assert (right.brain_placement, right.muscle_placement) == ("thread", "thread")

    def test_components_are_normalised_with_merged_params(self, experiment: Experiment) -> None:
        left, right = experiment.run_config(0).agents
        assert left.brain == ComponentSpec("mosaic.agents:NoOpBrain",
                                           {"lr": 0.5, "gamma": 0.9, "layers": [64, 64]})
        assert left.muscle == ComponentSpec("mosaic.agents:RandomMuscle",
                                            {"lr": 0.1, "gamma": 0.9, "layers": [64, 64]})
        assert right.brain == ComponentSpec("mosaic.agents:NoOpBrain", {})
        assert right.muscle.params == {"eps": 0.2}

    def test_run_settings(self, experiment: Experiment) -> None:
        config = experiment.run_config(2)
        assert config.run_index == 2
        assert config.seed == experiment.run_seeds()[2]
        assert config.experiment_seed == 7
        assert (config.episodes, config.max_steps, config.mode) == (4, 100, "test")
        assert (config.transport, config.host) == ("tcp", "127.0.0.1")
        assert config.record_steps == "episodes"  # false, the old spelling
        assert config.timeouts == RunTimeouts(setup=1.0, step=2.5, shutdown=3.0, heartbeat=4.0)
        assert config.store_path == str(experiment.source.parent / "results" / "two.db")
        assert [env.policy_mapping for env in config.environments] == [
            {"agent_0": "left"},
            {"agent_0": "right"},
        ]
        assert config.environments[0].kind == "gymnasium"
        assert config.default_agent is None

    def test_single_agent_default_mapping(self, write: Callable[[str], Path]) -> None:
        config = load_experiment(write(MINIMAL)).run_config(0)
        assert config.environments[0].policy_mapping is None
        assert config.default_agent == "random"

    def test_changing_the_result_changes_nothing(self, experiment: Experiment) -> None:
        config = experiment.run_config(0)
        config.agents[0].brain.params["layers"].append(1)
        config.environments[0].params["extra"] = 1
        assert experiment.agents[0].params["layers"] == [64, 64]
        assert experiment.run_config(0) != config

    @pytest.mark.parametrize("index", [-1, 3, 10])
    def test_out_of_range_index(self, experiment: Experiment, index: int) -> None:
        with pytest.raises(IndexError):
            experiment.run_config(index)

    def test_non_int_index(self, experiment: Experiment) -> None:
        with pytest.raises(TypeError):
            experiment.run_config(True)


    @pytest.mark.parametrize(
        ("store", "own", "expected"),
        [
            ("true", None, "all"),
            ("false", None, "episodes"),
            ("none", None, "none"),
            ("episodes", "all", "all"),
            ("all", "none", "none"),
        ],
    )
    def test_record_steps_per_environment(
        self, write: Callable[[str], Path], store: str, own: str | None, expected: str
    ) -> None:
        text = MINIMAL + f"store: {{record_steps: {store}}}\n"
        if own is not None:
            text = text.replace("    env: gymnasium:CartPole-v1\n",
                                f"    env: gymnasium:CartPole-v1\n    record_steps: {own}\n")
        config = load_experiment(write(text)).run_config(0)
        assert config.records(config.environments[0]) == expected
        assert config.environments[0].record_steps == own

class TestRunSeeds:
    def test_formula_and_pinned_values(self, write: Callable[[str], Path]) -> None:
        experiment = load_experiment(write(MINIMAL + "seed: 42\nruns: 2\n"))
        expected = [
            int(np.random.SeedSequence(42, spawn_key=(i,)).generate_state(1, np.uint32)[0])
            for i in range(2)
        ]
        assert experiment.run_seeds() == expected
        # Stores key results by these seeds: a change here breaks reproducing old runs.
        assert expected == [2684470948, 4091952314]
        assert all(type(seed) is int for seed in experiment.run_seeds())

    def test_deterministic_across_loads(self, write: Callable[[str], Path]) -> None:
        path = write(MINIMAL + "seed: 3\nruns: 5\n")
        assert load_experiment(path).run_seeds() == load_experiment(path).run_seeds()

    @settings(max_examples=40, deadline=None)
    @given(seed=st.integers(0, 2**63 - 1), runs=st.integers(1, 30))
    def test_distinct_in_range_and_stable_when_runs_grow(self, seed: int, runs: int) -> None:
        base = _experiment(seed=seed, runs=runs)
        seeds = base.run_seeds()
        assert len(seeds) == runs
        assert len(set(seeds)) == runs
        assert all(0 <= value < 2**32 for value in seeds)
        assert _experiment(seed=seed, runs=runs + 1).run_seeds()[:runs] == seeds

    def test_different_experiment_seeds_differ(self) -> None:
        assert _experiment(seed=1, runs=3).run_seeds() != _experiment(seed=2, runs=3).run_seeds()


def _experiment(**overrides: Any) -> Experiment:
    data: dict[str, Any] = {
        "uid": "direct",
        "environments": [{"uid": "env", "env": "gymnasium:CartPole-v1"}],
        "agents": [{"uid": "agent", "muscle": "mosaic.agents:RandomMuscle"}],
        "source": Path("/tmp/direct.yml"),
        "store_path": Path("/tmp/direct.sqlite"),
        **overrides,
    }
    return Experiment.model_validate(data)


class TestUserCode:
    def test_user_classes_and_factories(
        self, write: Callable[[str], Path], user_module: Callable[[str], str]
    ) -> None:
        name = user_module(
            """
            import gymnasium
            from mosaic.agents import Brain, RandomMuscle

            class Learner(Brain):
                def learn(self, muscle, experience):
                    return None

            class Nested:
                class Actor(RandomMuscle):
                    pass

            class TinyEnv(gymnasium.Env):
                pass

            def make_env(size=3):
                return TinyEnv()
            """
        )
        path = write(
            f"""
            uid: user
            environments:
              - uid: tiny
                env: {name}:TinyEnv
              - uid: made
                env: {name}:make_env
                params: {{size: 5}}
            agents:
              - uid: agent
                brain: {name}:Learner
                muscle: {{class: "{name}:Nested.Actor"}}
            """
        )
        config = load_experiment(path).run_config(0)
        assert [env.kind for env in config.environments] == ["import", "import"]
        assert config.agents[0].brain.class_path == f"{name}:Learner"
        assert config.agents[0].muscle.class_path == f"{name}:Nested.Actor"

    def test_a_muscle_params_model_checks_the_merged_params_where_they_are_written(
        self, write: Callable[[str], Path], user_module: Callable[[str], str]
    ) -> None:
        name = user_module(
            """
            from pydantic import BaseModel, ConfigDict, Field
            from mosaic.agents import RandomMuscle

            class Params(BaseModel):
                model_config = ConfigDict(strict=True, extra="ignore")
                speed: int = Field(ge=1, description="a whole number >= 1")
                gear: int = 1

            class Checked(RandomMuscle):
                @classmethod
                def params_model(cls):
                    return Params
            """
        )
        text = f"""
            uid: user
            environments:
              - uid: cartpole
                env: gymnasium:CartPole-v1
            agents:
              - uid: agent
                params: {{speed: 0, gear: 2, colour: red}}
                muscle:
                  class: {name}:Checked
                  params: {{gear: two}}
            """
        with pytest.raises(ConfigError) as caught:
            load_experiment(write(text))
        found = {(p.location, p.line, p.message) for p in caught.value.problems}
        assert found == {
            ("agents[0].params.speed", 8, "expected a whole number >= 1, got the number 0"),
            ("agents[0].muscle.params.gear", 11, "expected a whole number, got the text 'two'"),
        }
        # The muscle's own value wins over the agent's, and keys the model ignores stay allowed.
        config = load_experiment(write(text.replace("speed: 0", "speed: 3")
                                       .replace("gear: two", "gear: 4"))).run_config(0)
        assert config.agents[0].muscle.params == {"speed": 3, "gear": 4, "colour": "red"}

    def test_module_failing_at_import_is_reported_with_its_error(
        self, write: Callable[[str], Path], user_module: Callable[[str], str]
    ) -> None:
        name = user_module("import not_installed_dependency_xyz\n")
        with pytest.raises(ConfigError) as caught:
            load_experiment(write(MINIMAL.replace("mosaic.agents:RandomMuscle", f"{name}:M")))
        problem = caught.value.problems[0]
        assert problem.location == "agents[0].muscle"
        assert "not_installed_dependency_xyz" in problem.message
        assert "not installed" in problem.hint

    def test_module_raising_at_import(self, user_module: Callable[[str], str]) -> None:
        name = user_module("raise RuntimeError('boom')\n")
        with pytest.raises(ImportPathError, match="RuntimeError: boom") as caught:
            import_object(f"{name}:X")
        assert caught.value.reason == "failed"

    def test_module_exiting_at_import_does_not_exit(
        self, user_module: Callable[[str], str]
    ) -> None:
        name = user_module("import sys\nsys.exit(3)\n")
        with pytest.raises(ImportPathError, match="SystemExit"):
            import_object(f"{name}:X")


class TestImports:
    def test_import_object(self) -> None:
        assert import_object("mosaic.agents:RandomMuscle") is RandomMuscle
        assert import_object("mosaic.agents:RandomMuscle.act") is RandomMuscle.act

    @pytest.mark.parametrize(
        ("path", "reason", "hint"),
        [
            ("mosaic.agents.RandomMuscle", "format", "'mosaic.agents:RandomMuscle'"),
            ("mosaic agents:X", "format", ""),
            ("no_such_module_abc:X", "missing", "installed"),
            ("mosaic.agents:RandomMusle", "attribute", "'RandomMuscle'"),
            ("mosaic.agents:RandomMuscle.nope", "attribute", ""),
        ],
    )
    def test_import_failures(self, path: str, reason: str, hint: str) -> None:
        with pytest.raises(ImportPathError) as caught:
            import_object(path)
        assert caught.value.reason == reason
        assert hint in caught.value.hint
        assert isinstance(caught.value, ImportError)

    def test_resolve_class(self) -> None:
        assert resolve_class("mosaic.agents:NoOpBrain", Brain) is NoOpBrain
        with pytest.raises(
            ImportPathError, match=re.escape("does not subclass mosaic.agents.Muscle")
        ):
            resolve_class("mosaic.agents:NoOpBrain", Muscle)

    def test_env_references(self) -> None:
        assert parse_env_reference("gymnasium:CartPole-v1") == ("gymnasium", "CartPole-v1")
        assert parse_env_reference("pettingzoo:classic.go_v5") == ("pettingzoo", "classic.go_v5")
        assert parse_env_reference("pkg.mod:Env") == ("import", "pkg.mod:Env")
        assert resolve_env("gymnasium:CartPole-v1") == "gymnasium"

    def test_gymnasium_id_with_module_to_import(self) -> None:
        # "module:Id" imports the module first, as gymnasium.make does.
        assert resolve_env("gymnasium:gymnasium.envs:CartPole-v1") == "gymnasium"
        with pytest.raises(ImportPathError, match="no module named"):
            resolve_env("gymnasium:not_a_module_xyz:CartPole-v1")

    def test_pettingzoo_module(self, monkeypatch: pytest.MonkeyPatch) -> None:
        family = type(sys)("pettingzoo.fakefamily")
        good = type(sys)("pettingzoo.fakefamily.game_v0")
        good.env = lambda: None  # type: ignore[attr-defined]
        empty = type(sys)("pettingzoo.fakefamily.empty_v0")
        monkeypatch.setitem(sys.modules, "pettingzoo.fakefamily", family)
        monkeypatch.setitem(sys.modules, "pettingzoo.fakefamily.game_v0", good)
        monkeypatch.setitem(sys.modules, "pettingzoo.fakefamily.empty_v0", empty)
        assert resolve_env("pettingzoo:fakefamily.game_v0") == "pettingzoo"
        with pytest.raises(ImportPathError, match="neither env"):
            resolve_env("pettingzoo:fakefamily.empty_v0")

    def test_pettingzoo_environment_in_a_file(
        self, write: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        game = type(sys)("pettingzoo.fakefamily.duel_v0")
        game.parallel_env = lambda: None  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "pettingzoo.fakefamily", type(sys)("fakefamily"))
        monkeypatch.setitem(sys.modules, "pettingzoo.fakefamily.duel_v0", game)
        path = write(
            """
            uid: duel
            environments:
              - uid: duel
                env: pettingzoo:fakefamily.duel_v0
                policy_mapping: {player_0: a, player_1: b}
            agents:
              - uid: a
                muscle: mosaic.agents:RandomMuscle
              - uid: b
                muscle: mosaic.agents:RandomMuscle
            """
        )
        config = load_experiment(path).run_config(0)
        assert config.environments[0].kind == "pettingzoo"
        assert config.environments[0].policy_mapping == {"player_0": "a", "player_1": "b"}


class TestConfigError:
    def test_single_problem_keeps_the_original_format(self) -> None:
        error = ConfigError("exp.yml", "agents[0].muscle", "bad", "fix it")
        assert str(error) == "exp.yml: agents[0].muscle: bad (hint: fix it)"
        assert error.problems == (error,)
        assert str(ConfigError("exp.yml", "", "empty")) == "exp.yml: empty"

    def test_collect(self) -> None:
        first = ConfigError("a.yml", "uid", "missing", line=1)
        second = ConfigError("a.yml", "runs", "zero", line=2, column=7)
        error = ConfigError.collect([first, second])
        assert error.problems == (first, second)
        assert str(error).splitlines() == ["a.yml:1: uid: missing", "a.yml:2:7: runs: zero"]
        assert ConfigError.collect([first]) is first
        with pytest.raises(ValueError):
            ConfigError.collect([])


class TestEvaluation:
    def test_phases_inherit_evaluate_every_and_a_test_phase_ignores_it(self) -> None:
        experiment = _experiment(evaluate_every=4, phases=[
            {"name": "warm"},
            {"name": "long", "evaluate_every": 10, "evaluate_episodes": 2},
            {"name": "more"},
            {"name": "test", "mode": "test"},
        ])
        configs = [experiment.run_config(0, index) for index in range(4)]
        assert [(c.evaluate_every, c.evaluate_episodes) for c in configs] == [
            (4, 5), (10, 2), (10, 2), (None, 2)]
        assert _experiment().run_config(0).evaluate_every is None

    @pytest.mark.parametrize(("lines", "location", "says"), [
        ("evaluate_episodes: 3", "evaluate_episodes", "needs evaluate_every"),
        ("evaluate_every: 2\nmode: test", "evaluate_every", "already acts greedily"),
        ("phases: [{name: a}, {name: b, mode: test, evaluate_every: 1}]",
         "phases[1].evaluate_every", "already acts greedily"),
        ("phases: [{name: a, evaluate_episodes: 1}, {name: b, evaluate_every: 1}]",
         "phases[0].evaluate_episodes", "needs evaluate_every"),
        ("evaluate_every: 0", "evaluate_every", ">= 1"),
    ])
    def test_evaluation_errors_name_the_key(self, write: Callable[[str], Path], lines: str,
                                            location: str, says: str) -> None:
        with pytest.raises(ConfigError) as caught:
            load_experiment(write(MINIMAL + lines + "\n"))
        [problem] = caught.value.problems
        assert problem.location == location
        assert says in str(caught.value)


class TestRollouts:
    """``rollouts:`` on an environment entry: what it takes, what it refuses, and why."""

    ROLLED = MINIMAL.replace("env: gymnasium:CartPole-v1",
                             "env: gymnasium:CartPole-v1\n    rollouts: 2")

    def test_each_worker_gets_one_copy_unless_the_entry_says_more(
            self, write: Callable[[str], Path]) -> None:
        [plan] = load_experiment(write(self.ROLLED)).run_config(0).environments
        assert (plan.rollouts, plan.copies) == (2, 1)
        assert plan.rollout_workers() == ["cartpole/rollout-0", "cartpole/rollout-1"]
        text = self.ROLLED.replace("rollouts: 2", "rollouts: 2\n    copies: 8")
        [plan] = load_experiment(write(text)).run_config(0).environments
        assert (plan.rollouts, plan.copies) == (2, 8)

    @pytest.mark.parametrize("text, location, says", [
        (ROLLED.replace("rollouts: 2", "rollouts: 0"), "environments[0].rollouts",
         "from 1 to 256"),
        (ROLLED + "evaluate_every: 5\n", "evaluate_every", "copies: or rollouts:"),
        (ROLLED.replace("mosaic.agents:RandomMuscle",
                        "{class: mosaic.operators:OperatorMuscle, "
                        "params: {operator: {class: random}}}"),
         "environments[0].rollouts", "is an operator"),
        (ROLLED.replace("\nagents:", """
  - uid: other
    env: gymnasium:CartPole-v1
agents:"""), "environments[1]", "steps every environment in them"),
        ("""\
uid: rps
environments:
  - uid: rps
    env: pettingzoo:classic.rps_v2
    rollouts: 2
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
""", "environments[0].rollouts", "takes Gymnasium environments"),
    ])
    def test_what_rollouts_refuse_is_named_with_the_key(
            self, write: Callable[[str], Path], text: str, location: str, says: str) -> None:
        with pytest.raises(ConfigError) as caught:
            load_experiment(write(text))
        locations = [problem.location for problem in caught.value.problems]
        assert location in locations, caught.value
        assert says in str(caught.value)


def test_a_classic_game_without_pygame_names_the_extra_that_installs_it(
        write: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    # As on a slim install (pip install mosaic): pygame comes with the games extra.
    for name in [name for name in sys.modules if name.startswith("pettingzoo.classic")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pygame", None)
    with pytest.raises(ConfigError) as caught:
        load_experiment(write("""\
            uid: board
            environments:
              - uid: board
                env: pettingzoo:classic.tictactoe_v3
            agents:
              - uid: random
                muscle: mosaic.agents:RandomMuscle
            """))
    [problem] = caught.value.problems
    assert problem.location == "environments[0].env"
    assert "needs 'pygame'" in str(caught.value)
    assert "pip install 'mosaic[games]'" in str(caught.value)
