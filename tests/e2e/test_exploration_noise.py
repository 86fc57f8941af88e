"""End to end through the CLI: exploration that is kept up over many steps, on
MountainCarContinuous. TD3 with Ornstein-Uhlenbeck noise and SAC with gSDE (an exploration
matrix per copy) give one digest in threads and processes (copies, and TD3's in rollout workers,
each with its own process), their per-step Gaussian counterpart another, and a run continued from
its checkpoint gives the digest of the whole; a bad noise is refused at the key."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.cli import check_continuation, query, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

EXPERIMENT = """\
    uid: {uid}
    seed: {seed}
    episodes: {episodes}
    max_steps: 60
    placement: {placement}
    environments:
      - uid: mountaincar
        env: gymnasium:MountainCarContinuous-v0
        {copies}
        {rollouts}
    agents:
      - uid: learner
        brain: mosaic.agents.learners:{learner}Brain
        muscle: mosaic.agents.learners:{learner}Muscle
        params: {{{params}
                  {option_params}}}
        {load}
"""


@dataclass(frozen=True)
class Exploration:
    """A learner with exploration kept up over many steps: its seed, its params (the second
    line with the option as ``{option}``), the option's value and the per-step one, and the
    metrics its brain stores (None: not checked)."""

    seed: int
    learner: str
    params: str
    option_params: str
    option: str
    per_step: str
    metrics: frozenset[str] | None = None


EXPLORATIONS = {
    "td3-ornstein-uhlenbeck": Exploration(
        4, "TD3", "hidden_sizes: [16], batch_size: 32, learning_starts: 60, random_steps: 20,",
        "sync_every: 5, noise: {option}, exploration_noise: 0.5",
        "ornstein-uhlenbeck", "gaussian"),
    # The continuation's split falls after the first updates, with log_std learnt and sent to
    # the muscle.
    "sac-gsde": Exploration(
        5, "SAC", "hidden_sizes: [16], batch_size: 32, learning_starts: 40, random_steps: 20,",
        "sync_every: 5, learn_alpha: false, initial_alpha: 0.1, exploration: {option}, "
        "sde_sample_freq: 25, log_std_init: -1.0",
        "gsde", "gaussian",
        frozenset({"critic_loss", "actor_loss", "q_mean", "alpha", "entropy"})),
}


def experiment(exploration: Exploration, name: str, *, placement: str = "thread",
               episodes: int = 6, copies: int = 1, load: str = "", option: str | None = None,
               rollouts: int = 0) -> str:
    """The experiment file's text for ``exploration`` (``option``: another value of it)."""
    return EXPERIMENT.format(
        uid=name, seed=exploration.seed, episodes=episodes, placement=placement, load=load,
        learner=exploration.learner, params=exploration.params,
        option_params=exploration.option_params.format(option=option or exploration.option),
        copies=f"copies: {copies}" if copies > 1 else "",
        rollouts=f"rollouts: {rollouts}" if rollouts else "")


def start(folder: Path, name: str, store: Path, *, kind: str, **settings: Any
          ) -> tuple[int, str]:
    """One invocation of the real command with the exploration ``kind``: its exit code and
    stderr (``settings``: :func:`experiment`'s)."""
    path = write_experiment(folder, experiment(EXPLORATIONS[kind], name, **settings),
                            f"{name}.yml")
    result = run_mosaic("experiment-start", str(path), "--store", str(store), "--quiet",
                        timeout=240)
    return result.returncode, result.stderr


@pytest.mark.parametrize(("kind", "rollouts"), [("td3-ornstein-uhlenbeck", 0),
                                                ("td3-ornstein-uhlenbeck", 2),
                                                ("sac-gsde", 0)])
def test_threads_and_processes_give_one_digest_with_copies(tmp_path: Path, process_tag: str,
                                                           kind: str, rollouts: int) -> None:
    """With copies, and with copies in rollout workers (each worker's muscle has its own)."""
    exploration = EXPLORATIONS[kind]
    digests = {}
    for placement in ("thread", "process"):
        store = tmp_path / f"{placement}.sqlite"
        code, stderr = start(tmp_path, placement, store, kind=kind, placement=placement,
                             copies=2, rollouts=rollouts, episodes=8)
        assert code == 0, stderr
        [(status, steps, digests[placement])] = query(store,
                                                      "SELECT status, steps, digest FROM runs")
        assert status == "finished" and steps == 8 * 60
        if exploration.metrics is not None:
            counts = dict(query(store, "SELECT name, COUNT(*) FROM metrics GROUP BY name"))
            assert set(counts) == exploration.metrics
    assert digests["thread"] == digests["process"]
    # The option reaches the muscle (and the brain): per-step noise takes another trajectory.
    per_step = tmp_path / "per-step.sqlite"
    code, stderr = start(tmp_path, "thread", per_step, kind=kind, copies=2,
                         option=exploration.per_step, rollouts=rollouts, episodes=8)
    assert code == 0, stderr
    [(digest,)] = query(per_step, "SELECT digest FROM runs")
    assert digest != digests["thread"]


@pytest.mark.parametrize("kind", sorted(EXPLORATIONS))
def test_a_run_continued_from_its_checkpoint_gives_the_digest_of_the_whole(
        tmp_path: Path, process_tag: str, kind: str) -> None:
    check_continuation(functools.partial(start, kind=kind), tmp_path, 2)


def test_a_bad_noise_is_refused_at_its_key_before_anything_starts(tmp_path: Path) -> None:
    path = write_experiment(tmp_path, experiment(EXPLORATIONS["td3-ornstein-uhlenbeck"], "bad",
                                                 episodes=1, option="pink"))
    result = run_mosaic("experiment-check", str(path), timeout=100)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert ("experiment.yml:16: agents[0].params.noise: expected 'gaussian' or "
            "'ornstein-uhlenbeck', got the text 'pink'") in result.stderr, result.stderr
