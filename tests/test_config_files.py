"""The one pipeline that reads experiment and evaluation files: YAML, pydantic, one ConfigError."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, field_validator

from mosaic.core.config_problems import (
    Position,
    Problem,
    config_error,
    format_location,
    raise_problems,
    validate,
)
from mosaic.core.config_yaml import MAX_DEPTH, MAX_FILE_BYTES
from mosaic.core.errors import ConfigError
from mosaic.experiment import load_experiment
from mosaic.operators.evaluation.schema import load_evaluation

pytestmark = pytest.mark.timeout(30)

LOADERS = {"experiment": load_experiment, "evaluation": load_evaluation}


def error_of(kind: str, path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        LOADERS[kind](path)
    return caught.value


@pytest.mark.parametrize(
    ("text", "line", "message", "hint"),
    [
        ("uid: a\nuid: b\n", 2, "duplicate key 'uid' (first at line 1)", "remove or rename"),
        ("uid: [a\nseeds: 1\n", 2, "invalid YAML: ", ""),
        ("uid: !!python/name:os.system x\n", 1, "invalid YAML: ", "holds plain data only"),
        ("- uid: a\n", 1, "expected a mapping of keys at the top level, got a list", "'uid:"),
    ],
)
def test_both_kinds_of_file_word_a_broken_file_alike(
    tmp_path: Path, text: str, line: int, message: str, hint: str
) -> None:
    path = tmp_path / "f.yml"
    path.write_text(text)
    errors = {kind: error_of(kind, path) for kind in LOADERS}
    for kind, error in errors.items():
        assert (error.path, error.line) == (str(path), line)
        assert message in error.message and hint in error.hint
        assert error.hint == errors["experiment"].hint.replace("experiment", kind)


def test_an_evaluation_file_has_the_size_and_depth_limits_of_an_experiment_file(
    tmp_path: Path,
) -> None:
    big = tmp_path / "big.yml"
    big.write_text("# padding\n" * (MAX_FILE_BYTES // 10 + 1))
    assert error_of("evaluation", big).message.startswith(
        f"the file is too large: an evaluation file is at most {MAX_FILE_BYTES // 1024} KiB")
    deep = tmp_path / "deep.yml"
    deep.write_text("uid: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n")
    error = error_of("evaluation", deep)
    assert "nested too deeply" in error.message and error.line == 1


def test_every_problem_of_an_evaluation_file_is_listed_in_file_order(tmp_path: Path) -> None:
    path = tmp_path / "e.yml"
    path.write_text("uid: x\noperators:\n  - id: a\n    type: randm\n    env: CartPole-v1\n"
                    "seeds: [1, -2]\nepisodes: 0\n")
    error = error_of("evaluation", path)
    assert [(p.location, p.line) for p in error.problems] == [
        ("operators[0].type", 4), ("seeds[1]", 6), ("episodes", 7)]
    assert error.problems[0].hint == "did you mean 'random'?"
    assert len(str(error).splitlines()) == 3


class _Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")

    size: int = Field(ge=1, description="a whole number >= 1 (the size)")

    @classmethod
    def unknown_key_hint(cls, key: str) -> str:
        return "colour is a top-level key" if key == "colour" else ""

    @field_validator("size")
    @classmethod
    def _even(cls, size: int) -> int:
        if size % 2:
            raise_problems(Problem((), f"{size} is odd", "use an even size"))
        return size


class _Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[_Inner]


def problems_of(data: Any) -> list[Problem]:
    model, problems = validate(_Outer, data, ("top",))
    assert (model is None) == bool(problems)
    return problems


def test_validate_words_pydantic_errors_at_their_key_path_below_a_prefix() -> None:
    assert problems_of({"items": [{"size": 2}]}) == []
    assert problems_of({"items": [{"size": 0}]}) == [
        Problem(("top", "items", 0, "size"),
                "expected a whole number >= 1 (the size), got the number 0")]
    assert problems_of({"items": [{"size": 3}]}) == [
        Problem(("top", "items", 0, "size"), "3 is odd", "use an even size")]
    [colour, sise] = problems_of({"items": [{"size": 2, "colour": 1, "sise": 2}]})
    assert (colour.message, colour.hint) == ("unknown key 'colour'", "colour is a top-level key")
    assert sise.hint == "did you mean 'size'? known keys here: size"


def test_config_error_sorts_by_line_and_shows_a_problem_once() -> None:
    positions = {("a",): Position(3, 1, True), ("b",): Position(1, 1, False)}
    error = config_error("f.yml", [
        Problem(("a",), "late"), Problem(("nowhere",), "unplaced"), Problem(("b", "c"), "early"),
        Problem(("a",), "late"),
    ], positions)
    assert [(p.location, p.line, p.message) for p in error.problems] == [
        ("b.c", 1, "early"), ("a", 3, "late"), ("nowhere", None, "unplaced")]
    assert str(error).splitlines()[0] == "f.yml:1: b.c: early"


def test_format_location_quotes_keys_that_are_not_names() -> None:
    assert format_location(("agents", 1, "muscle", "class")) == "agents[1].muscle.class"
    assert format_location(("params", "a key")) == "params['a key']"
