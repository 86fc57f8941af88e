"""Loading experiment files: every broken file gives a ConfigError a user can act on."""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
from contextlib import closing
from pathlib import Path
from typing import NamedTuple

import pytest

from mosaic.core.errors import ConfigError
from mosaic.experiment import Experiment, load_experiment
from mosaic.experiment.loader import MAX_DEPTH, MAX_FILE_BYTES

HERE = Path(__file__).parent
BAD = HERE / "bad"
EXAMPLES = HERE.parent.parent / "examples"

VALID = """\
uid: ok
environments:
  - uid: cartpole
    env: gymnasium:CartPole-v1
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
"""


class Expect(NamedTuple):
    """What one bad file's error must say: at ``location`` (exactly), on ``line``, ``message``."""

    location: str
    line: int | None
    message: str
    hint: str = ""


CORPUS: dict[str, Expect] = {
    "agent_is_a_string.yml": Expect("agents[0]", 6, "at least 'uid' and 'muscle', got the text"),
    "bad_agent_placement.yml": Expect(
        "agents[0].placement.muscle", 8, "expected 'thread', 'process' or 'ray'"
    ),
    "bad_mode.yml": Expect("mode", 2, "'train' or 'test'", "did you mean 'train'?"),
    "bad_placement.yml": Expect("placement", 2, "got the text 'threads'", "'thread'"),
    "brain_is_a_muscle.yml": Expect("agents[0].brain", 7, "mosaic.agents.Brain", "under 'muscle:'"),
    "comments_only.yml": Expect("", None, "the file is empty"),
    "curve_keys_empty.yml": Expect("curve_keys", 3, "expected a folder path", "keys generate"),
    "curve_keys_malformed.yml": Expect(
        "curve_keys", 4, "keys_malformed/server.key_secret: malformed certificate: secret-key",
        'run "mosaic keys generate DIR" and set curve_keys: DIR',
    ),
    "curve_keys_missing_file.yml": Expect(
        "curve_keys", 4, "keys_incomplete/server.key_secret: no such file", "keys generate DIR"
    ),
    "curve_keys_missing_folder.yml": Expect(
        "curve_keys", 4, "bad/no_such_keys: no such folder", "keys generate DIR"
    ),
    "deep_aliases.yml": Expect("", 55, "nested too deeply: more than 50 levels"),
    "deep_lists.yml": Expect("", 6, "nested too deeply: more than 50 levels", "brackets"),
    "deep_mappings.yml": Expect("", 6, "nested too deeply: more than 50 levels", "brackets"),
    "curve_keys_with_ipc.yml": Expect(
        "curve_keys", 3, "secures tcp only, but transport is ipc", "set transport: tcp"
    ),
    "component_wrong_type.yml": Expect("agents[0].muscle", 7, "got a list"),
    "duplicate_key.yml": Expect("episodes", 9, "duplicate key 'episodes' (first at line 2)"),
    "duplicate_nested_key.yml": Expect("agents[0].muscle", 8, "duplicate key 'muscle'"),
    "duplicate_uid.yml": Expect("agents[0].uid", 6, "already used by environments[0]", "unique"),
    "empty.yml": Expect("", None, "the file is empty"),
    "empty_policy_mapping.yml": Expect(
        "environments[0].policy_mapping", 5, "at least 1 entry", "agent_0"
    ),
    "empty_value.yml": Expect("episodes", 2, "got an empty value"),
    "env_missing_attribute.yml": Expect(
        "environments[0].env", 4, "no attribute 'CartPoleEnvironment'", "'CartPoleEnv'"
    ),
    "env_missing_module.yml": Expect(
        "environments[0].env", 4, "no module named 'no_such_package'", "installed"
    ),
    "env_not_an_env.yml": Expect(
        "environments[0].env", 4, "is not an environment", "gymnasium.Env"
    ),
    "env_without_prefix.yml": Expect(
        "environments[0].env", 4, "'gymnasium:<id>'", "did you mean 'gymnasium:CartPole-v1'?"
    ),
    "environments_not_a_list.yml": Expect("environments", 2, "got a mapping", "'- '"),
    "float_for_int.yml": Expect("runs", 2, "whole number from 1 to 100000, got the number 1.5"),
    "gymnasium_bad_env_agent.yml": Expect(
        "environments[0].policy_mapping.player_1", 5, "unknown env agent id", "'agent_0'"
    ),
    "host_not_an_address.yml": Expect("host", 2, "expected an IP address", "'127.0.0.1'"),
    "many_problems.yml": Expect("episdes", 2, "unknown key", "did you mean 'episodes'?"),
    "missing_muscle.yml": Expect("agents[0].muscle", 6, "required key is missing"),
    "missing_uid.yml": Expect("uid", None, "required key is missing"),
    "muscle_base_class.yml": Expect("agents[0].muscle", 7, "base class", "subclass"),
    "muscle_class_unimportable.yml": Expect(
        "agents[1].muscle.class", 14, "no module named 'nowhere_to_be_found'"
    ),
    "muscle_dotted_path.yml": Expect(
        "agents[0].muscle", 7, "package.module:Attr", "'mosaic.agents:RandomMuscle'"
    ),
    "muscle_not_a_class.yml": Expect(
        "agents[0].muscle", 7, "is a function, not a class", "mosaic.agents.Muscle"
    ),
    "negative_seed.yml": Expect("seed", 2, "from 0 to 9223372036854775807, got the number -1"),
    "no_environments.yml": Expect("environments", 2, "at least 1 item"),
    "numeric_uid.yml": Expect("uid", 1, "got the number 2024", "quote"),
    "operator_timeout_in_agent_params.yml": Expect(
        "agents[0].params.timeout", 8, "expected a number of seconds > 0, got the number 0"
    ),
    "operator_unknown_setting.yml": Expect(
        "agents[0].muscle.params.operator.settings.modle", 14, "unknown key 'modle'",
        "did you mean 'model'?",
    ),
    "operator_unknown_type.yml": Expect(
        "agents[0].muscle.params.operator.type", 11, "expected one of random, passive, scripted",
        "did you mean 'llm'?",
    ),
    "params_date.yml": Expect("agents[0].params.schedule.start", 10, "got a date", "quote"),
    "pettingzoo_unknown_module.yml": Expect(
        "environments[0].env", 4, "no environment module", "'pettingzoo:classic.tictactoe_v3'"
    ),
    "policy_unknown_agent.yml": Expect(
        "environments[0].policy_mapping.agent_0", 6, "no agent has uid 'randon'", "'random'"
    ),
    "python_tag.yml": Expect("", 4, "invalid YAML", "plain data"),
    "quoted_bool.yml": Expect("store.record_steps", 9, "all, episodes or none",
                              "true or false without quotes"),
    "record_steps_typo.yml": Expect("environments[0].record_steps", 5,
                                    "expected all, episodes or none, got the text 'episode'",
                                    "did you mean 'episodes'?"),
    "quoted_int.yml": Expect("episodes", 2, "got the text '10'", "remove the quotes"),
    "recursive_alias.yml": Expect("environments[0].params.inner", 6, "recursive alias"),
    "store_url.yml": Expect("store.path", 9, "expected a file path", "store.url"),
    "store_path_and_url.yml": Expect("store", 8, "store.path and store.url are both set"),
    "store_url_not_a_url.yml": Expect("store.url", 9, "expected a database URL", "store.path"),
    "store_url_mysql.yml": Expect("store.url", 9, "mysql://me:***@localhost/results: mosaic "
                                  "stores results in a SQLite file"),
    "syntax_error.yml": Expect("", 5, "invalid YAML", ""),
    "tcp_public_host.yml": Expect(
        "host", 3, "0.0.0.0 is not a loopback address; listening on it with transport tcp "
        "requires CURVE keys", 'run "mosaic keys generate DIR" and set curve_keys: DIR',
    ),
    "top_level_list.yml": Expect("", 1, "expected a mapping of keys at the top level"),
    "two_agents_no_mapping.yml": Expect(
        "environments[0].policy_mapping", 3, "missing policy_mapping", "with more"
    ),
    "uid_with_space.yml": Expect("uid", 1, "letters, digits"),
    "unknown_gymnasium_id.yml": Expect(
        "environments[0].env", 4, "'CartPol-v1'", "'gymnasium:CartPole-v1'"
    ),
    "unknown_key_typo.yml": Expect("episdes", 2, "unknown key", "did you mean 'episodes'?"),
    "unknown_nested_key.yml": Expect(
        "environments[0].parms", 5, "unknown key 'parms'", "did you mean 'params'?"
    ),
    "unmapped_agent.yml": Expect("agents[1].uid", 9, "maps to agent 'idle'"),
    "yaml_boolean_mode.yml": Expect("mode", 2, "got the boolean true", "booleans"),
    "zero_max_steps.yml": Expect("max_steps", 2, ">= 1, got the number 0"),
    "zero_runs.yml": Expect("runs", 2, "from 1 to 100000, got the number 0"),
    "too_many_runs.yml": Expect("runs", 2, "from 1 to 100000, got the number 1000000"),
    "zero_timeout.yml": Expect("timeouts.step", 9, "> 0, got the number 0"),
}


