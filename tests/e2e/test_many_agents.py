"""End to end: a PettingZoo parallel environment of many agents, several of them played by one
muscle, through the real ``mosaic`` command (the environment of benchmarks/many_agents.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mosaic.agents import RandomMuscle
from mosaic.core.errors import MosaicError
from tests.e2e.cli import query, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

AGENTS = 6
EPISODES = 3
STEPS = 100  # benchmarks.many_agents_env.EPISODE_STEPS

CROWD = """\
uid: crowd-{name}
seed: 3
episodes: {episodes}
placement: {placement}
environments:
  - uid: crowd
    env: benchmarks.many_agents_env:Crowd
    params: {{agents: {agents}}}
{mapping}agents:
"""
AGENT = """\
  - uid: {uid}
    muscle: {muscle}
"""


class FeedbackCountingMuscle(RandomMuscle):
    """A random player that fails the run when an episode starts with an action of one of its
    slots that never had its feedback, or when an episode went by without any feedback."""

    def setup(self, context: Any) -> None:
        super().setup(context)
        self._waiting: set[str] = set()
        self._episodes = 0
        self._feedbacks = 0

    def reset(self) -> None:
        super().reset()
        if self._waiting or self._feedbacks < self._episodes * STEPS * len(self.context.slots):
            raise MosaicError(f"episode {self._episodes}: {self._feedbacks} feedbacks; no "
                              f"feedback for the last actions of {sorted(self._waiting)}")
        self._episodes += 1

    def act(self, slot: str, observation: Any, legal_actions: Any = None) -> Any:
        if slot in self._waiting:
            raise MosaicError(f"{slot!r} acts again before the feedback of its last action")
        self._waiting.add(slot)
        return super().act(slot, observation, legal_actions)

    def feedback(self, slot: str, reward: float, terminated: bool, truncated: bool,
                 observation: Any) -> None:
        if slot not in self._waiting:
            raise MosaicError(f"feedback for {slot!r}, which has not acted since its last one")
        self._waiting.discard(slot)
        self._feedbacks += 1


def crowd(tmp_path: Path, name: str, placement: str, agents: dict[str, str],
          mapping: dict[str, str] | None = None) -> tuple[str, Path]:
    """Run a Crowd of AGENTS agents with ``agents`` (uid -> muscle class), mapped by
    ``mapping`` (none: the one agent takes every slot); return its digest and its store."""
    lines = "".join(f"      agent_{slot}: {uid}\n" for slot, uid in (mapping or {}).items())
    text = CROWD.format(name=name, episodes=EPISODES, placement=placement, agents=AGENTS,
                        mapping=f"    policy_mapping:\n{lines}" if mapping else "")
    text += "".join(AGENT.format(uid=uid, muscle=muscle) for uid, muscle in agents.items())
    path = write_experiment(tmp_path, text, f"{name}.yml")
    store = tmp_path / f"{name}.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store), "--quiet",
                        timeout=90)
    assert result.returncode == 0, result.stderr
    [(status, error, digest, steps)] = query(store, "SELECT status, error, digest, steps "
                                                    "FROM runs")
    assert (status, error, steps) == ("finished", None, EPISODES * STEPS)
    return digest, store


def test_one_muscle_playing_every_agent_gives_one_digest_in_threads_and_processes(
        tmp_path: Path, process_tag: str) -> None:
    """Its answer carries an action for each of its slots; each slot's row is recorded, with
    its own reward, and the run's digest does not depend on the placement."""
    random = {"everyone": "mosaic.agents:RandomMuscle"}
    digests = {placement: crowd(tmp_path, placement, placement, random)[0]
               for placement in ("thread", "process")}
    assert digests["thread"] == digests["process"]
    _, store = crowd(tmp_path, "rows", "thread", random)
    rows = query(store, "SELECT episode, step, slot, reward FROM steps ORDER BY id")
    assert len(rows) == EPISODES * STEPS * AGENTS
    assert {(episode, step) for episode, step, _, _ in rows} == {
        (episode, step) for episode in range(EPISODES) for step in range(STEPS)}
    assert {slot for _, _, slot, _ in rows} == {f"agent_{index}" for index in range(AGENTS)}
    assert {reward for *_, reward in rows} == {1.0}


def test_muscles_sharing_the_agents_get_each_slots_feedback_and_one_digest(
        tmp_path: Path, process_tag: str) -> None:
    """Two agents, three env agents each: every action of each slot gets its feedback before
    the slot acts again, and the digest is the same in threads and in processes."""
    counting = "tests.e2e.test_many_agents:FeedbackCountingMuscle"
    agents = {"left": counting, "right": counting}
    mapping = {str(index): ("left", "right")[index % 2] for index in range(AGENTS)}
    thread, _ = crowd(tmp_path, "two-thread", "thread", agents, mapping)
    process, _ = crowd(tmp_path, "two-process", "process", agents, mapping)
    assert thread == process
