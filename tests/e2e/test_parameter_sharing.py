"""Parameter sharing through the real CLI: several PettingZoo agents mapped to one mosaic agent
share its brain, each built-in learner keeps every slot's trajectory apart, in a parallel and
in a turn-based game, in threads and processes alike, and a continued run gives the digest of
the uninterrupted one.

The games (``tests/fixtures/tagged_agents.py``) tag each observation and reward with its agent
and step, and the ``Checked*`` brains fail the run on any experience that mixes two slots;
they report how many of each slot's steps reached them, which the test compares with the
steps the store recorded.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from tests.e2e.cli import query, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

#: env agent -> (its kind in the tagged game, the mosaic agent it is mapped to). Per learner,
#: the last slot leaves the game early (``LEAVE``).
SLOTS = {
    "p0": ("discrete", "ppo"), "p1": ("discrete", "ppo"), "p2": ("discrete", "ppo"),
    "g3": ("discrete", "pg"), "g4": ("discrete", "pg"),
    "d5": ("discrete", "dqn"), "d6": ("discrete", "dqn"),
    "q7": ("table", "tabular"), "q8": ("table", "tabular"),
    "t9": ("box", "td3"), "t10": ("box", "td3"),
    "s11": ("box", "sac"), "s12": ("box", "sac"),
}
LEAVE = {"p2": 5, "g4": 4, "d6": 6, "q8": 3, "t10": 5, "s12": 7}
LENGTH = 9
PPO_ROLLOUT = 20

#: mosaic agent -> (brain, muscle, params). PPO, DQN and TD3 see the agent id.
LEARNERS = {
    "ppo": ("tests.fixtures.tagged_agents:CheckedPPOBrain", "mosaic.agents.learners:PPOMuscle",
            f"{{rollout_steps: {PPO_ROLLOUT}, epochs: 2, minibatch_size: 16, "
            "hidden_sizes: [8], agent_id: one_hot}"),
    "pg": ("tests.fixtures.tagged_agents:CheckedPolicyGradientBrain",
           "mosaic.agents.learners:PolicyGradientMuscle", "{batch_episodes: 3, hidden_sizes: [8]}"),
    "dqn": ("tests.fixtures.tagged_agents:CheckedDQNBrain", "mosaic.agents.learners:DQNMuscle",
            "{learning_starts: 10, batch_size: 8, hidden_sizes: [8], sync_every: 2, "
            "epsilon_decay_steps: 50, agent_id: one_hot}"),
    "tabular": ("tests.fixtures.tagged_agents:CheckedTabularQBrain",
                "mosaic.agents.learners:TabularQMuscle", "{update_every: 3}"),
    "td3": ("tests.fixtures.tagged_agents:CheckedTD3Brain", "mosaic.agents.learners:TD3Muscle",
            "{learning_starts: 10, random_steps: 5, batch_size: 8, hidden_sizes: [8], "
            "sync_every: 2, agent_id: one_hot}"),
    "sac": ("tests.fixtures.tagged_agents:CheckedSACBrain", "mosaic.agents.learners:SACMuscle",
            "{learning_starts: 10, random_steps: 5, batch_size: 8, hidden_sizes: [8], "
            "sync_every: 2}"),
}


def experiment(uid: str, placement: str, episodes: int, games: tuple[str, ...],
               load: str = "") -> str:
    kinds = ", ".join(f"{slot}: {kind}" for slot, (kind, _) in SLOTS.items())
    leave = ", ".join(f"{slot}: {at}" for slot, at in LEAVE.items())
    mapping = ", ".join(f"{slot}: {agent}" for slot, (_, agent) in SLOTS.items())
    text = f"uid: {uid}\nseed: 5\nepisodes: {episodes}\nplacement: {placement}\n"
    text += "environments:\n"
    for game in games:
        text += (f"  - uid: {game.lower()}\n    env: tests.fixtures.tagged_agents:{game}\n"
                 f"    params: {{agents: {{{kinds}}}, length: {LENGTH}, leave: {{{leave}}}}}\n"
                 f"    policy_mapping: {{{mapping}}}\n")
    text += "agents:\n"
    for agent, (brain, muscle, params) in LEARNERS.items():
        text += (f"  - uid: {agent}\n    brain: {brain}\n    muscle: {muscle}\n"
                 f"    params: {params}\n")
        if load:
            text += f"    {load}\n"
    return text


def run(folder: Path, name: str, text: str, store: Path) -> tuple[str, str]:
    """One invocation of the real command, which must finish; its run's uid and digest."""
    path = write_experiment(folder, text, f"{name}.yml")
    result = run_mosaic("experiment-start", str(path), "--store", str(store), "--quiet",
                        timeout=200)
    assert result.returncode == 0, result.stderr
    [(uid, status, error, digest)] = query(
        store, "SELECT uid, status, error, digest FROM runs ORDER BY id DESC LIMIT 1")
    assert (status, error) == ("finished", None)
    return uid, digest