def _error(path: Path, **kwargs: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_experiment(path, **kwargs)
    return caught.value


def test_corpus_and_table_match() -> None:
    on_disk = {path.name for path in BAD.glob("*.yml")}
    assert on_disk == set(CORPUS)
    assert len(on_disk) >= 20


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_bad_file_names_file_key_path_and_expectation(name: str) -> None:
    expect = CORPUS[name]
    error = _error(BAD / name)
    text = str(error)

    matching = [p for p in error.problems if p.location == expect.location]
    assert matching, f"no problem at {expect.location!r} in:\n{text}"
    problem = next((p for p in matching if expect.message in p.message), None)
    assert problem is not None, f"no {expect.message!r} at {expect.location!r} in:\n{text}"
    assert expect.hint in problem.hint
    assert problem.line == expect.line

    line = str(problem)
    assert name in line
    assert line in text.splitlines()
    if expect.location:
        assert f": {expect.location}: " in line
    if expect.line is not None:
        assert f"{name}:{expect.line}:" in line


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_bad_file_errors_do_not_leak_pydantic(name: str) -> None:
    text = str(_error(BAD / name))
    for leak in ("pydantic", "errors.pydantic.dev", "Input should", "Config(", "Spec", "[key]"):
        assert leak not in text


def test_all_problems_are_reported_one_per_line_in_file_order() -> None:
    error = _error(BAD / "many_problems.yml")
    locations = [p.location for p in error.problems]
    assert locations == ["episdes", "runs", "environments[0].env", "agents[0].brain"]
    lines = str(error).splitlines()
    assert len(lines) == 4
    assert all(line.startswith(f"{BAD / 'many_problems.yml'}:") for line in lines)
    assert error.location == "episdes"  # the first problem's fields are the error's own


def test_syntax_error_has_line_and_column() -> None:
    error = _error(BAD / "syntax_error.yml")
    assert (error.line, error.column) == (5, 7)
    assert "started at line 4" in error.message


def test_short_form_placement_typo_is_reported_once_at_the_key_written(tmp_path: Path) -> None:
    path = tmp_path / "exp.yml"
    path.write_text(VALID + "    placement: threads\n")
    error = _error(path)
    assert [p.location for p in error.problems] == ["agents[0].placement"]


def test_missing_file(tmp_path: Path) -> None:
    error = _error(tmp_path / "nope.yml")
    assert "nope.yml" in str(error)
    assert "file not found" in error.message


def test_directory_suggests_yaml_files_inside(tmp_path: Path) -> None:
    (tmp_path / "exp.yml").write_text(VALID)
    error = _error(tmp_path)
    assert "is a directory" in error.message
    assert "exp.yml" in error.hint


def test_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yml"
    path.write_bytes("uid: caf\xe9\n".encode("latin-1"))
    assert "UTF-8" in _error(path).message


def test_binary_file_is_not_a_yaml_text_file(tmp_path: Path) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(b"uid: x\n" + bytes(range(128)))
    assert _error(path).message.startswith("not a YAML text file: found a NUL byte at offset 7")
    path.write_bytes(b"uid: x\n" + bytes(range(256)))
    assert _error(path).message.startswith(
        "not a YAML text file: expected UTF-8 text, found byte 0x80 at offset 135")


class TestSizeLimit:
    """An experiment file is a few KB: anything much larger is refused before it is parsed,
    which took 27 s for a 50 MB binary and 42 s for 20 MB of YAML numbers."""

    @pytest.mark.timeout(10)
    @pytest.mark.parametrize("content", ["random", "numbers"])
    def test_a_large_file_is_refused_by_its_size(self, tmp_path: Path, content: str) -> None:
        path = tmp_path / "big.yml"
        with path.open("wb") as file:
            if content == "random":
                file.write(os.urandom(50 * 2**20))
            else:
                file.writelines(f"- {i}\n".encode() for i in range(2_000_000))
        error = _error(path)
        assert error.message.startswith(
            f"the file is too large: an experiment file is at most {MAX_FILE_BYTES // 1024} KiB, "
            f"this one is {path.stat().st_size / 2**20:.1f} MiB")
        assert "aliases" not in error.message

    def test_a_stream_is_read_no_further_than_the_limit(self) -> None:
        error = _error("/dev/zero")  # its size is 0, and it never ends
        assert error.message.endswith("this one is longer")

    @pytest.mark.timeout(20)
    def test_the_densest_file_within_the_limit_loads(self, tmp_path: Path) -> None:
        """65,000 values and no alias: neither too large nor an alias bomb."""
        head = VALID + "    params: {x: ["
        count = (MAX_FILE_BYTES - len(head) - len("]}\n")) // 2
        path = tmp_path / "dense.yml"
        path.write_text(head + ",".join(["1"] * count) + "]}\n")
        assert path.stat().st_size > MAX_FILE_BYTES - 3
        assert load_experiment(path).agents[0].params["x"] == [1] * count


def test_nesting_is_accepted_up_to_the_limit(tmp_path: Path) -> None:
    def nested(levels: int) -> Path:  # the top-level mapping, ``levels`` lists and a number
        path = tmp_path / f"nested_{levels}.yml"
        path.write_text(VALID + "params: " + "[" * levels + "1" + "]" * levels + "\n")
        return path

    assert [p.location for p in _error(nested(MAX_DEPTH - 2)).problems] == ["params"]
    error = _error(nested(MAX_DEPTH - 1))
    assert "nested too deeply" in error.message
    assert (error.line, error.column) == (8, len("params: ") + MAX_DEPTH)  # at the number


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.yml"
    path.write_bytes(b"\xef\xbb\xbf" + VALID.encode())
    assert load_experiment(path).uid == "ok"


def test_alias_bomb_is_rejected_quickly(tmp_path: Path) -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for prev, name in zip("abcdefg", "bcdefgh", strict=True):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]")
    path = tmp_path / "bomb.yml"
    path.write_text("\n".join(lines) + "\n")
    assert "too large" in _error(path).message


