"""The progress display of a run: a run that learns counts env steps and its ETA is the steps
left at its rate of steps (a learner's episodes grow longer); a run that does not, episodes.

The display is driven as the executor drives it: a run's real context, whose counters the
simulation controller would move, and a clock the test moves."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from mosaic.api.progress import ProgressDisplay, counts_steps
from mosaic.conductors.run_context import RunContext
from mosaic.experiment import load_experiment
from tests.e2e.cli import cartpole, write_experiment

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
PPO = "mosaic.agents.learners:PPOMuscle"


def _context(tmp_path: Path, *, learner: bool, mode: str = "train") -> RunContext:
    text = cartpole(episodes=100, muscle=PPO if learner else "mosaic.agents:RandomMuscle",
                    mode=mode)
    if learner:
        text = text.replace(f"muscle: {PPO}", "brain: mosaic.agents.learners:PPOBrain\n"
                            f"        muscle: {PPO}")
    experiment = load_experiment(write_experiment(tmp_path, text))
    ctx = RunContext.for_run(experiment.uid, "r0", 1, 7, experiment.run_config(0), None)
    ctx.progress.episodes_total = 100
    return ctx


class _Terminal(io.StringIO):
    """What rich takes for a terminal: bars are drawn into it as onto a screen."""

    def isatty(self) -> bool:
        return True


def _drive(display: ProgressDisplay, ctx: RunContext, clock: list[float],
           seen: tuple[tuple[float, int, int], ...]) -> None:
    """Show ``ctx``'s run at each (time, episodes, steps) of ``seen``."""
    for at, episodes, steps in seen:
        clock[0] = at
        ctx.progress.episodes, ctx.progress.steps = episodes, steps
        display.update(0, ctx)


#: At 1,000 steps/s throughout: 10 episodes of 1,000 steps, then 100 of 100 steps (of 200),
#: as an Acrobot learner's episodes shorten.
SHORTENING = ((0.0, 0, 0), (10.0, 10, 10_000), (20.0, 110, 20_000))
#: At 1,000 steps/s: 50 episodes of 20 steps, then 10 of 100 (of 100), as CartPole's lengthen.
LENGTHENING = ((1.0, 50, 1000), (2.0, 60, 2000))


def test_a_learner_counts_env_steps_and_its_eta_is_of_steps(tmp_path: Path) -> None:
    ctx = _context(tmp_path, learner=True)
    assert counts_steps(ctx.config)
    ctx.progress.episodes_total = 200
    clock = [0.0]
    out = io.StringIO()
    display = ProgressDisplay(1, out, live=False, clock=lambda: clock[0])
    _drive(display, ctx, clock, SHORTENING)
    display.close()
    # 20,000 steps taken, and 90 episodes left of the last ones' 100 steps: 29,000; 9,000
    # left at 1,000 steps/s, 9 s (90 episodes left at 5.5 episodes/s would be 16 s).
    assert out.getvalue().splitlines()[-1] == (
        "run 1/1: 68% (20,000/29,000 env steps), ETA 9 s, 1,000 steps/s, "
        "mean return (last 100) -")

    # Its estimate falls as its episodes lengthen: the line says so, not nothing.
    ctx = _context(tmp_path, learner=True)
    out = io.StringIO()
    display = ProgressDisplay(1, out, live=False, clock=lambda: clock[0])
    _drive(display, ctx, clock, LENGTHENING)
    display.close()
    assert [line.split(",")[0] for line in out.getvalue().splitlines()] == [
        "run 1/1: 50% (1", "run 1/1: 33% (2"]


def test_a_learners_bar_counts_env_steps(tmp_path: Path) -> None:
    ctx = _context(tmp_path, learner=True)
    clock = [0.0]
    screen = _Terminal()
    bars = ProgressDisplay(1, screen, clock=lambda: clock[0])
    assert bars.live
    _drive(bars, ctx, clock, LENGTHENING)
    bars.close()
    drawn = ANSI.sub("", screen.getvalue())
    # 2,000 steps and 40 episodes left of 100 steps: 6,000; 4 s left at 1,000 steps/s (by
    # episodes, 40 left at 10 a second: 4 s too, but 33% done, not 60%).
    assert re.search(r"run 1/1 .* 33% ETA 4 s 2,000/6,000 env steps 1,000 steps/s", drawn), drawn


@pytest.mark.parametrize("learner", [False, True])
def test_a_run_that_does_not_learn_counts_episodes(tmp_path: Path, learner: bool) -> None:
    # A random agent; or the learner in a test phase, where it does not learn.
    ctx = _context(tmp_path, learner=learner, mode="test")
    assert not counts_steps(ctx.config)
    clock = [0.0]
    out = io.StringIO()
    display = ProgressDisplay(1, out, live=False, clock=lambda: clock[0])
    _drive(display, ctx, clock, LENGTHENING)
    display.close()
    assert out.getvalue().splitlines()[-1] == (
        "run 1/1: 60% (60/100 episodes), ETA 4 s, 1,000 steps/s, mean return (last 100) -")
