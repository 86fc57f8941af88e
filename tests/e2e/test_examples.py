"""The examples, fast: every file in examples/ passes ``mosaic experiment-check`` run from a
folder other than the repository's root, and every figure its header states is one
benchmarks/examples.py checks (which runs them, in minutes), so that no figure enters a header
unchecked."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml

from benchmarks import examples as bench
from mosaic.operators.evaluation.schema import load_evaluation
from tests.e2e.cli import REPO, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

EXAMPLES = sorted((REPO / "examples").glob("*.yml"))
#: A number written as measurements are (a decimal, or thousands with k): outside a figure line
#: it would be a figure that benchmarks/examples.py does not check.
MEASUREMENT = re.compile(r"(?<![\w./:-])-?\d+(?:\.\d+k?|k)(?![\w./-])")


def body(name: str) -> str:
    """The example ``name`` without its header."""
    text = (REPO / "examples" / name).read_text()
    return text[text.index("\nuid:") + 1:]


def is_evaluation_file(path: Path) -> bool:
    return "operators" in (yaml.safe_load(path.read_text()) or {})


# One command per example (about thirty), each bound by its own 30 s: on a busy machine the
# whole takes more than the module's minute.
@pytest.mark.timeout(300)
def test_every_example_passes_experiment_check_from_another_folder(tmp_path: Path,
                                                                   process_tag: str) -> None:
    before = sorted(path.name for path in (REPO / "examples").iterdir())
    for path in EXAMPLES:
        relative = os.path.relpath(path, tmp_path)  # as typed from elsewhere: ../../.../x.yml
        result = run_mosaic("experiment-check", relative, cwd=tmp_path, timeout=30)
        if is_evaluation_file(path):
            # An evaluation file (mosaic evaluate / mosaic manual) is refused with the command
            # that runs it, and loads as one.
            assert result.returncode == 2, (path.name, result.stdout, result.stderr)
            assert "mosaic evaluate" in result.stderr, (path.name, result.stderr)
            assert load_evaluation(path).operators
        else:
            assert result.returncode == 0, (path.name, result.stderr)
            assert f"{relative}: ok: experiment" in result.stdout, (path.name, result.stdout)
    assert not list(tmp_path.iterdir())  # nothing was written where the command ran ...
    assert sorted(path.name for path in (REPO / "examples").iterdir()) == before  # ... or there


def test_every_figure_in_a_header_is_one_the_benchmark_checks() -> None:
    assert {path.stem for path in EXAMPLES} >= set(bench.NOT_RUN)
    for path in EXAMPLES:
        figures = bench.figures(path)  # FigureError for a line that looks like figures but is not
        lines = bench.header(path)
        for line in lines:
            if bench.FIGURE_LINE.match(line) is None:
                assert not MEASUREMENT.findall(line), (
                    f"{path.name}: {line!r} states a figure that benchmarks/examples.py does not "
                    f"check; write it as '#   seed N: <phase> <measure> <value>'")
        data = yaml.safe_load(path.read_text())
        tests = [phase["name"] for phase in data.get("phases") or [] if phase.get("mode") == "test"]
        # A learner's example says what its test phase reaches (the parser found it), unless
        # the benchmark cannot run it (it needs servers of its own).
        assert path.stem in bench.NOT_RUN or all(
            any(figure.phase == name for figure in figures) for name in tests), path.name
        if not figures:
            continue
        assert path.stem not in bench.NOT_RUN
        text = "\n".join(lines)
        assert f"benchmarks/examples.py --only {path.stem}" in text, path.name
        seed = data.get("seed")
        assert seed in {figure.seed for figure in figures}, (
            f"{path.name}: its figures must include the file's own seed, {seed}")
        measures = {figure.measure for figure in figures}
        assert measures <= set(bench.MEASURES)
        if "win rate" in measures:  # counted for the agent 'learner': it has a seat
            for figure in figures:
                phase = bench.phases(data)[figure.phase]
                assert figure.measure != "win rate" or bench.learner_seats(phase), path.name


@pytest.mark.parametrize(("line", "problem"), [
    ("#   seed 0: test mean reward 500", "is not '<phase> <measure>"),
    ("#   seed 0: evaluate mean return 500", "no phase 'evaluate'"),
    ("#   seeds 0..3: test mean return 500", "write '#   seed N"),
    ("#   seed 0: test mean return 500, train env steps 10k", "is not '<phase> <measure>"),
])
def test_a_figure_the_benchmark_cannot_check_is_refused(tmp_path: Path, line: str,
                                                        problem: str) -> None:
    path = write_experiment(tmp_path, f"{line}\n{body('frozenlake_q.yml')}")
    with pytest.raises(bench.FigureError, match=re.escape(problem)):
        bench.figures(path)


def test_figures_hold_as_they_are_written(tmp_path: Path) -> None:
    path = write_experiment(tmp_path, "#   seeds 1-2, 4: test mean return 169.35; train env "
                            "steps 63.4k; test last-20 mean >= 475\n" + body("frozenlake_q.yml"))
    figures = bench.figures(path)
    assert [figure.seed for figure in figures] == [1, 2, 4] * 3
    mean, steps, last = figures[0], figures[3], figures[6]
    assert mean.holds(169.354) and not mean.holds(169.356)
    assert steps.holds(63_449) and steps.holds(63_350) and not steps.holds(63_451)
    assert last.holds(475) and not last.holds(474.99)