def test_merge_keys_are_allowed_and_not_duplicates(tmp_path: Path) -> None:
    path = tmp_path / "merge.yml"
    path.write_text(
        VALID
        + "  - <<: {muscle: mosaic.agents:RandomMuscle, uid: base}\n"
        + "    uid: second\n"
        + "    brain: mosaic.agents:NoOpBrain\n"
    )
    error = _error(path)  # valid YAML; fails only because two agents need policy mappings
    assert [p.location for p in error.problems] == ["environments[0].policy_mapping"]


@pytest.mark.parametrize("name", ["cartpole_random.yml", "cartpole_two_runs.yml"])
def test_examples_load(name: str) -> None:
    experiment = load_experiment(EXAMPLES / name)
    assert isinstance(experiment, Experiment)
    assert experiment.source == (EXAMPLES / name).resolve()
    assert experiment.store_path == (EXAMPLES / name).resolve().with_suffix(".sqlite")


def test_cartpole_random_showcases_mixed_placement() -> None:
    experiment = load_experiment(EXAMPLES / "cartpole_random.yml")
    config = experiment.run_config(0)
    assert (experiment.seed, experiment.runs, experiment.episodes) == (42, 1, 20)
    assert config.environments[0].placement == "process"
    agent = config.agents[0]
    assert (agent.brain_placement, agent.muscle_placement) == ("thread", "thread")