def test_every_learner_keeps_the_slots_it_shares_apart(tmp_path: Path,
                                                       process_tag: str) -> None:
    store = tmp_path / "results.sqlite"
    run(tmp_path, "shared", experiment("shared", "thread", 5, ("TaggedParallel", "TaggedAEC")),
        store)
    recorded: dict[tuple[str, str], int] = defaultdict(int)
    for agent, slot, count in query(store, "SELECT agent, slot, COUNT(*) FROM steps "
                                           "GROUP BY agent, slot"):
        recorded[agent, slot] = count
    learnt: dict[tuple[str, str], float] = defaultdict(float)
    rollouts = []
    for agent, name, value in query(store, "SELECT agent, name, value FROM metrics "
                                           "WHERE name LIKE 'steps.%' OR name = 'rollout'"):
        if name == "rollout":
            rollouts.append(value)
        else:
            learnt[agent, name.removeprefix("steps.")] += value
    assert set(recorded) == {(agent, slot) for slot, (_, agent) in SLOTS.items()}
    for (agent, slot), steps in recorded.items():
        if agent == "ppo":
            # What a rollout not yet due at the end holds never reaches the brain.
            assert 0 < learnt[agent, slot] <= steps, (slot, learnt[agent, slot], steps)
        else:
            # Every step of every slot, each in its own trajectory or transition.
            assert learnt[agent, slot] == steps, (agent, slot, learnt[agent, slot], steps)
    # Each PPO rollout holds every step whose outcome was known when it fell due: all but the
    # last one of each other slot of the muscle, not just the steps of one slot.
    assert rollouts and min(rollouts) >= PPO_ROLLOUT - 2, rollouts


def test_shared_learners_give_one_digest_in_threads_and_processes_and_when_continued(
        tmp_path: Path, process_tag: str) -> None:
    games = ("TaggedParallel",)
    _, whole = run(tmp_path, "whole", experiment("continued", "thread", 6, games),
                   tmp_path / "whole.sqlite")
    _, in_processes = run(tmp_path, "processes", experiment("continued", "process", 6, games),
                          tmp_path / "processes.sqlite")
    assert in_processes == whole
    split = tmp_path / "split.sqlite"
    _, first = run(tmp_path, "first", experiment("continued", "thread", 3, games), split)
    _, second = run(tmp_path, "second", experiment("continued", "thread", 3, games,
                                                   "load: {phase: main}"), split)
    assert second == whole
    assert first != whole


REFUSED = """\
uid: refused
episodes: 1
placement: thread
environments:
  - uid: first
    env: tests.fixtures.tagged_agents:TaggedParallel
    params: {{agents: {first}}}
    policy_mapping: {first_mapping}
{second}agents:
  - uid: team
    brain: mosaic.agents.learners:{learner}Brain
    muscle: mosaic.agents.learners:{learner}Muscle
    params: {params}
"""
SECOND = """\
  - uid: second
    env: tests.fixtures.tagged_agents:TaggedParallel
    params: {agents: {p0: discrete}}
    policy_mapping: {p0: team}
"""


def refused(tmp_path: Path, command: str, learner: str = "PPO", params: str = "{}",
            first: str = "{p0: discrete, p1: discrete}", second: str = "") -> str:
    """Run ``command`` on a file that shares one agent's learner; it must fail without a
    traceback: its stderr."""
    slots = first.strip("{}").split(", ")
    mapping = "{" + ", ".join(f"{slot.split(':')[0]}: team" for slot in slots) + "}"
    path = write_experiment(tmp_path, REFUSED.format(first=first, first_mapping=mapping,
                                                     second=second, learner=learner,
                                                     params=params))
    options = () if command == "experiment-check" else ("--store", str(tmp_path / "r.sqlite"),
                                                        "--quiet")
    result = run_mosaic(command, str(path), *options, timeout=100)
    assert result.returncode == (2 if command == "experiment-check" else 1), result.stderr
    assert "Traceback" not in result.stderr
    return result.stderr


def test_what_cannot_be_shared_is_refused_with_the_reason(tmp_path: Path,
                                                          process_tag: str) -> None:
    # Tabular Q has no network to append an agent id to: refused when the file is checked.
    error = refused(tmp_path, "experiment-check", "TabularQ", "{agent_id: one_hot}",
                    "{q0: table, q1: table}")
    assert "experiment.yml:13: agents[0].params.agent_id: expected none, got 'one_hot': " \
           "tabular Q has no network" in error
    # One policy for slots of different spaces: refused when the file is checked, at the
    # agent's brain, naming them; and at set-up, should the check be skipped.
    errors = {command: refused(tmp_path, command, first="{p0: discrete, b1: box}")
              for command in ("experiment-check", "experiment-start")}
    for error in errors.values():
        assert "PPOBrain shares one policy across its slots (p0, b1: the env agents " \
               "policy_mapping maps to this agent)" in error
    assert "experiment.yml:11: agents[0].brain: in tests.fixtures.tagged_agents:TaggedParallel" \
           in errors["experiment-check"], errors["experiment-check"]
    # Agent ids for an agent that has other slots in another environment.
    error = refused(tmp_path, "experiment-start", params="{agent_id: one_hot}", second=SECOND)
    assert "agent_id: one_hot appends one input per slot of the agent: this muscle serves 1 " \
           "(p0)" in error
