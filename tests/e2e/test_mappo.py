"""End to end through the CLI: MAPPO on MPE2's simple_spread gives one digest in threads and
processes and stores its metrics, a run continued from its checkpoint gives the digest of the
whole, and an AEC environment, a missing global state and a Discrete observation are refused
with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.cli import query, run_mosaic, write_experiment

pytest.importorskip("mpe2")

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

EXPERIMENT = """\
    uid: spread
    seed: 3
    episodes: {episodes}
    placement: {placement}
    environments:
      - uid: spread
        env: {env}
        params: {params}
        policy_mapping: {mapping}
    agents:
      - uid: learner
        brain: mosaic.agents.learners:MAPPOBrain
        muscle: mosaic.agents.learners:MAPPOMuscle
        params: {{rollout_steps: 40, epochs: 2, minibatch_size: 20, hidden_sizes: [16],
                  learning_rate: 0.01,
                  agent_id: one_hot, critic: {critic}}}
        {load}
"""
SPREAD = "mpe2.simple_spread_v3:parallel_env"
STATE = "{global_state: true, max_cycles: 10}"
AGENTS = "{agent_0: learner, agent_1: learner, agent_2: learner}"
METRICS = {"policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm"}


def start(folder: Path, store: Path, *, name: str = "run", placement: str = "thread",
          episodes: int = 6, load: str = "", env: str = SPREAD, params: str = STATE,
          mapping: str = AGENTS, critic: str = "centralised") -> tuple[int, str]:
    """One invocation of the real command: its exit code and stderr."""
    path = write_experiment(folder, EXPERIMENT.format(
        episodes=episodes, placement=placement, env=env, params=params, mapping=mapping,
        critic=critic, load=load), f"{name}.yml")
    result = run_mosaic("experiment-start", str(path), "--store", str(store), "--quiet",
                        timeout=240)
    return result.returncode, result.stderr


def test_threads_and_processes_give_one_digest_and_a_continued_run_the_same(
        tmp_path: Path, process_tag: str) -> None:
    digests = {}
    for placement in ("thread", "process"):
        store = tmp_path / f"{placement}.sqlite"
        code, stderr = start(tmp_path, store, placement=placement)
        assert code == 0, stderr
        [(status, steps, digests[placement])] = query(store,
                                                      "SELECT status, steps, digest FROM runs")
        assert status == "finished" and steps == 6 * 10
        counts = dict(query(store, "SELECT name, COUNT(*) FROM metrics GROUP BY name"))
        # A rollout goes once 40 slot steps are held, each other slot's step still awaiting
        # its reward going with the next: four in the 180 slot steps.
        assert counts == dict.fromkeys(METRICS, 4), counts
    assert digests["thread"] == digests["process"]
    # The split falls before the first update (no value network yet) and after the second.
    for first in (1, 4):
        split = tmp_path / f"split-{first}.sqlite"
        code, stderr = start(tmp_path, split, episodes=first)
        assert code == 0, stderr
        code, stderr = start(tmp_path, split, episodes=6 - first, load="load: {phase: main}")
        assert code == 0, stderr
        [(_,), (second,)] = query(split, "SELECT digest FROM runs ORDER BY id")
        assert second == digests["thread"], f"split after {first} episode(s)"
    returns = "SELECT total_return FROM episodes ORDER BY run_id, episode"
    assert query(split, returns) == query(tmp_path / "thread.sqlite", returns)


@pytest.mark.parametrize(("env", "params", "mapping", "reason"), [
    ("mpe2.simple_spread_v3:env", STATE, AGENTS,
     "params.global_state gives the global state of a PettingZoo parallel environment, and "
     "it made a pettingzoo.AECEnv"),
    (SPREAD, "{max_cycles: 10}", AGENTS,
     "its centralised critic needs the global state, and environment 'spread' gives none in "
     "the info of slot 'agent_0': give that environment params: {global_state: true}"),
    ("pettingzoo:classic.rps_v2", "{api: parallel, global_state: true}",
     "{player_0: learner, player_1: learner}",
     "MAPPOBrain needs a Box observation and a Discrete or Box action space; slot 'player_0' "
     "has Discrete(4)"),
])
def test_unsupported_environments_and_spaces_are_refused_with_the_reason(
        tmp_path: Path, process_tag: str, env: str, params: str, mapping: str,
        reason: str) -> None:
    code, stderr = start(tmp_path, tmp_path / "refused.sqlite", env=env, params=params,
                         mapping=mapping, episodes=1)
    assert code != 0
    assert reason in stderr, stderr
    assert "Traceback" not in stderr