def test_cartpole_two_runs() -> None:
    experiment = load_experiment(EXAMPLES / "cartpole_two_runs.yml")
    assert (experiment.runs, experiment.episodes, experiment.placement) == (2, 5, "thread")
    assert len(set(experiment.run_seeds())) == 2


def test_first_example_comments_every_key() -> None:
    for line in (EXAMPLES / "cartpole_random.yml").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            assert " # " in line, f"uncommented key in the example: {line!r}"


class TestStorePath:
    def _write(self, folder: Path, extra: str = "") -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "exp.yml"
        path.write_text(VALID + extra)
        return path

    def test_default_is_next_to_the_file(self, tmp_path: Path) -> None:
        path = self._write(tmp_path / "sub")
        assert load_experiment(path).store_path == (tmp_path / "sub" / "exp.sqlite").resolve()

    def test_relative_path_resolves_against_the_file(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        path = self._write(tmp_path / "sub", "store:\n  path: out/results.db\n")
        monkeypatch.chdir(tmp_path)
        expected = (tmp_path / "sub" / "out" / "results.db").resolve()
        assert load_experiment("sub/exp.yml").store_path == expected
        assert load_experiment(path).store.path == "out/results.db"

    def test_override_resolves_against_the_current_folder(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        path = self._write(tmp_path / "sub", "store:\n  path: ignored.db\n")
        monkeypatch.chdir(tmp_path)
        experiment = load_experiment(path, store_override="mine.db")
        assert experiment.store_path == (tmp_path / "mine.db").resolve()

    def test_a_directory_is_rejected(self, tmp_path: Path) -> None:
        path = self._write(tmp_path, "store:\n  path: results\n")
        (tmp_path / "results").mkdir()
        error = _error(path)
        assert error.location == "store.path"
        assert "is a directory" in error.message

    @pytest.mark.parametrize("url", ["postgresql://me:hunter2@h:5433/db",
                                     "postgresql+psycopg://me:hunter2@h/db"])
    def test_a_postgresql_url_is_the_store(self, tmp_path: Path, url: str) -> None:
        for experiment in (load_experiment(self._write(tmp_path), store_override=url),
                           load_experiment(self._write(tmp_path, f"store:\n  url: {url}\n")),
                           load_experiment(self._write(tmp_path, "store:\n  path: x.db\n"),
                                           store_override=url)):
            assert (experiment.store_url, experiment.store_path) == (url, None)
            assert experiment.store_target == url
            assert "hunter2" not in experiment.store_shown
            assert experiment.store_shown.replace("***", "hunter2") == url
            # What the store records of the run never holds the password.
            assert experiment.run_config(0).store_path == experiment.store_shown
            # Checkpoints go where those of the default store would.
            assert experiment.checkpoints_dir == (tmp_path / "exp-checkpoints").resolve()

    def test_a_sqlite_store_keeps_its_checkpoints_beside_it(self, tmp_path: Path) -> None:
        experiment = load_experiment(self._write(tmp_path, "store:\n  path: out/r.db\n"))
        assert experiment.store_url is None
        assert experiment.store_target == experiment.store_path
        assert experiment.checkpoints_dir == (tmp_path / "out" / "r-checkpoints").resolve()

    @pytest.mark.parametrize(("url", "message"), [
        ("mysql://me:hunter2@h/db", "not mysql"),
        ("postgresql+asyncpg://me:hunter2@h/db", "unsupported PostgreSQL driver 'asyncpg'"),
        ("postgresql://me:hunter2@h:port/db", "not a valid database URL"),
        ("sqlite:///x.db", "expected a PostgreSQL URL"),
    ])
    def test_an_unusable_override_url_is_rejected_without_its_password(
        self, tmp_path: Path, url: str, message: str
    ) -> None:
        error = _error(self._write(tmp_path), store_override=url)
        assert (error.location, error.line) == ("--store", None)
        assert message in str(error)
        assert "hunter2" not in str(error)

    def test_without_the_driver_a_url_names_the_extra(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setitem(sys.modules, "psycopg", None)  # as if it were not installed
        path = self._write(tmp_path, "store:\n  url: postgresql://me:hunter2@h/db\n")
        error = _error(path)
        assert (error.location, error.line) == ("store.url", 9)
        assert "the PostgreSQL driver psycopg is not installed" in str(error)
        assert "pip install 'mosaic[postgres]'" in str(error)
        assert "hunter2" not in str(error)
        assert "\n" not in str(error)

    @pytest.mark.parametrize(
        ("store", "message"),
        [
            ("notes.txt", "exists and is not a SQLite database"),
            ("notes.txt/results.db", "lies under {tmp}/notes.txt, which is a file, not a folder"),
            ("/dev/null", "is not a regular file"),
        ],
    )
    def test_a_path_that_cannot_be_a_sqlite_file_is_rejected(
        self, tmp_path: Path, store: str, message: str
    ) -> None:
        (tmp_path / "notes.txt").write_text("not a database\n")
        message = message.format(tmp=tmp_path.resolve())
        error = _error(self._write(tmp_path, f"store:\n  path: {store}\n"))
        assert (error.location, error.line) == ("store.path", 9)
        assert message in error.message
        error = _error(self._write(tmp_path), store_override=str(tmp_path / store))
        assert (error.location, error.line) == ("--store", None)
        assert message in error.message

    def test_an_existing_sqlite_file_or_an_empty_file_is_accepted(self, tmp_path: Path) -> None:
        with closing(sqlite3.connect(tmp_path / "earlier.sqlite")) as db:
            db.execute("CREATE TABLE t (x)")
        (tmp_path / "empty.db").touch()
        path = self._write(tmp_path)
        for name in ("earlier.sqlite", "empty.db"):
            assert load_experiment(path, store_override=str(tmp_path / name)).store_path.exists()


def test_relative_source_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(EXAMPLES / "cartpole_two_runs.yml", tmp_path / "two.yml")
    monkeypatch.chdir(tmp_path)
    experiment = load_experiment("two.yml")
    assert experiment.source == tmp_path.resolve() / "two.yml"


def test_an_evaluation_file_is_pointed_to_mosaic_evaluate() -> None:
    evaluation = EXAMPLES / "evaluate_cartpole.yml"
    with pytest.raises(ConfigError) as caught:
        load_experiment(evaluation)
    assert len(caught.value.problems) == 1  # one line, not the keys it does not know
    assert "this is not an experiment file: it has operators" in str(caught.value)
    assert "'mosaic evaluate'" in str(caught.value)
